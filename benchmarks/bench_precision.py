"""int8 against int16 activations (``--activations``) on the model zoo: accuracy, memory, size.

Usage::

    PYTHONPATH=python:. python benchmarks/bench_precision.py [MODEL ...] [--samples N]
        [--target CORE] [--json FILE]

Each model of ``tests/zoo`` (or the ones named) is compiled for ``--target`` (default
``cortex-m55``) twice from the same float model and the same synthetic calibration set
(``--samples`` draws of N(0, 1), seed 0): with int8 activations and with int16 activations
(every op with an int16 case, ``cortex_m_nn.precision``). It prints, per model and precision:

* **SNR** of the model outputs against the float model, in dB: the lowered program run on its
  bit-exact references over ``--samples`` *other* seeded inputs (seed 1), 10·log10(Σ float² /
  Σ (float − program)²): what the device computes, on inputs the calibration did not see;
* the ops that compute in int16 and the requantizations between int8 and int16 regions;
* the **planned arena** (activations and CMSIS-NN scratch) and the **``.pte``** bytes.

A third program is ``--precision auto``: int8 or int16 per layer, searched by
``cortex_m_nn.mixed_precision`` against a target it states, **X = the int8 program's SNR as the
search measures it (on the calibration samples its ranges were not fitted to) +
``--auto-gain`` dB** (default 3), when the all-int16 program reaches X there (else
"unreachable"). The search compiles each layer alone in int16, so it is skipped
("skipped") for models with more than ``--auto-max-layers`` such layers (default 24).

The zoo's weights are seeded random ones (``tests/zoo``), not trained: the SNR says how much
of the float model's function each precision keeps, not an accuracy. Instructions on the
device come from ``benchmarks/bench_target.py``, which runs the target zoo's int16 variants
(``tests/target/models.py``, ``INT16``) next to the int8 ones.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
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


def _row(program: Any, module: torch.nn.Module, held_out: list) -> dict[str, Any]:
    functions = [r.cmsis_function or "" for r in program.records if r.lowered]
    return {
        "snr_db": _snr(program, module, held_out),
        "int16_ops": sum("_s16" in f for f in functions),
        "requantizations": sum(f.startswith("(int") for f in functions),
        "arena_bytes": program.arena_bytes,
        "pte_bytes": len(program.pte),
    }


def measure(
    name: str, samples: int, target: str, auto_gain: float, auto_max_layers: int
) -> dict[str, dict[str, Any]]:
    """The three programs of one zoo model: SNR, int16 ops, requantizations, arena, .pte."""
    from tests.zoo import ZOO

    from cortex_m_nn.calibration import synthetic
    from cortex_m_nn.compile import compile_model
    from cortex_m_nn.model_source import ModelSource
    from cortex_m_nn.options import Activations, QuantizationOptions
    from cortex_m_nn.target import Target

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
    rows["auto"] = _auto(source, target, calibration, programs, auto_gain, auto_max_layers)
    if rows["auto"]["status"] != "ok":
        return rows
    options = QuantizationOptions(int16_layers=tuple(rows["auto"]["int16_layers"]))
    program = compile_model(source, Target.parse(target), calibration, progress=False,
                            options=options)  # fmt: skip
    rows["auto"] |= _row(program, module, held_out)
    return rows


def _auto(
    source: Any, target: str, calibration: Any, programs: dict, gain: float, max_layers: int
) -> dict[str, Any]:
    """``--precision auto`` at X = the int8 program's SNR as the search measures it (on the
    calibration samples its ranges were not fitted to) + ``gain``: the chosen layers and X, or
    why there is no such program."""
    from cortex_m_nn import mixed_precision
    from cortex_m_nn.abi import KernelAbi, Rounding
    from cortex_m_nn.options import QuantizationOptions
    from cortex_m_nn.target import Target

    abi = KernelAbi.for_target(Target.parse(target), Rounding.DOUBLE)
    _, bounds = mixed_precision.choose(
        source, abi, calibration, QuantizationOptions(), -math.inf
    )  # int8 meets any target: the two uniform programs, measured as the search does
    goal = bounds.int8_snr_db + gain
    if bounds.int16_snr_db < goal:
        return {"status": "unreachable", "target_db": goal}
    layers = sum("_s16" in (r.cmsis_function or "") for r in programs["int16"].records)
    if layers > max_layers:
        return {"status": "skipped", "target_db": goal, "int16_layers_possible": layers}
    options, plan = mixed_precision.choose(source, abi, calibration, QuantizationOptions(), goal)
    return {
        "status": "ok",
        "target_db": goal,
        "int16_layers": list(options.int16_layers),
        "compiles": plan.compiles,
    }


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
    lines = [
        f"{'model':<22} {'SNR dB':>15} {'Δ dB':>6} {'int16 ops':>9} {'requant':>7} "
        f"{'arena B':>17} {'ratio':>6} {'.pte B':>17} {'ratio':>6}",
        f"{'':<22} {'int8':>7} {'int16':>7} {'':>6} {'':>9} {'':>7} {'int8':>8} {'int16':>8} "
        f"{'':>6} {'int8':>8} {'int16':>8} {'':>6}",
    ]
    for name, rows in results.items():
        a, b = rows["int8"], rows["int16"]
        lines.append(
            f"{name:<22} {a['snr_db']:>7.1f} {b['snr_db']:>7.1f} "
            f"{b['snr_db'] - a['snr_db']:>+6.1f} {b['int16_ops']:>9} {b['requantizations']:>7} "
            f"{a['arena_bytes']:>8,} {b['arena_bytes']:>8,} "
            f"{b['arena_bytes'] / a['arena_bytes']:>6.2f} {a['pte_bytes']:>8,} "
            f"{b['pte_bytes']:>8,} {b['pte_bytes'] / a['pte_bytes']:>6.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from tests.zoo import ZOO

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("models", nargs="*", help=f"zoo models (default all: {', '.join(ZOO)})")
    parser.add_argument("--samples", type=int, default=32, help="calibration and test samples")
    parser.add_argument("--target", default="cortex-m55")
    parser.add_argument("--auto-gain", type=float, default=3.0, help="auto's X over int8, dB")
    parser.add_argument("--auto-max-layers", type=int, default=24)
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON")
    args = parser.parse_args(argv)
    unknown = [m for m in args.models if m not in ZOO]
    if unknown:
        parser.error(f"unknown zoo models {unknown}; known: {', '.join(ZOO)}")
    warnings.filterwarnings("ignore")
    results = {}
    for name in args.models or list(ZOO):
        results[name] = measure(
            name, args.samples, args.target, args.auto_gain, args.auto_max_layers
        )
        print(f"{name}: measured", file=sys.stderr, flush=True)
    print(
        f"int8 vs int16 activations, {args.target}, {args.samples} synthetic calibration "
        "samples, SNR of the lowered program vs float on as many other samples"
    )
    print(table(results))
    print()
    print(
        f"--precision auto, X = the int8 program's SNR on the unfitted calibration samples + "
        f"{args.auto_gain:g} dB"
    )
    print(auto_table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
