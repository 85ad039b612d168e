"""Instructions per inference on emulated Cortex-M cores, per model, and the runner's flash/RAM.

Usage (from the repository root; needs what tests/target needs: EXECUTORCH_ROOT, CMSIS_NN_PATH,
arm-none-eabi-gcc, qemu-system-arm, flatbuffers ≥ 23 — see README "On target")::

    PYTHONPATH=python:. python benchmarks/bench_target.py [--cores m55,m33,m4,m3]
        [--models ds_cnn,resnet8,mobilenet_v1_025,autoencoder] [--build-dir DIR] [--json FILE]
        [--io int8] [--peers executorch,tflm] [--weights mlperf|zoo]

The peers need what their modules say (benchmarks/peer_executorch.py: the peer's pipeline
importable, see benchmarks/peer.py; benchmarks/peer_tflm.py: TFLM_ROOT, MLPERF_TINY_ROOT).

``--build-dir .pytest_cache/d`` reuses the builds of ``pytest tests/target`` (only the models
are recompiled and the runners relinked).

For each core, every model is compiled (``--target`` of that core), embedded in the bare-metal
runner (tests/target/runner, ``-O3``, selective registration) and run once under QEMU with the
insncount TCG plugin (benchmarks/qemu/plugin, ``symbols=on``). Per model and core it prints:

* instructions per inference: exactly the instructions between ``bench_start()`` and
  ``bench_stop()`` around ``Method::execute()`` (the whole graph: quantize of the float input,
  every kernel, dequantize of the output, ExecuTorch's dispatch);
* CMSIS-NN share: the instructions executed inside functions defined by the CMSIS-NN library
  (every function symbol of ``libcmsis-nn.a``), as a fraction of the above;
* instructions per MAC: instructions per inference ÷ the model's MACs (compile report);
* flash and RAM of the runner ELF (``cortex_m_nn.embed.firmware.inspect``; RAM = ``.data`` +
  ``.bss`` incl. the planned arena and method allocator, stack and heap not counted), by
  component, and the kernel cases it links (each case's function's bytes) with CMSIS-NN's bytes
  by width (an image links only the cases its program calls);
* whether the outputs were bit-exact against the Python reference (the runner's exit status);
* the model boundary: instructions in our quantize and dequantize kernels per element of the
  float input and output;
* a per-layer profile: the runner runs forward a second time one kernel call at a time
  (``Model::run_profiled``), each call a region of the plugin; per call the operator, the
  report's layer, the CMSIS-NN function (or our compute function, marked "(ours)") that
  executed most of it, instructions, MACs and MACs per instruction (also in ``--json`` under
  ``calls``).

Then, in the same run, on the same QEMU machines with the same plugin, BSP, toolchain, flags and
CMSIS-NN, the peers (``--peers``): ExecuTorch 1.5.1's own ``backends/cortex_m``
(benchmarks/peer_executorch.py: its pipeline, runtime and kernels, float input as its models
take) and TensorFlow Lite Micro + CMSIS-NN (benchmarks/peer_tflm.py: the MLPerf Tiny reference
int8 models, int8 input). It prints instructions per inference ours / each peer / ours ÷ the
better peer, and each image's flash and RAM with our flash ÷ the smaller peer's. A peer that
cannot run here (no ``TFLM_ROOT`` or ``MLPERF_TINY_ROOT``, the peer's pipeline not importable)
says why in its column; the rest runs.

The weights (``--weights``): with ``TFLM_ROOT`` and ``MLPERF_TINY_ROOT`` set, the four MLPerf
Tiny models run by default the trained weights and int8 quantization of the ``.tflite``
files TFLM runs (benchmarks/mlperf_weights.py), on TFLM's input pattern: ours and TFLM then
execute the same integer network, so CMSIS-NN's data-dependent work (softmax's skipped
exponentials, rounding branches) is the same in both and the totals compare the runtimes; the
peer table says whether our outputs are TFLM's byte for byte. The ExecuTorch peer compiles the
same trained float models. ``--weights zoo``: the zoo's seeded weights and calibration.

These are instructions, not cycles: QEMU has no timing model.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from operator import itemgetter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "python"), str(REPO)]
warnings.filterwarnings("ignore")

import insncount  # noqa: E402
import mlperf_weights  # noqa: E402
from insncount import as_json, components, library_functions, regions  # noqa: E402
from tests.target import harness  # noqa: E402

from cortex_m_nn.core.options import IoType  # noqa: E402
from cortex_m_nn.embed import firmware  # noqa: E402


def compile_run(
    name: str, core: harness.Core, io: IoType | None, trained: bool, schedule: str = "fast"
) -> harness.ModelRun:
    """The model ``name`` compiled for ``core`` in memory ``schedule``: with the MLPerf file's
    weights and quantization when ``trained`` and MLPerf has it, else the zoo's (tests/target)."""
    if trained and name in mlperf_weights.MODELS:
        return mlperf_weights.compile_run(name, core, io, schedule)
    return harness.compile_for(name, core, io=io, schedule=schedule)


