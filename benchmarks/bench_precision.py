"""int8 against int16 activations (``--activations``) and int4 weights (``--weights``) on the
model zoo: accuracy, memory, size, instructions.

Usage::

    PYTHONPATH=python:. python benchmarks/bench_precision.py [MODEL ...] [--samples N]
        [--target CORE] [--auto-share F | --auto-gain DB] [--int4-auto-share F]
        [--no-device] [--json FILE]

Each model of ``tests/zoo`` (or the ones named) is compiled for ``--target`` (default
``cortex-m55``) twice from the same float model and the same synthetic calibration set
(``--samples`` draws of N(0, 1), seed 0): with int8 activations and with int16 activations
(every op with an int16 case, ``cortex_m_nn.core.precision``). It prints, per model and precision:

* **SNR** of the model outputs against the float model, in dB: the lowered program run on its
  bit-exact references over ``--samples`` *other* seeded inputs (seed 1), 10·log10(Σ float² /
  Σ (float − program)²): what the device computes, on inputs the calibration did not see;
* the ops that compute in int16 and the requantizations between int8 and int16 regions;
* the **planned arena** (activations and CMSIS-NN scratch) and the **``.pte``** bytes.

A third program has int4 weights (``--weights int4``, int8 activations): its SNR, the layers
that run an ``_s4`` kernel, the bytes of the weight tensors alone (what packing halves), the
weights with their per-channel biases, multipliers and shifts (the report's weight bytes),
and the ``.pte``.

A fourth program is ``--precision auto``: int8 or int16 per layer, searched by
``cortex_m_nn.search.activations`` against a target it states, **X = the int8 program's SNR +
``--auto-share`` of the way to the int16 program's** (default 0.5: midway), both as the search
measures them (on the calibration samples their ranges were not fitted to); with
``--auto-gain G``, X = int8 + G dB instead ("unreachable" when all-int16 misses it). The
search compiles each layer alone in int16, so it is skipped ("skipped") for models with more
than ``--auto-max-layers`` such layers (default 24).

With ``--int4-auto-share F``, a ``--weights auto`` program too
(``cortex_m_nn.search.weights``), at X = the all-int4 program's SNR + F of the way to the
all-int8 program's (as the search measures them): its SNR and weight bytes beside all int8's
and all int4's (not on the device).

**On the device** (with what ``tests/target`` needs: ``EXECUTORCH_ROOT``, ``CMSIS_NN_PATH``,
``arm-none-eabi-gcc``, ``qemu-system-arm``; else the column says what is missing): the four
programs of each model are embedded in the bare-metal runner for ``--target`` (tests/target)
and run once under QEMU with the exact instruction-count plugin, as
``benchmarks/bench_target.py`` measures: instructions per inference, and whether the device's
outputs equal the Python reference's byte for byte.

The zoo's weights are seeded random ones (``tests/zoo``), not trained: the SNR says how much
of the float model's function each precision keeps, not an accuracy.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]


def _snr(program: Any, module: torch.nn.Module, inputs: list[tuple[torch.Tensor, ...]]) -> float:
    """SNR (dB) of the lowered program's outputs against the float model's."""
    from torch.utils._pytree import tree_leaves

    from cortex_m_nn.ops.library import run_references

    signal = noise = 0.0
    with torch.no_grad():
        for sample in inputs:
            ours = run_references(program.lowered, sample, program.abi.rounding)
            floats = tree_leaves(module(*[x.clone() for x in sample]))
            for mine, real in zip(ours, floats, strict=True):
                signal += float(real.double().pow(2).sum())
                noise += float((real.double() - mine.double()).pow(2).sum())
    return math.inf if noise == 0 else 10 * math.log10(signal / noise)


#: The lowered operators whose second argument is a layer's weight constant.
WEIGHTED = ("conv2d", "depthwise_conv2d", "transpose_conv2d", "linear")


def weight_tensor_bytes(program: Any) -> int:
    """Bytes of the weight constants of the program's convolutions and linear layers (not
    their biases, multipliers or shifts): what int4 packing halves."""
    total = 0
    for node in program.lowered.graph.nodes:
        name = str(node.target)
        if name.startswith("cortex_m_nn.") and name.split(".")[1] in WEIGHTED:
            weight = getattr(program.lowered, node.args[1].target)
            total += weight.numel() * weight.element_size()
    return total


def _row(program: Any, module: torch.nn.Module, held_out: list) -> dict[str, Any]:
    functions = [r.cmsis_function or "" for r in program.records if r.lowered]
    return {
        "snr_db": _snr(program, module, held_out),
        "int16_ops": sum("_s16" in f for f in functions),
        "int4_layers": sum("_s4" in f for f in functions),
        "requantizations": sum(f.startswith("(int") for f in functions),
        "arena_bytes": program.arena_bytes,
        "pte_bytes": len(program.pte),
        "weight_tensor_bytes": weight_tensor_bytes(program),
        "weight_bytes": sum(r.weight_bytes for r in program.records),
    }


def measure(
    name: str,
    samples: int,
    target: str,
    goal: Goal,
    auto_max_layers: int,
    int4_share: float | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The four programs of one zoo model, int8, int16, int4 weights and auto (rows: SNR, int16
    ops, int4 layers, requantizations, arena, .pte, weights; and the programs, by name); with
    ``int4_share``, a ``--weights auto`` row too (not run on the device)."""
    from tests.zoo import ZOO

    from cortex_m_nn.core.options import Activations, QuantizationOptions, Weights
    from cortex_m_nn.core.target import Target
    from cortex_m_nn.frontend.calibration import synthetic
    from cortex_m_nn.frontend.model_source import ModelSource
    from cortex_m_nn.pipeline import compile_model

    module, example = ZOO[name]()
    source = ModelSource(name, module, example)
    calibration = synthetic(example, count=samples)
    generator = torch.Generator().manual_seed(1)
    held_out = [
        tuple(torch.randn(x.shape, generator=generator) for x in example) for _ in range(samples)
    ]
    rows: dict[str, dict[str, Any]] = {}
    programs = {}
    for activations in Activations:
        options = QuantizationOptions(activations=activations)
        program = compile_model(source, Target.parse(target), calibration, progress=False,
                                options=options)  # fmt: skip
        programs[activations.value] = program
        rows[activations.value] = _row(program, module, held_out)
    program = compile_model(source, Target.parse(target), calibration, progress=False,
                            options=QuantizationOptions(weights=Weights.INT4))  # fmt: skip
    programs["int4w"] = program
    rows["int4w"] = _row(program, module, held_out)
    if int4_share is not None:
        rows["int4auto"] = _int4_auto(source, target, calibration, int4_share, held_out)
    rows["auto"] = _auto(source, target, calibration, programs, goal, auto_max_layers)
    if rows["auto"]["status"] != "ok":
        return rows, programs
    options = QuantizationOptions(int16_layers=tuple(rows["auto"]["int16_layers"]))
    program = compile_model(source, Target.parse(target), calibration, progress=False,
                            options=options)  # fmt: skip
    programs["auto"] = program
    rows["auto"] |= _row(program, module, held_out)
    return rows, programs


