"""DS-CNN for Cortex-M55: cortex-m-nn against ExecuTorch 1.5.1's own Cortex-M pipeline.

Usage::

    PYTHONPATH=python python benchmarks/bench_ds_cnn.py [--samples N] [--repeat R] [--json FILE]

One run compiles the built-in DS-CNN (``cortex_m_nn.frontend.models.ds_cnn``) three ways, all for
``cortex-m55`` and with the same synthetic calibration samples
(``cortex_m_nn.frontend.calibration.synthetic``): with our pipeline, and with the peer
(``benchmarks/peer.py``) given the model as NCHW and as ``channels_last``. It prints one
table of absolute numbers and ratios ours ÷ peer for each peer variant.

Everything but the compile time is read from the three ``.pte`` files by one function
(``pte_metrics``), so our numbers and the peer's are counted the same way:

* compile seconds: wall clock from a fresh copy of the float module to the ``.pte`` bytes,
  calibration included; best of ``--repeat`` runs, interleaved across the three compilers.
* ``.pte`` bytes, and their ratio to the model's int8 weights + int32 biases (from the
  float model: Σ over conv/linear layers of ``weight.numel() + 4 * bias.numel()``).
* planned arena: Σ of the ``forward`` plan's ``non_const_buffer_sizes``.
* fp32 convolutions: ``aten::convolution`` kernel calls left in the ``.pte``.
* MACs in lowered operators: 1 − (MACs of the fp32 ``aten`` convolution/linear/matmul
  calls, from their tensor shapes in the ``.pte``) ÷ (the float model's MACs, from its
  conv/linear layers). Ours is cross-checked against the compiler's own per-op report.

The peer needs ``pip install tosa-tools==2026.5.0``; without it only our numbers print.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import logging
import math
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

MODEL = "ds_cnn"
TARGET = "cortex-m55"
TOSA_HINT = "pip install tosa-tools==2026.5.0"
OURS, PEER_NCHW, PEER_CL = "ours", "peer NCHW", "peer channels_last"
PEERS = {PEER_NCHW: False, PEER_CL: True}


# --- the float model's own numbers (the denominators) --------------------------------------


def _layers(module: nn.Module) -> list[nn.Module]:
    return [m for m in module.modules() if isinstance(m, nn.Conv1d | nn.Conv2d | nn.Linear)]


def weight_bias_bytes(module: nn.Module) -> int:
    """Bytes of the model's conv/linear parameters as int8 weights and int32 biases."""
    return sum(
        m.weight.numel() + (4 * m.bias.numel() if m.bias is not None else 0)
        for m in _layers(module)
    )


def model_macs(module: nn.Module, example_inputs: tuple[torch.Tensor, ...]) -> int:
    """Multiply-accumulates of the conv/linear layers in one inference of the float model.

    Each output element of a convolution or linear layer takes ``weight[0].numel()`` MACs
    (input channels per group × kernel area, or input features).
    """
    total = 0

    def count(layer: nn.Module, _inputs: Any, output: torch.Tensor) -> None:
        nonlocal total
        total += output.numel() * layer.weight[0].numel()

    hooks = [m.register_forward_hook(count) for m in _layers(module)]
    try:
        with torch.no_grad():
            module(*example_inputs)
    finally:
        for hook in hooks:
            hook.remove()
    return total


# --- the .pte's numbers, counted the same way for every compiler ---------------------------


def _fp32_call_macs(
    name: str, sizes: list[list[int] | None], transposed: bool = False
) -> int | None:
    """MACs of one fp32 ``aten`` call from its argument shapes; None if it does no MACs.

    ``sizes`` are the call's arguments' tensor shapes (None for non-tensors), the out
    variant's output last. Weights of ``aten`` ops keep PyTorch's logical layout. A
    ``transposed`` convolution does ``weight[0].numel()`` MACs per *input* element.
    """
    out = sizes[-1]
    if out is None:
        return None
    if name.startswith("aten::convolution") and transposed:
        return math.prod(sizes[0]) * math.prod(sizes[1][1:])  # weight [I, O/groups, *kernel]
    if name.startswith("aten::convolution") or name.startswith("aten::linear"):
        weight = sizes[1]  # convolution: [O, I/groups, *kernel]; linear: [O, I]
        return math.prod(out) * math.prod(weight[1:])
    if name.startswith(("aten::addmm", "aten::mm", "aten::bmm")):
        left = sizes[1] if name.startswith("aten::addmm") else sizes[0]
        return math.prod(out) * left[-1]
    return None