def cmsis_nn_functions(build_dir: Path) -> set[str]:
    """Function symbols defined by the CMSIS-NN static library of this build."""
    return library_functions(next(build_dir.rglob("libcmsis-nn.a")))


def kernel_calls(run: harness.ModelRun) -> list[tuple[str, Any]]:
    """(operator, report row or None) of each kernel call of the program, in order: the
    lowered graph's operator nodes are the program's kernel calls, in the same order (all
    rows None when they cannot be matched so)."""
    from cortex_m_nn.serialize.pte import forward_plan

    plan = forward_plan(run.compiled.pte)
    names = [plan.operators[i.op_index][0] for i in plan.instructions if i.kind == "KernelCall"]
    nodes = [
        n
        for n in run.compiled.lowered.graph.nodes
        if n.op == "call_function" and "getitem" not in str(n.target)
    ]
    rows: dict[str, Any] = {}
    for record in run.compiled.records:  # the first row naming a node is the operator's
        if record.output_node:
            rows.setdefault(record.output_node, record)
    # in order, skipping nodes that became no kernel call (views ExecuTorch turns into aliases)
    matched: list[Any] = []
    remaining = iter(nodes)
    for name in names:
        op = name.split("::")[-1].removesuffix(".out")
        matched.append(next((n for n in remaining if str(n.target).split(".")[1] == op), None))

    def row(node: Any) -> Any:
        """The report row of ``node``: by its name, or its output's (a scratch operator's
        output is ``getitem`` 0 of it)."""
        outputs = [u.name for u in node.users if "getitem" in str(u.target) and u.args[1] == 0]
        return next((rows[n] for n in [node.name, *outputs] if n in rows), None)

    if None in matched:
        return [(name, None) for name in names]
    return [(name, row(node)) for name, node in zip(names, matched, strict=True)]


def profile(
    run: harness.ModelRun, calls: list[tuple[int, dict[str, int]]], cmsis: set[str]
) -> list[dict]:
    """Per kernel call: operator, the CMSIS-NN function that ran most, instructions, MACs."""
    rows = []
    for index, ((operator, record), (instructions, symbols)) in enumerate(
        zip(kernel_calls(run), calls, strict=True)
    ):
        ran = sorted((n, name) for name, n in symbols.items() if name in cmsis)
        ours = our_function(symbols)
        if ours is not None and (not ran or ours[0] > ran[-1][0]):
            ran.append(ours)
        macs = record.macs if record is not None else None
        rows.append(
            {
                "call": index,
                "operator": operator,
                "layer": record.name if record is not None else None,
                "cmsis_nn_function": ran[-1][1] if ran else None,
                "instructions": instructions,
                "macs": macs,
                "macs_per_instruction": macs / instructions if macs and instructions else None,
            }
        )
    return rows