@dataclass(frozen=True)
class Goal:
    """Auto's target X: int8 + ``share`` of the way to int16, or int8 + ``gain`` dB."""

    share: float | None = 0.5
    gain: float | None = None

    def of(self, int8_db: float, int16_db: float) -> float:
        if self.gain is not None:
            return int8_db + self.gain
        assert self.share is not None
        return int8_db + self.share * (int16_db - int8_db)

    def describe(self) -> str:
        if self.gain is not None:
            return f"the int8 program's SNR + {self.gain:g} dB"
        return f"the int8 program's SNR + {self.share:g} of the way to the int16 program's"


def _auto(
    source: Any, target: str, calibration: Any, programs: dict, goal: Goal, max_layers: int
) -> dict[str, Any]:
    """``--precision auto`` at X (``goal``, from the uniform programs' SNR as the search
    measures it, on the calibration samples their ranges were not fitted to): the chosen
    layers and X, or why there is no such program."""
    from cortex_m_nn.core.abi import ProgramAbi, Rounding
    from cortex_m_nn.core.options import QuantizationOptions
    from cortex_m_nn.core.target import Target
    from cortex_m_nn.search import activations as mixed_precision

    abi = ProgramAbi.for_target(Target.parse(target), Rounding.DOUBLE)
    _, bounds = mixed_precision.choose(
        source, abi, calibration, QuantizationOptions(), -math.inf
    )  # int8 meets any target: the two uniform programs, measured as the search does
    x = goal.of(bounds.int8_snr_db, bounds.int16_snr_db)
    if bounds.int16_snr_db < x and bounds.int8_snr_db < x:
        return {"status": "unreachable", "target_db": x}
    layers = sum("_s16" in (r.cmsis_function or "") for r in programs["int16"].records)
    if layers > max_layers:
        return {"status": "skipped", "target_db": x, "int16_layers_possible": layers}
    options, plan = mixed_precision.choose(source, abi, calibration, QuantizationOptions(), x)
    return {
        "status": "ok",
        "target_db": x,
        "int16_layers": list(options.int16_layers),
        "compiles": plan.compiles,
    }


