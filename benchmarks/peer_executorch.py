"""The peer on target: ExecuTorch's own Cortex-M backend, run on the same emulated cores as ours.

Usage (from the repository root; needs what tests/target needs — EXECUTORCH_ROOT, CMSIS_NN_PATH,
arm-none-eabi-gcc, qemu-system-arm, flatbuffers —, EXECUTORCH_ROOT holding the peer's sources
backends/cortex_m, codegen and tools/cmake, and the peer's pipeline importable: tosa-tools on
PYTHONPATH, see benchmarks/peer.py)::

    PYTHONPATH=python:.:<tosa-tools> python benchmarks/peer_executorch.py [--cores m55,m33,m4]
        [--models ds_cnn,resnet8,mobilenet_v1_025,autoencoder] [--build-dir DIR] [--json FILE]
        [--runtime-optimization -Os]

Builds run under ``nice -n 19`` with ``PEER_BUILD_JOBS`` (default 2) jobs.

Per core, every model is compiled by the peer's Python pipeline for that core
(``benchmarks/peer.py::compile_with_peer``, channels-last, its target config set to the core)
and built into the peer's bare-metal runner (benchmarks/peer_executorch: ExecuTorch's runtime as
our runner builds it, the peer's ``backends/cortex_m`` kernels on CMSIS-NN and the portable
kernels the program calls, registered by ExecuTorch's own selective codegen; ``-O3`` kernels and
CMSIS-NN, ``-Os`` runtime, newlib-nano). The runner is built twice: with a generous
method-allocator pool, run once to read the bytes the method allocator used, then with a pool of
exactly that size (as our runner's is), run under the insncount plugin. Per model and core:

* instructions: exactly one ``Method::execute()`` (between ``bench_start()``/``bench_stop()``;
  quantize of the float input, every kernel, dequantize, ExecuTorch's dispatch);
* CMSIS-NN instructions: those inside functions of the build's ``libcmsis-nn.a``;
* flash / RAM of the ELF (``cortex_m_nn.embed.firmware.inspect``; RAM = ``.data`` + ``.bss``,
  planned
  arena and method-allocator pool included), by component, the peer's kernels (``cortex_m::``,
  the portable kernels and the generated registration) as ``peer kernels`` and the embedded
  example input as ``test input`` (flash; our runner keeps its test vector too);
* the ``.pte`` size, the method allocator bytes used and the outputs' largest difference from
  the float model on the example input (a sanity check that the runner computes the model).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import warnings
from operator import itemgetter
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "python"), str(REPO), str(REPO / "benchmarks")]
warnings.filterwarnings("ignore")

import insncount  # noqa: E402
from insncount import first_region, library_functions, report  # noqa: E402
from tests.target import harness  # noqa: E402

from cortex_m_nn.embed import firmware  # noqa: E402

SOURCE = REPO / "benchmarks" / "peer_executorch"
PEER_KERNELS = "peer kernels"
TEST_INPUT = "test input"
#: cortex_m::native (the peer's kernels), torch::executor::native (portable kernels) and
#: torch::executor::function (the kernel registration ExecuTorch's codegen wrote)
_PEER_SYMBOL = re.compile(r"^_ZZ?N\w*?(8cortex_m6native|5torch8executor(6native|8function))")
_NEEDED = ("backends/cortex_m/ops/operators.yaml", "codegen/gen.py", "tools/cmake/Codegen.cmake")


def _schemas(yaml_text: str) -> dict[str, str]:
    return dict(re.findall(r"func: (\w+::\w+\.out)(\(.*)", yaml_text))


def status() -> str:
    """'' if the peer can be built and run here, else one line saying why not."""
    reason = harness.missing()
    if reason:
        return reason
    root = Path(os.environ["EXECUTORCH_ROOT"])
    absent = [path for path in _NEEDED if not (root / path).is_file()]
    if absent:
        return f"EXECUTORCH_ROOT lacks {', '.join(absent)} (the peer's kernels and codegen)"
    try:
        import executorch
        from executorch.backends.cortex_m.passes.cortex_m_pass_manager import (  # noqa: F401
            CortexMPassManager,
        )
    except Exception as error:  # noqa: BLE001
        return f"the peer's pipeline does not import ({type(error).__name__}: {error})"
    wheel = Path(list(executorch.__path__)[0]) / "backends/cortex_m/ops/operators.yaml"
    ours = _schemas((root / _NEEDED[0]).read_text())
    wheel_schemas = _schemas(wheel.read_text()).items()  # an operator missing fails its model
    changed = [op for op, schema in wheel_schemas if op in ours and ours[op] != schema]
    if changed:
        return f"EXECUTORCH_ROOT's kernels differ from the wheel's schema for {', '.join(changed)}"
    return ""


# --- compile ----------------------------------------------------------------------------------


def _io_dim_orders(pte: bytes) -> tuple[list[list[int]], list[list[int]]]:
    """The dim order of each input and output tensor of the program's forward."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    plan = deserialize_pte_binary(pte).program.execution_plan[0]

    def order(index: int) -> list[int]:
        return list(getattr(plan.values[index].val, "dim_order", None) or [])

    return [order(i) for i in plan.inputs], [order(i) for i in plan.outputs]