def pte_metrics(buffer: bytes) -> dict[str, Any]:
    """Size, planned arena, kernel calls, fp32 convolutions and fp32 MACs of a ``.pte``."""
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import KernelCall, Tensor

    program = deserialize_pte_binary(buffer).program
    plan = next(p for p in program.execution_plan if p.name == "forward")
    names = [f"{op.name}.{op.overload}" if op.overload else op.name for op in plan.operators]
    calls: collections.Counter[str] = collections.Counter()
    fp32_macs = 0
    for chain in plan.chains:
        for instruction in chain.instructions:
            if not isinstance(instruction.instr_args, KernelCall):
                continue
            name = names[instruction.instr_args.op_index]
            calls[name] += 1
            if name.startswith("aten::"):
                values = [plan.values[i].val for i in instruction.instr_args.args]
                sizes = [list(v.sizes) if isinstance(v, Tensor) else None for v in values]
                transposed = len(values) > 6 and getattr(values[6], "bool_val", False)
                fp32_macs += _fp32_call_macs(name, sizes, bool(transposed)) or 0
    return {
        "pte_bytes": len(buffer),
        "arena_bytes": sum(plan.non_const_buffer_sizes),
        "kernel_calls": dict(calls),
        "fp32_convolutions": sum(
            n for op, n in calls.items() if op.startswith("aten::convolution")
        ),
        "fp32_macs": fp32_macs,
    }


# --- the compilers --------------------------------------------------------------------------


def compile_ours(module: nn.Module, example_inputs, calibration) -> tuple[float, bytes, Any]:
    from cortex_m_nn.core.target import Target
    from cortex_m_nn.frontend.model_source import ModelSource
    from cortex_m_nn.pipeline import compile_model

    target = Target.parse(TARGET)
    start = time.perf_counter()
    source = ModelSource(MODEL, copy.deepcopy(module).eval(), tuple(example_inputs))
    compiled = compile_model(source, target, calibration, progress=False)
    return time.perf_counter() - start, compiled.pte, compiled


def load_peer() -> tuple[Any, str | None]:
    """``benchmarks/peer.py`` with the peer's heavy imports done; (None, reason) if they fail."""
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import peer

        # The same imports compile_with_peer does, made before any timing.
        from executorch.backends.cortex_m.passes.cortex_m_pass_manager import (  # noqa: F401
            CortexMPassManager,
        )
        from executorch.backends.cortex_m.quantizer.quantizer import (  # noqa: F401
            CortexMQuantizer,
        )
    except ImportError as error:
        return None, f"{type(error).__name__}: {error}"
    return peer, None


def compile_peer(
    peer: Any, module: nn.Module, example_inputs, samples, channels_last: bool
) -> tuple[float, bytes | None, dict[str, Any]]:
    """Run ``peer.compile_with_peer``: (its compile seconds, its ``.pte`` or None, summary)."""
    result = peer.compile_with_peer(module, example_inputs, samples, channels_last, TARGET)
    return result["compile_seconds"], result.pop("pte", None), result


# --- the table ------------------------------------------------------------------------------


def _ratio(ours: float | None, peer: float | None) -> str:
    if ours is None or peer is None or peer == 0:
        return "—"
    ratio = ours / peer
    return f"{ratio:,.0f}" if ratio >= 100 else f"{ratio:.2f}"


ROWS: list[tuple[str, str, Callable[[float], str]]] = [
    ("compile seconds (best of {repeat})", "compile_seconds", lambda v: f"{v:.2f}"),
    (".pte bytes", "pte_bytes", lambda v: f"{v:,}"),
    (".pte / int8 weights+int32 bias", "pte_per_weight_byte", lambda v: f"{v:.2f}"),
    ("planned arena bytes", "arena_bytes", lambda v: f"{v:,}"),
    ("fp32 convolutions left", "fp32_convolutions", lambda v: f"{v:,}"),
    ("MACs in lowered operators", "lowered_mac_share", lambda v: f"{100 * v:.2f}%"),
]