def _int4_auto(
    source: Any, target: str, calibration: Any, share: float, held_out: list
) -> dict[str, Any]:
    """``--weights auto`` at X = all int4's SNR + ``share`` of the way to all int8's (both as
    the search measures them, on the calibration samples their ranges were not fitted to):
    X, the layers chosen, and the program's row on the held-out samples."""
    from cortex_m_nn.core.abi import ProgramAbi, Rounding
    from cortex_m_nn.core.options import QuantizationOptions
    from cortex_m_nn.core.target import Target
    from cortex_m_nn.pipeline import compile_model
    from cortex_m_nn.search import weights as weight_precision

    abi = ProgramAbi.for_target(Target.parse(target), Rounding.DOUBLE)
    base = QuantizationOptions()
    _, bounds = weight_precision.choose(source, abi, calibration, base, -math.inf)
    x = bounds.int4_snr_db + share * (bounds.int8_snr_db - bounds.int4_snr_db)
    options, plan = weight_precision.choose(source, abi, calibration, base, x)
    program = compile_model(source, abi, calibration, progress=False, options=options)
    return {
        "target_db": x,
        "int4_layers_chosen": list(options.int4_layers),
        "candidates": len(plan.layers),
        "compiles": plan.compiles,
    } | _row(program, source.module, held_out)


#: A model's rows by program; a column of a table of them: heading, width, format spec
#: (without the width) and value; a group: a heading over the columns it spans.
Rows = dict[str, dict[str, Any]]
Column = tuple[str, int, str, Callable[[Rows], Any]]
Group = tuple[str, list[Column]]
#: What the tables' column headings call each program.
LABELS = {"int8": "int8", "int16": "int16", "int4w": "int4", "int4auto": "auto"}


def _render(results: dict[str, Rows], groups: list[Group]) -> str:
    """A row per model under two header lines: each group's heading right-aligned across its
    columns, then each column's own; every value right-aligned at its column's width."""
    columns = [column for _, group in groups for column in group]
    titles = [title.rjust(sum(c[1] + 1 for c in group) - 1) for title, group in groups]
    lines = [
        " ".join([f"{'model':<22}", *titles]),
        " ".join([f"{'':<22}", *(heading.rjust(width) for heading, width, _, _ in columns)]),
    ]
    for name, rows in results.items():
        cells = [format(value(rows), spec).rjust(width) for _, width, spec, value in columns]
        lines.append(" ".join([f"{name:<22}", *cells]))
    return "\n".join(lines)


def _of(program: str, key: str) -> Callable[[Rows], Any]:
    return lambda rows: rows[program][key]


def _single(heading: str, width: int, spec: str, value: Callable[[Rows], Any]) -> Group:
    """One column, its heading on the first header line."""
    return heading, [("", width, spec, value)]


def _per_program(heading: str, key: str, spec: str, widths: dict[str, int]) -> Group:
    """``key`` of each program of ``widths`` (program → its column's width) under ``heading``."""
    return heading, [(LABELS[p], width, spec, _of(p, key)) for p, width in widths.items()]


def _ratio(key: str, program: str, spec: str) -> Group:
    return _single("ratio", 6, spec, lambda rows: rows[program][key] / rows["int8"][key])


def _against_int8(
    program: str, snr_width: int, counts: list[Group], sizes: list[tuple[str, str, int]], spec: str
) -> list[Group]:
    """``program`` against the int8 one: both SNRs (``snr_width`` wide) and the difference,
    ``counts``, then for each (heading, key, int8 column width) of ``sizes`` both sizes and
    their ratio (formatted with ``spec``)."""
    snr = _per_program("SNR dB", "snr_db", ".1f", {"int8": snr_width, program: snr_width})
    gain = _single("Δ dB", 6, "+.1f", lambda rows: rows[program]["snr_db"] - rows["int8"]["snr_db"])
    groups = [snr, gain, *counts]
    for heading, key, width in sizes:
        groups.append(_per_program(heading, key, ",", {"int8": width, program: 8}))
        groups.append(_ratio(key, program, spec))
    return groups