def _in_dim_order(x: torch.Tensor, dim_order: list[int]) -> bytes:
    """``x``'s float32 bytes laid out in ``dim_order``."""
    x = x.detach().to(torch.float32)
    if dim_order and len(dim_order) == x.dim():
        x = x.permute(*dim_order)
    return x.contiguous().numpy().tobytes()


def prepare(name: str, core: harness.Core, directory: Path) -> dict[str, Any]:
    """Compile ``name`` with the peer for ``core``; writes NAME.pte and NAME.inputs.bin."""
    from peer import compile_with_peer

    from cortex_m_nn.frontend.calibration import synthetic

    source = harness.model_source(name)
    peer = compile_with_peer(
        source.module,
        source.example_inputs,
        synthetic(source.example_inputs, count=8).samples,
        channels_last=True,
        target=core.target,
    )
    if "error" in peer:
        return {"error": f"the peer fails at {peer['stage']}: {peer['cause']}"}
    inputs, outputs = _io_dim_orders(peer["pte"])
    (directory / f"{name}.pte").write_bytes(peer["pte"])
    data = b"".join(_in_dim_order(x, o) for x, o in zip(source.example_inputs, inputs, strict=True))
    (directory / f"{name}.inputs.bin").write_bytes(data)
    with torch.no_grad():
        expected = source.module.eval()(*source.example_inputs)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    return {**peer, "expected": expected, "output_dim_orders": outputs}


# --- build and run ----------------------------------------------------------------------------


def build(
    core: harness.Core,
    models_dir: Path,
    build_dir: Path,
    method_bytes: dict[str, int | None],
    runtime_optimization: str = "-Os",
) -> None:
    """Configure and build the peer's runners for the models in ``models_dir`` (raises);
    ``method_bytes``: per model, its method allocator pool (None: a generous one)."""
    flatc, include = harness.flatbuffers()
    definitions = [
        f"-DPEER_MODELS_DIR={models_dir}",
        "-DEXECUTORCH_LOGGING=OFF",
        f"-DRUNNER_RUNTIME_OPTIMIZATION={runtime_optimization}",
        "-DPEER_TEMP_ALLOCATOR_BYTES=0",
        f"-DEXECUTORCH_ROOT={os.environ['EXECUTORCH_ROOT']}",
        f"-DCMSIS_NN_PATH={os.environ['CMSIS_NN_PATH']}",
        f"-DFLATC_EXECUTABLE={flatc}",
        f"-DFLATBUFFERS_INCLUDE_DIR={include}",
        *(f"-DPEER_METHOD_ALLOCATOR_BYTES_{name}={n or ''}" for name, n in method_bytes.items()),
    ]
    jobs = int(os.environ.get("PEER_BUILD_JOBS", "2"))
    harness.cmake_build(SOURCE, build_dir, core, definitions, jobs)


def _outputs_error(outputs: list[bytes], prepared: dict[str, Any]) -> float | None:
    """Largest absolute difference of the runner's outputs from the float model's."""
    expected, orders = prepared["expected"], prepared["output_dim_orders"]
    if len(outputs) != len(expected):
        return None
    worst = 0.0
    for data, reference, order in zip(outputs, expected, orders, strict=True):
        if len(data) != reference.numel() * 4:
            return None
        shape = [reference.shape[d] for d in order] if order else list(reference.shape)
        got = torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(shape)
        if order:
            got = got.permute(*[order.index(d) for d in range(len(order))])
        worst = max(worst, (got - reference.float()).abs().max().item())
    return worst


def _classify(symbol: str, section: str) -> str:
    """``firmware``'s components, with the peer's kernels (``cortex_m::``, the portable kernels,
    the generated registration) and the embedded test input on their own."""
    if symbol == "peer_inputs":
        return TEST_INPUT
    ours = firmware.component_of(symbol, section)
    return PEER_KERNELS if _PEER_SYMBOL.search(symbol) or ours == "cortex_m_nn kernels" else ours


#: ``firmware``'s components with ours replaced by the peer's kernels, and the test input.
COMPONENTS = tuple(
    PEER_KERNELS if c == "cortex_m_nn kernels" else c for c in firmware.COMPONENTS
) + (TEST_INPUT,)


def memory(elf: Path, pte: bytes) -> dict[str, Any]:
    """Flash and RAM of ``elf``, in total and by component (``COMPONENTS``)."""
    report = firmware.inspect(elf, pte, classify=_classify, components=COMPONENTS)
    return {key: report[key] for key in ("flash_bytes", "ram_bytes", "flash", "ram")}


def _run(elf: Path, core: harness.Core, plugin: str | None = None) -> harness.Result:
    result = harness.run(elf, core, plugin)
    if result.returncode != 0:
        lines = [ln for ln in result.stdout.splitlines() if ln.startswith(("peer:", "ET ", "***"))]
        raise RuntimeError(f"runner exit {result.returncode}: {' '.join(lines[-2:])}".strip())
    return result