def our_function(symbols: dict[str, int]) -> tuple[int, str] | None:
    """The instructions a call ran in our compute functions (``kernels/compute``: mangled
    ``cortex_m_nn::compute::``), named by the public one among them."""
    ours = {name: n for name, n in symbols.items() if "11cortex_m_nn7compute" in name}
    if not ours:
        return None
    names: set[str] = set()
    for name in ours:  # the identifier after the namespace, by its length prefix
        m = re.search(r"7compute(\d+)", name)
        end = m.end() + int(m.group(1)) if m else 0
        identifier = name[m.end() : end] if m else ""
        if identifier and name[end : end + 1] == "E":  # a function of the namespace itself
            names.add(identifier)
    return sum(ours.values()), f"{min(names) if names else 'compute'} (ours)"


def measure(run: harness.ModelRun, core: harness.Core, build_dir: Path, plugin: Path) -> dict:
    elf = build_dir / f"runner_{run.name}.elf"
    result = harness.run(elf, core, f"{plugin},symbols=on")
    # region 0: the whole forward; then one region per kernel call (the runner's second run)
    found = regions(result.stderr + result.stdout)
    instructions, symbols = found[0] if found else (None, {})
    cmsis = cmsis_nn_functions(build_dir)
    in_cmsis = sum(n for name, n in symbols.items() if name in cmsis)
    macs = sum(r.macs for r in run.compiled.records)
    report = firmware.inspect(elf, run.compiled.pte)
    top = sorted(symbols.items(), key=lambda kv: -kv[1])[:5]
    boundary = {kind: boundary_instructions(symbols, kind) for kind in ("quantize", "dequantize")}
    elements = {
        "quantize": sum(x.numel() for x in run.inputs if x.is_floating_point()),
        "dequantize": sum(y.numel() for y in run.expected if y.is_floating_point()),
    }
    return {
        "model": run.name,
        "io": run.compiled.io.type.value,
        "core": core.name,
        "bit_exact": result.returncode == 0
        and result.outputs() == harness.output_bytes(run.expected),
        "instructions": instructions,
        "cmsis_nn_instructions": in_cmsis,
        "cmsis_nn_share": in_cmsis / instructions if instructions else None,
        "macs": macs,
        "instructions_per_mac": instructions / macs if instructions and macs else None,
        "flash_bytes": report["flash_bytes"],
        "ram_bytes": report["ram_bytes"],
        "flash": report["flash"],
        "ram": report["ram"],
        "cases": report["cases"],
        "cmsis_nn_widths": report["cmsis_nn_widths"],
        "pte_bytes": len(run.compiled.pte),
        "arena_bytes": run.compiled.arena_bytes,
        "method_allocator_used": result.method_allocator_used(),
        "outputs": [b.hex() for b in result.outputs()],
        "top_functions": top,
        "boundary_instructions": boundary,
        "boundary_elements": elements,
        # a runner that failed marks no regions per call: its output says why
        "calls": profile(run, found[1:], cmsis) if result.returncode == 0 else [],
    }


def profile_table(row: dict) -> str:
    """The per-call profile of one model and core."""
    head = (
        f"{'#':>3} {'layer':<14}{'operator':<30}{'CMSIS-NN function':<36}{'instructions':>13}"
        f"{'MACs':>11}{'MACs/insn':>10}"
    )
    lines = [f"{row['model']} on {row['core']}, per kernel call:", head, "-" * len(head)]
    for c in row["calls"]:
        per = f"{c['macs_per_instruction']:.3f}" if c["macs_per_instruction"] else "-"
        lines.append(
            f"{c['call']:>3} {(c['layer'] or '-')[:13]:<14}{c['operator'][:29]:<30}"
            f"{(c['cmsis_nn_function'] or '-')[:35]:<36}"
            f"{c['instructions']:>13,}{c['macs'] if c['macs'] is not None else '-':>11}{per:>10}"
        )
    total = sum(c["instructions"] for c in row["calls"])
    lines.append(f"    sum of the calls {total:,} of {row['instructions'] or 0:,} in the whole run")
    return "\n".join(lines)