def int4_auto_table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    """``--weights auto`` against all int8 and all int4 weights: SNR and weight bytes."""
    programs = ("int8", "int4w", "int4auto")
    return _render(
        results,
        [
            _single("target X dB", 11, ".1f", _of("int4auto", "target_db")),
            _single("int4 layers", 11, "", _int4_layers_chosen),
            _per_program("SNR dB", "snr_db", ".1f", dict.fromkeys(programs, 6)),
            _per_program("weights+params B", "weight_bytes", ",", dict.fromkeys(programs, 8)),
        ],
    )


def _int4_layers_chosen(rows: Rows) -> str:
    auto = rows["int4auto"]
    return f"{len(auto['int4_layers_chosen'])}/{auto['candidates']}"


#: The programs of a model: int8, int16 activations, auto (int8 or int16 per layer), int4
#: weights with int8 activations.
PRECISIONS = ("int8", "int16", "auto", "int4w")


def on_device(
    programs: dict[str, dict[str, Any]], target: str, build_dir: Path
) -> dict[str, dict[str, dict[str, Any]]] | str:
    """Instructions per inference and bit-exactness of every program on ``target``'s emulated
    core (model → precision → row), or the one line saying why they cannot be measured here."""
    from tests.target import harness

    from cortex_m_nn.ops.library import run_references

    reason = harness.missing()
    cores = [c for c in harness.CORES.values() if c.target == target]
    if reason or not cores:
        return reason or f"no emulated core for {target} (tests/target: {list(harness.CORES)})"
    import bench_target  # benchmarks/: the same measurement as the target benchmark

    core, root = cores[0], build_dir / f"precision-{cores[0].name}"
    plugin = harness.build_plugin(build_dir / "plugin")
    models_dir = root / "models"
    models_dir.mkdir(parents=True, exist_ok=True)
    for stale in models_dir.glob("*"):
        stale.unlink()
    runs = {}
    for model, by_precision in programs.items():
        for precision, program in by_precision.items():
            generator = torch.Generator().manual_seed(3)
            inputs = program.io.program_inputs(
                tuple(
                    torch.randn(x.shape, generator=generator) for x in program.model.example_inputs
                )
            )
            expected = run_references(program.io.graph, inputs, program.abi.rounding)
            run = harness.ModelRun(f"{model}_{precision}", program, inputs, list(expected))
            harness.write_model(run, models_dir)
            runs[model, precision] = run
    harness.build(core, models_dir, root / "build")
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for (model, precision), run in runs.items():
        row = bench_target.measure(run, core, root / "build", plugin)
        rows.setdefault(model, {})[precision] = {
            "instructions": row["instructions"],
            "bit_exact": row["bit_exact"],
        }
    return rows


def device_table(device: dict[str, dict[str, dict[str, Any]]], core: str) -> str:
    """Instructions per inference on the device per program, and the ratios to int8."""
    lines = [
        f"{core}: instructions per inference (QEMU, exact count), outputs bit-exact with the "
        "Python reference",
        f"{'model':<22} "
        + " ".join(f"{p:>12}" for p in PRECISIONS)
        + " "
        + " ".join(f"{p + '/int8':>10}" for p in PRECISIONS[1:])
        + "  bit-exact",
    ]
    for model, rows in device.items():
        counts = [rows.get(p, {}).get("instructions") for p in PRECISIONS]
        cells = [f"{n:>12,}" if n else f"{'-':>12}" for n in counts]
        ratios = [
            f"{n / counts[0]:>10.2f}" if n and counts[0] else f"{'-':>10}" for n in counts[1:]
        ]
        exact = all(r["bit_exact"] for r in rows.values())
        lines.append(
            f"{model:<22} {' '.join(cells)} {' '.join(ratios)}  {'yes' if exact else 'NO'}"
        )
    return "\n".join(lines)


