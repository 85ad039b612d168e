"""What a program loaded at run time costs per inference against the same program embedded.

Usage::

    PYTHONPATH=python:. python benchmarks/bench_loaded.py [--cores m55,m33] [--build-dir DIR]

An embedded program's kernel calls run from the table of CMSIS-NN parameters ``embed`` prepared
ahead of time (``kernels/include/cortex_m_nn/prepared.h``); a program loaded from an image
(``docs/program-image.md``) derives them in each call. One build per core
(``tests/target/test_loader.py``'s) holds both: the loader running programs A (DS-CNN, int8
inputs and outputs) and B (a GRU keyword spotter) from images QEMU places outside it, and the
runners with A and B embedded. The insncount plugin counts exactly the instructions of one
``Model::run()`` in each (``bench_start()``/``bench_stop()``), and each output must equal the
reference. Prints instructions per inference, loaded ÷ embedded, and the extra instructions per
kernel call. Needs ``EXECUTORCH_ROOT``, ``CMSIS_NN_PATH`` and ``FLATBUFFERS_INCLUDE_DIR``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from insncount import regions  # noqa: E402
from tests.target import harness  # noqa: E402
from tests.target.test_loader import build_loader  # noqa: E402

from cortex_m_nn.embed.pte_source import model_facts  # noqa: E402


def measure(core: harness.Core, root: Path, plugin: Path) -> list[dict[str, object]]:
    """Per program (A, B): instructions of one run loaded and embedded, and its kernel calls."""
    built = build_loader(core, root)
    loaded = harness.run(built.build / "loader.elf", core, str(plugin), places=built.places)
    if loaded.returncode != 0 or not loaded.stdout.rstrip().endswith("loader: PASS"):
        raise SystemExit(f"the loader failed on {core.name}:\n{loaded.stdout}{loaded.stderr}")
    counts = [count for count, _ in regions(loaded.stderr + loaded.stdout)]
    rows = []
    for index, name in enumerate(built.names):  # regions: A, B, A again
        embedded = harness.run(built.build / f"runner_{name}.elf", core, str(plugin))
        if embedded.returncode != 0:
            raise SystemExit(f"runner_{name} failed on {core.name}:\n{embedded.stdout}")
        first = regions(embedded.stderr + embedded.stdout)[0][0]
        pte = (root / "models" / f"{name}.pte").read_bytes()
        rows.append({
            "core": core.name, "program": name, "calls": len(model_facts(pte).prepared),
            "embedded": first, "loaded": counts[index],
        })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", default="m55,m33")
    parser.add_argument("--build-dir", type=Path, default=Path("build/bench_loaded"))
    args = parser.parse_args(argv)
    missing = harness.missing()
    if missing is not None:
        print(f"bench_loaded: {missing}", file=sys.stderr)
        return 2
    plugin = harness.build_plugin(args.build_dir / "plugin")
    rows = []
    for name in args.cores.split(","):
        core = harness.CORES[name]
        rows += measure(core, args.build_dir / f"loader-{core.name}", plugin)
    print(f"{'core':<5}{'program':<18}{'calls':>6}{'embedded':>12}{'loaded':>12}"
          f"{'loaded/emb':>11}{'extra/call':>11}")  # fmt: skip
    for row in rows:
        embedded, loaded, calls = int(row["embedded"]), int(row["loaded"]), int(row["calls"])
        print(f"{row['core']:<5}{row['program']:<18}{calls:>6}{embedded:>12,}{loaded:>12,}"
              f"{loaded / embedded:>11.4f}{(loaded - embedded) / calls:>11.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