def boundary_instructions(symbols: dict[str, int], kind: str) -> int:
    """Instructions in our ``kind`` kernel (``quantize`` or ``dequantize``): its functions'
    mangled names hold ``cortex_m_nn`` and the kernel's name as a length-prefixed identifier
    (``12quantize_out``, ``12quantize_run``; ``14dequantize_out``…)."""
    pattern = re.compile(rf"(?<![a-z]){kind}_(out|run|one)")
    return sum(n for name, n in symbols.items() if "cortex_m_nn" in name and pattern.search(name))


#: The peers, by the name of their benchmark module (benchmarks/peer_NAME.py): what they are.
PEERS = {
    "executorch": "ExecuTorch 1.5.1 backends/cortex_m (its pipeline, runtime, kernels; float I/O)",
    "tflm": "TFLite Micro + CMSIS-NN (MLPerf Tiny reference int8 .tflite; int8 I/O)",
}


def measure_peers(
    which: list[str],
    models: list[str],
    cores: list[harness.Core],
    build_dir: Path,
    plugin: Path,
    runtime_optimization: str,
    tflm_int8: bool = False,
) -> dict[str, dict[tuple[str, str], dict]]:
    """Each peer's measurements per (model, core), or ``{"error": one line}`` (a peer that
    cannot run here says why in every cell; the others still run)."""
    import importlib

    sys.path.insert(0, str(REPO / "benchmarks"))
    found: dict[str, dict[tuple[str, str], dict]] = {}
    for name in which:
        try:
            module = importlib.import_module(f"peer_{name}")
            options = {
                "executorch": {"runtime_optimization": runtime_optimization},
                "tflm": {
                    "int8_registrations": tflm_int8,
                    "core_optimization": runtime_optimization,
                },
            }[name]
            known = getattr(module, "MODELS", None)  # TFLM: the MLPerf Tiny models only
            runs = [m for m in models if known is None or m in known]
            found[name] = {
                (m, c.name): {"error": f"{name} has no counterpart of {m}"}
                for c in cores
                for m in models
                if m not in runs
            }
            if runs:
                found[name] |= module.measure(
                    runs, cores, build_dir / f"peer-{name}", plugin, **options
                )
        except Exception as error:  # noqa: BLE001 - a peer's failure is a cell, not a crash
            reason = " ".join(f"{type(error).__name__}: {error}".split())[:300]
            found[name] = {(m, c.name): {"error": reason} for c in cores for m in models}
    return found


def same_outputs(row: dict, tflm: dict[tuple[str, str], dict]) -> str:
    """Whether our int8 outputs are TFLM's, byte for byte ('-' when either has none: float
    I/O, or TFLM did not run)."""
    theirs = tflm.get((row["model"], row["core"]), {}).get("outputs")
    if row["io"] != "int8" or not theirs or not row.get("outputs"):
        return "-"
    return "yes" if row["outputs"] == theirs else "NO"