def weights_table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    """int8 against int4 weights (int8 activations): SNR, layers packed, weight bytes, .pte."""
    packed = [_single("s4", 3, "", _of("int4w", "int4_layers"))]
    sizes = [
        ("weight tensors B", "weight_tensor_bytes", 9),
        ("weights+params B", "weight_bytes", 9),
        (".pte B", "pte_bytes", 8),
    ]
    return _render(results, _against_int8("int4w", 6, packed, sizes, ".3f"))


def auto_table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    """The ``--precision auto`` table: X, the layers chosen, SNR, arena and .pte."""
    lines = [
        f"{'model':<22} {'target X dB':>11} {'int16 layers':>12} {'SNR dB':>7} {'arena B':>8} "
        f"{'.pte B':>8}  (X on the unfitted calibration samples; SNR on held-out samples)"
    ]
    for name, rows in results.items():
        auto = rows["auto"]
        if auto["status"] != "ok":
            lines.append(f"{name:<22} {auto['target_db']:>11.1f} {auto['status']:>12}")
            continue
        lines.append(
            f"{name:<22} {auto['target_db']:>11.1f} {len(auto['int16_layers']):>12} "
            f"{auto['snr_db']:>7.1f} {auto['arena_bytes']:>8,} {auto['pte_bytes']:>8,}"
        )
    return "\n".join(lines)


def table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    """The printed table: a row per model, int8 then int16 columns and the differences."""
    counts = [
        _single("int16 ops", 9, "", _of("int16", "int16_ops")),
        _single("requant", 7, "", _of("int16", "requantizations")),
    ]
    sizes = [("arena B", "arena_bytes", 8), (".pte B", "pte_bytes", 8)]
    return _render(results, _against_int8("int16", 7, counts, sizes, ".2f"))


def main(argv: list[str] | None = None) -> int:
    from tests.zoo import ZOO

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("models", nargs="*", help=f"zoo models (default all: {', '.join(ZOO)})")
    parser.add_argument("--samples", type=int, default=32, help="calibration and test samples")
    parser.add_argument("--target", default="cortex-m55")
    goal = parser.add_mutually_exclusive_group()
    goal.add_argument("--auto-share", type=float, default=0.5, help="auto's X: int8 + this "
                      "share of the way to int16 (default %(default)s)")  # fmt: skip
    goal.add_argument("--auto-gain", type=float, help="auto's X: int8 + this many dB instead")
    parser.add_argument("--auto-max-layers", type=int, default=24)
    parser.add_argument("--int4-auto-share", type=float, help="also --weights auto at X = "
                        "int4 + this share of the way to int8 (not run on the device)")  # fmt: skip
    parser.add_argument("--no-device", action="store_true", help="skip the on-device column")
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build" / "bench-precision")
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON")
    args = parser.parse_args(argv)
    unknown = [m for m in args.models if m not in ZOO]
    if unknown:
        parser.error(f"unknown zoo models {unknown}; known: {', '.join(ZOO)}")
    warnings.filterwarnings("ignore")
    target = (
        Goal(share=None, gain=args.auto_gain)
        if args.auto_gain is not None
        else Goal(share=args.auto_share)
    )
    results, programs = {}, {}
    for name in args.models or list(ZOO):
        results[name], programs[name] = measure(
            name, args.samples, args.target, target, args.auto_max_layers, args.int4_auto_share
        )
        print(f"{name}: measured", file=sys.stderr, flush=True)
    device = "--no-device" if args.no_device else on_device(programs, args.target, args.build_dir)
    print(
        f"int8 vs int16 activations, {args.target}, {args.samples} synthetic calibration "
        "samples, SNR of the lowered program vs float on as many other samples"
    )
    print(table(results))
    print()
    print(f"--precision auto, X = {target.describe()}, both on the unfitted calibration samples")
    print(auto_table(results))
    print()
    print("int8 vs int4 weights (--weights int4; int8 activations), SNR on the same samples")
    print(weights_table(results))
    print()
    if args.int4_auto_share is not None:
        print(f"--weights auto, X = int4 + {args.int4_auto_share:g} of the way to int8")
        print(int4_auto_table(results))
        print()
    if isinstance(device, str):
        print(f"on the device: not measured ({device})")
    else:
        print(device_table(device, args.target))
        for name, rows in device.items():
            for precision, row in rows.items():
                results[name][precision]["device"] = row
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    exact = isinstance(device, str) or all(
        r["bit_exact"] for rows in device.values() for r in rows.values()
    )
    return 0 if exact else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