def _measure_one(elf: Path, core: harness.Core, plugin: Path, prepared: dict) -> dict[str, Any]:
    result = _run(elf, core, f"{plugin},symbols=on")
    instructions, symbols = first_region(result.stderr + result.stdout)
    if instructions is None:
        raise RuntimeError("the insncount plugin marked no region")
    cmsis = library_functions(next(elf.parent.rglob("libcmsis-nn.a")))
    return {
        "instructions": instructions,
        "cmsis_nn_instructions": sum(n for name, n in symbols.items() if name in cmsis),
        **memory(elf, prepared["pte"]),
        "pte_bytes": prepared["pte_bytes"],
        "arena_bytes": prepared["arena_bytes"],
        "method_allocator_used": result.method_allocator_used(),
        "output_max_abs_error": _outputs_error(result.outputs(), prepared),
    }


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:300] or type(error).__name__


def measure_core(
    models: list[str],
    core: harness.Core,
    build_dir: Path,
    plugin: Path,
    runtime_optimization: str = "-Os",
) -> dict[str, dict]:
    """Per model on ``core``: the measurements, or ``{"error": ...}``."""
    root = build_dir / f"peer-{core.name}"
    models_dir = root / "models"
    shutil.rmtree(models_dir, ignore_errors=True)
    models_dir.mkdir(parents=True)
    prepared = {name: prepare(name, core, models_dir) for name in models}
    results = {n: {"error": p["error"]} for n, p in prepared.items() if "error" in p}
    ready = [n for n in models if n not in results]
    if not ready:
        return results
    try:  # pass 1: a generous method allocator, to read what each method uses
        build(core, models_dir, root / "build", dict.fromkeys(ready), runtime_optimization)
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        return {**results, **{name: {"error": _one_line(error)} for name in ready}}
    used: dict[str, int | None] = {}
    for name in ready:  # a model the peer cannot run is that model's cell, not the core's
        try:
            found = _run(root / "build" / f"peer_{name}.elf", core).method_allocator_used()
            if found is None:
                raise RuntimeError(f"{name}: the runner printed no method allocator use")
            used[name] = found
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            results[name] = {"error": _one_line(error)}
    ready = list(used)
    try:  # pass 2: pools of exactly those sizes
        if ready:
            build(core, models_dir, root / "build", used, runtime_optimization)
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        return {**results, **{name: {"error": _one_line(error)} for name in ready}}
    for name in ready:
        try:
            results[name] = _measure_one(
                root / "build" / f"peer_{name}.elf", core, plugin, prepared[name]
            )
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            results[name] = {"error": _one_line(error)}
    return results


def measure(
    models: list[str],
    cores: list[harness.Core],
    build_dir: Path,
    plugin: Path,
    runtime_optimization: str = "-Os",
) -> dict[tuple[str, str], dict]:
    """``{(model, core name): measurements or {"error": one line}}`` for every model and core;
    ``runtime_optimization``: ExecuTorch's runtime's flags (kernels and CMSIS-NN stay -O3)."""
    import logging

    logging.disable(logging.WARNING)  # the peer logs a line per quantized node
    reason = status()
    if reason:
        return {(m, c.name): {"error": reason} for c in cores for m in models}
    found: dict[tuple[str, str], dict] = {}
    for core in cores:
        rows = measure_core(models, core, build_dir, plugin, runtime_optimization)
        for name, row in rows.items():
            found[(name, core.name)] = row
    return found


# --- command line -----------------------------------------------------------------------------


def table(rows: dict[tuple[str, str], dict]) -> str:
    """The measurements as a table people read."""
    return insncount.table(
        rows,
        [
            ("instructions", ">13,", itemgetter("instructions")),
            ("CMSIS-NN", ">9.1%", lambda r: r["cmsis_nn_instructions"] / r["instructions"]),
            ("flash B", ">10,", itemgetter("flash_bytes")),
            ("RAM B", ">9,", itemgetter("ram_bytes")),
            ("arena B", ">9,", itemgetter("arena_bytes")),
            ("method B", ">9,", lambda r: r["method_allocator_used"] or 0),
            (".pte B", ">9,", itemgetter("pte_bytes")),
            ("max |err|", ">10.4f", itemgetter("output_max_abs_error")),
        ],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", default="m55,m33,m4")
    parser.add_argument("--models", default="ds_cnn,resnet8,mobilenet_v1_025,autoencoder")
    parser.add_argument("--build-dir", type=Path, default=REPO / "build" / "peer-executorch")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--runtime-optimization",
        default="-Os",
        help="flags for ExecuTorch's runtime (kernels and CMSIS-NN stay -O3; default %(default)s)",
    )
    args = parser.parse_args(argv)
    reason = status()
    if reason:
        print(f"peer_executorch: not run: {reason}")
        return 0
    cores = [harness.CORES[c] for c in args.cores.split(",")]
    plugin = harness.build_plugin(args.build_dir / "plugin")
    models = args.models.split(",")
    rows = measure(models, cores, args.build_dir, plugin, args.runtime_optimization)
    return report(rows, table(rows), args.json)


if __name__ == "__main__":
    sys.exit(main())