def peer_table(rows: list[dict], peers: dict[str, dict[tuple[str, str], dict]]) -> str:
    """Instructions per inference: ours, each peer, and ours ÷ the better peer; then flash and
    RAM of each image."""
    names = list(peers)
    head = f"{'model':<18}{'core':<5}{'ours':>13}" + "".join(f"{n:>13}" for n in names)
    head += f"{'ours/best':>10}" + (f"{'outputs = TFLM':>16}" if "tflm" in names else "")
    lines = [head, "-" * len(head)]
    memory = []
    for r in rows:
        cells = [peers[n].get((r["model"], r["core"]), {"error": "not run"}) for n in names]
        counts = [c.get("instructions") for c in cells]
        known = [n for n in counts if n]
        ratio = f"{r['instructions'] / min(known):.5f}" if known and r["instructions"] else "-"
        lines.append(
            f"{r['model']:<18}{r['core']:<5}{r['instructions'] or 0:>13,}"
            + "".join(f"{n:>13,}" if n else f"{'-':>13}" for n in counts)
            + f"{ratio:>10}"
            + (f"{same_outputs(r, peers['tflm']):>16}" if "tflm" in names else "")
        )
        sizes = [f"ours {r['flash_bytes']:,} / {r['ram_bytes']:,}"]
        for name, cell in zip(names, cells, strict=True):
            sizes.append(
                f"{name} {cell['flash_bytes']:,} / {cell['ram_bytes']:,}"
                if "flash_bytes" in cell
                else f"{name} -"
            )
        theirs = [c["flash_bytes"] for c in cells if "flash_bytes" in c]
        if theirs:
            sizes.append(f"flash ours/smaller peer {r['flash_bytes'] / min(theirs):.3f}")
        memory.append(f"  {r['model']:<18}{r['core']:<5}" + "; ".join(sizes))
    lines += ["", "flash / RAM of each image (B; RAM = .data + .bss):", *memory]
    failed = [
        (n, m, c, cell["error"])
        for n in names
        for (m, c), cell in peers[n].items()
        if "error" in cell
    ]
    errors = sorted({f"  {n} {model} {core}: {error}" for n, model, core, error in failed})
    return "\n".join(lines + (["", "not measured:", *errors] if errors else []))