def table(results: dict[str, dict[str, Any]], repeat: int) -> str:
    columns = [OURS, *[p for p in PEERS if p in results]]
    ratio_columns = [f"ours/{p.removeprefix('peer ')}" for p in columns[1:]]
    header = ["metric", *columns, *ratio_columns]
    rows = [header]
    for label, key, fmt in ROWS:
        values = [results[c].get(key) for c in columns]
        cells = [
            fmt(v) if v is not None else f"failed ({results[c].get('stage', '?')})"
            for c, v in zip(columns, values, strict=True)
        ]
        ratios = [_ratio(values[0], v) for v in values[1:]]
        rows.append([label.format(repeat=repeat), *cells, *ratios])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        )
        for row in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def _measure(buffer: bytes | None, seconds: list[float], weights: int, macs: int) -> dict:
    if buffer is None:
        return {}
    metrics = pte_metrics(buffer)
    return {
        "compile_seconds": min(seconds),
        "compile_seconds_all": seconds,
        **metrics,
        "pte_per_weight_byte": metrics["pte_bytes"] / weights,
        "lowered_mac_share": 1 - metrics["fp32_macs"] / macs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=32, help="calibration samples (32)")
    parser.add_argument("--repeat", type=int, default=3, help="compiles per compiler (3)")
    parser.add_argument("--json", type=Path, help="also write all measurements here")
    args = parser.parse_args(argv)
    if args.samples < 1 or args.repeat < 1:
        parser.error("--samples and --repeat must be at least 1")

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)  # the peer logs a line per quantized node

    from cortex_m_nn.frontend.calibration import synthetic
    from cortex_m_nn.frontend.models import BUILTIN_MODELS

    module, example_inputs = BUILTIN_MODELS[MODEL]()
    calibration = synthetic(example_inputs, count=args.samples)
    weights = weight_bias_bytes(module)
    macs = model_macs(module, example_inputs)

    peer, peer_error = load_peer()
    if peer is None:
        print(f"peer skipped ({peer_error}); to compare, run: {TOSA_HINT}")

    seconds: dict[str, list[float]] = {OURS: [], **{p: [] for p in PEERS}} if peer else {OURS: []}
    buffers: dict[str, bytes | None] = {}
    compiled = None
    peer_results: dict[str, dict[str, Any]] = {}
    for _ in range(args.repeat):  # interleaved, so machine drift hits every column alike
        elapsed, buffers[OURS], compiled = compile_ours(module, example_inputs, calibration)
        seconds[OURS].append(elapsed)
        if peer is None:
            continue
        for name, channels_last in PEERS.items():
            elapsed, buffers[name], peer_results[name] = compile_peer(
                peer, module, example_inputs, calibration.samples, channels_last
            )
            seconds[name].append(elapsed)

    results = {name: _measure(buffers[name], seconds[name], weights, macs) for name in seconds}
    records = compiled.records
    report_share = sum(r.macs for r in records if r.lowered) / sum(r.macs for r in records)
    results[OURS]["report_lowered_mac_share"] = report_share
    results[OURS]["report_macs"] = sum(r.macs for r in records)
    for name, summary in peer_results.items():
        if "error" in summary:
            results[name].update(error=summary["error"], stage=summary["stage"])
        else:
            results[name]["peer_summary_fp32_convolutions"] = summary["fp32_convolutions"]

    print(
        f"DS-CNN ({MODEL}) for {TARGET}: {args.samples} synthetic calibration samples; "
        f"{macs:,} MACs, {weights:,} bytes of int8 weights + int32 biases"
    )
    print(table(results, args.repeat))
    notes = []
    if sum(r.macs for r in records) != macs:
        notes.append(f"our report counts {sum(r.macs for r in records):,} MACs, model {macs:,}")
    if abs(report_share - results[OURS]["lowered_mac_share"]) > 1e-9:
        notes.append(f"our report says {100 * report_share:.2f}% of MACs lowered")
    for name, result in results.items():
        if "error" in result:
            notes.append(f"{name} failed at {result['stage']}: {result['error']}")
        summary_convs = result.get("peer_summary_fp32_convolutions")
        if summary_convs is not None and summary_convs != result["fp32_convolutions"]:
            notes.append(f"{name}: peer.py counts {summary_convs} fp32 convolutions")
    for note in notes:
        print(f"note: {note}")

    if args.json:
        payload = {
            "model": MODEL,
            "target": TARGET,
            "calibration_samples": args.samples,
            "repeat": args.repeat,
            "model_macs": macs,
            "weight_bias_bytes": weights,
            "peer_error": peer_error,
            "results": results,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