def table(rows: list[dict]) -> str:
    """Our measurements as a table people read."""
    return insncount.table(
        {(r["model"], r["core"]): r for r in rows},
        [
            ("exact", "<6", lambda r: "yes" if r["bit_exact"] else "NO"),
            ("instructions", ">13,", lambda r: r["instructions"] or 0),
            ("CMSIS-NN", ">9.1%", itemgetter("cmsis_nn_share")),
            ("MACs", ">11,", itemgetter("macs")),
            ("insn/MAC", ">9.3f", lambda r: r["instructions_per_mac"] or None),
            ("flash B", ">10,", itemgetter("flash_bytes")),
            ("RAM B", ">9,", itemgetter("ram_bytes")),
            ("arena B", ">9,", itemgetter("arena_bytes")),
            ("method B", ">9,", lambda r: r["method_allocator_used"] or 0),
        ],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", default=",".join(harness.CORES))
    parser.add_argument("--models", default=",".join(harness.MODEL_NAMES))
    parser.add_argument("--build-dir", type=Path, default=REPO / "build" / "bench-target")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--peers",
        default=",".join(PEERS),
        help="peers measured in the same run: "
        + "; ".join(f"{k}: {v}" for k, v in PEERS.items())
        + " (default: %(default)s; '' for none)",
    )
    parser.add_argument(
        "--runtime-optimization",
        default="-Os",
        help="compiler flags for the runtimes: ExecuTorch's (ours and the ExecuTorch peer's) and "
        "TFLM's core (the kernels and CMSIS-NN stay -O3; default: %(default)s)",
    )
    parser.add_argument(
        "--io",
        choices=["float", "int8"],
        help="compile every model with these inputs and outputs (cortex-m-compile --io; "
        "default: as tests/target does, int8 for its *_int8_io models)",
    )
    parser.add_argument(
        "--memory",
        choices=["fast", "small"],
        default="fast",
        help="our programs' memory schedule (cortex-m-compile --memory; default: %(default)s)",
    )
    parser.add_argument(
        "--tflm-int8-registrations",
        action="store_true",
        help="TFLM registers its int8-only CMSIS-NN kernels (Register_CONV_2D_INT8 …; ~30 KB "
        "less flash) instead of its standard registrations",
    )
    parser.add_argument(
        "--weights",
        choices=["mlperf", "zoo"],
        help="mlperf: the four MLPerf Tiny models run the trained weights and int8 quantization "
        "of the .tflite files TFLM runs, on TFLM's input (benchmarks/mlperf_weights.py; int8 "
        "I/O unless --io float), and the ExecuTorch peer compiles the same trained float "
        "models; zoo: seeded weights and calibration. Default: mlperf when TFLM_ROOT and "
        "MLPERF_TINY_ROOT are set, else zoo",
    )
    args = parser.parse_args(argv)
    reason = harness.missing()
    if reason:
        print(f"bench_target: skipped: {reason}")
        return 0
    why_not = mlperf_weights.status()
    if args.weights == "mlperf" and why_not:
        parser.error(f"--weights mlperf: {why_not}")
    trained = args.weights == "mlperf" or (args.weights is None and not why_not)
    print(
        "weights: the MLPerf Tiny trained models' (their .tflite's weights and quantization)"
        if trained
        else f"weights: the zoo's, seeded{f' ({why_not})' if why_not else ''}"
    )
    cores = [harness.CORES[c] for c in args.cores.split(",")]
    models = args.models.split(",")
    plugin = harness.build_plugin(args.build_dir / "plugin")
    rows: list[dict[str, Any]] = []
    for core in cores:
        root = args.build_dir / f"target-{core.name}"  # the layout of tests/target's cache
        models_dir = root / "models"
        models_dir.mkdir(parents=True, exist_ok=True)
        for stale in models_dir.glob("*"):
            stale.unlink()
        io = IoType(args.io) if args.io else None
        runs = [compile_run(name, core, io, trained, args.memory) for name in models]
        for run in runs:
            harness.write_model(run, models_dir)
        harness.build(
            core, models_dir, root / "build", runtime_optimization=args.runtime_optimization
        )
        for run in runs:
            rows.append(measure(run, core, root / "build", plugin))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    for row in rows:
        print(profile_table(row) + "\n")
    by = {(r["model"], r["core"]): r for r in rows}
    print(table(rows) + "\n\n" + components(by))
    print("\nkernel cases each image links (B of each case's function), CMSIS-NN by width (B):")
    for r in rows:
        cases = ", ".join(f"{case} {size:,}" for case, size in r["cases"].items())
        widths = ", ".join(f"{width} {size:,}" for width, size in r["cmsis_nn_widths"].items())
        print(f"  {r['model']:<18}{r['core']:<5}{cases}; CMSIS-NN {widths}")
    print("\nmodel boundary, instructions per element (quantize of the float input, dequantize of")
    print("the float output):")
    for r in rows:
        cells = []
        for kind in ("quantize", "dequantize"):
            count, n = r["boundary_instructions"][kind], r["boundary_elements"][kind]
            cells.append(f"{kind} {count:,} / {n:,} = {count / n:.2f}" if n else f"{kind} -")
        print(f"  {r['model']:<18}{r['core']:<5}" + "; ".join(cells))
    if any(c.name == "m55" for c in cores) and len(cores) > 1:
        print("\ninstructions relative to M55:")
        for model in models:
            base = by.get((model, "m55"), {}).get("instructions")
            ratios = [
                f"{c.name} {by[(model, c.name)]['instructions'] / base:.2f}x"
                for c in cores
                if c.name != "m55" and base and by.get((model, c.name), {}).get("instructions")
            ]
            print(f"  {model:<18} " + ", ".join(ratios))
    which = [p for p in args.peers.split(",") if p]
    unknown = sorted(set(which) - set(PEERS))
    if unknown:
        parser.error(f"unknown peers {unknown}; choose from {', '.join(PEERS)}")
    peers = measure_peers(
        which,
        models,
        cores,
        args.build_dir,
        plugin,
        args.runtime_optimization,
        args.tflm_int8_registrations,
    )
    if peers:
        print("\npeers, same run, same QEMU machines and plugin; instructions per inference:")
        for name in peers:
            print(f"  {name}: {PEERS[name]}")
        print(peer_table(rows, peers))
    if args.json:
        cells = {name: as_json(found) for name, found in peers.items()}
        args.json.write_text(json.dumps({"rows": rows, "peers": cells}, indent=1))
    return 0 if all(r["bit_exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
