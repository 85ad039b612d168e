"""The model zoo for Cortex-M55: cortex-m-nn against ExecuTorch 1.5.1's own Cortex-M pipeline.

Usage::

    PYTHONPATH=python python benchmarks/bench_zoo.py [MODEL ...] [--samples N] [--json FILE]

One run compiles every model of ``tests/zoo`` (or the ones named) three ways, all for
``cortex-m55`` with the same synthetic calibration samples: with our pipeline
(``compile_model``; the zoo's allowed fallbacks kept in fp32), and with the peer
(``benchmarks/peer.py``) given the model as NCHW and as ``channels_last``. It prints one
table per measurement, a row per model, with ratios ours ÷ peer for each peer variant (and
their geometric mean; for the MAC share the difference in percentage points):

* MACs in CMSIS-NN operators: 1 − (MACs of the ``.pte``'s fp32 ``aten`` convolution, linear
  and matmul calls, from their tensor shapes) ÷ (the float model's MACs: its exported graph's
  convolutions, transposed convolutions, linear layers and matrix products). Read from the
  ``.pte`` by ``bench_ds_cnn.pte_metrics`` for every compiler alike.
* compile seconds: wall clock from the float module to the ``.pte`` bytes, calibration
  included (one compile each).
* ``.pte`` bytes, and the planned arena: Σ of the ``forward`` plan's ``non_const_buffer_sizes``.

A first table says how each compile went: ``ok`` with the number of fp32 ``aten::`` kernel
calls left (our allowed fallbacks, the peer's unlowered operators), or, when a compiler fails
on a model, the stage and a footnote with the reason (the innermost exception). Needs ``pip install
tosa-tools==2026.5.0`` for the peer; without it only our column is measured.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
TARGET = "cortex-m55"
OURS, PEER_NCHW, PEER_CL = "ours", "peer NCHW", "peer channels_last"
PEERS = {PEER_NCHW: False, PEER_CL: True}

aten = torch.ops.aten
_CONVOLUTIONS = {aten.conv1d.default, aten.conv2d.default}
_TRANSPOSED = {aten.conv_transpose1d.default, aten.conv_transpose2d.input}
_PRODUCTS = {aten.matmul.default, aten.bmm.default, aten.mm.default}


def model_macs(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> int:
    """Multiply-accumulates of one inference of the float model, from its exported graph."""
    graph = torch.export.export(module, inputs).graph
    total = 0
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        shapes = [
            tuple(a.meta["val"].shape) if isinstance(a, torch.fx.Node) else None
            for a in node.args[:2]
        ]
        out = math.prod(node.meta["val"].shape) if "val" in node.meta else 0
        if node.target in _CONVOLUTIONS or node.target is aten.linear.default:
            total += out * math.prod(shapes[1][1:])  # weight [O, I/groups, *kernel] / [O, I]
        elif node.target in _TRANSPOSED:
            total += math.prod(shapes[0]) * math.prod(shapes[1][1:])  # per input element
        elif node.target in _PRODUCTS:
            total += out * shapes[0][-1]
    return total


def load_benchmarks() -> tuple[Any, Any, str | None]:
    """(bench_ds_cnn, peer or None, why the peer is unavailable)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_ds_cnn

    peer, error = bench_ds_cnn.load_peer()
    return bench_ds_cnn, peer, error


def compile_ours(name: str, module, inputs, calibration, allow_fallback: bool) -> dict:
    from cortex_m_nn.core.target import Target
    from cortex_m_nn.frontend.model_source import ModelSource
    from cortex_m_nn.pipeline import compile_model

    start = time.perf_counter()
    try:
        source = ModelSource(name, copy.deepcopy(module).eval(), tuple(inputs))
        compiled = compile_model(
            source, Target.parse(TARGET), calibration, allow_fallback=allow_fallback, progress=False
        )
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}", "stage": "compile"}
    seconds = time.perf_counter() - start
    records = compiled.records
    return {
        "compile_seconds": seconds,
        "pte": compiled.pte,
        "fallbacks": [r.source_op for r in records if not r.lowered],
        "report_macs": sum(r.macs for r in records),
        "report_lowered_macs": sum(r.macs for r in records if r.lowered),
    }


def measure(name: str, samples: int, bench: Any, peer: Any) -> dict[str, dict[str, Any]]:
    """Every compiler's measurements for one zoo model."""
    from tests.zoo import MAY_FALL_BACK, ZOO

    from cortex_m_nn.frontend.calibration import synthetic

    module, inputs = ZOO[name]()
    calibration = synthetic(inputs, count=samples)
    macs = model_macs(module, inputs)
    results = {OURS: compile_ours(name, module, inputs, calibration, name in MAY_FALL_BACK)}
    if peer is not None:
        for column, channels_last in PEERS.items():
            results[column] = peer.compile_with_peer(
                module, inputs, calibration.samples, channels_last, TARGET
            )
    for result in results.values():
        buffer = result.pop("pte", None)
        if buffer is None:
            continue
        metrics = bench.pte_metrics(buffer)
        calls = metrics["kernel_calls"]
        result.update(metrics)
        result["model_macs"] = macs
        result["cmsis_nn_mac_share"] = 1 - metrics["fp32_macs"] / macs if macs else 1.0
        result["fp32_calls"] = sum(n for op, n in calls.items() if op.startswith("aten::"))
    return results


# --- the tables -----------------------------------------------------------------------------


def _ratio(ours: float | None, peer: float | None) -> str:
    if ours is None or peer is None or peer == 0:
        return "—"
    return f"{ours / peer:.2f}"


def _status(result: dict[str, Any], reasons: list[str]) -> str:
    """``ok`` (with the fp32 kernel calls left) or ``failed at <stage> [n]``, the reason
    added to ``reasons`` as footnote n."""
    if "error" in result:
        reason = result.get("cause") or result["error"].splitlines()[0]
        if reason not in reasons:
            reasons.append(reason)
        return f"failed at {result['stage']} [{reasons.index(reason) + 1}]"
    fp32 = result["fp32_calls"]
    return "ok" if not fp32 else f"ok, {fp32} fp32 kernel call{'s' * (fp32 != 1)}"


def _render(rows: list[list[str]], left: int = 1) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(widths[i]) if i < left else cell.rjust(widths[i])
            for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]
    lines.insert(1, "-" * max(len(line) for line in lines))
    return "\n".join(lines)


#: (title, key, format, whether ours vs peer is a difference in points rather than a ratio)
METRICS = [
    ("MACs in CMSIS-NN operators", "cmsis_nn_mac_share", lambda v: f"{100 * v:.1f}%", True),
    ("compile seconds", "compile_seconds", lambda v: f"{v:.1f}", False),
    (".pte bytes", "pte_bytes", lambda v: f"{v:,}", False),
    ("planned arena bytes", "arena_bytes", lambda v: f"{v:,}", False),
]


def _points(ours: float | None, peer: float | None) -> str:
    if ours is None or peer is None:
        return "—"
    return f"{100 * (ours - peer):+.1f} pp"


def _geomean(ratios: list[float]) -> str:
    if not ratios:
        return "—"
    return f"{math.exp(sum(math.log(r) for r in ratios) / len(ratios)):.2f}"


def tables(measured: dict[str, dict[str, dict[str, Any]]]) -> str:
    columns = [c for c in (OURS, *PEERS) if any(c in r for r in measured.values())]
    status = [["model", "MACs", *columns]]
    reasons: list[str] = []
    for name, results in measured.items():
        macs = next((r["model_macs"] for r in results.values() if "model_macs" in r), None)
        cells = [_status(results[c], reasons) for c in columns]
        status.append([name, "—" if macs is None else f"{macs:,}", *cells])
    footnotes = [f"[{n}] {reason}" for n, reason in enumerate(reasons, 1)]
    blocks = ["\n".join([_render(status, left=len(status[0])), *footnotes])]
    peers = columns[1:]
    for title, key, fmt, points in METRICS:
        compare = _points if points else _ratio
        sign = "−" if points else "/"
        rows = [[title, *columns, *[f"ours{sign}{p.removeprefix('peer ')}" for p in peers]]]
        ratios: list[list[float]] = [[] for _ in peers]
        for name, results in measured.items():
            values = [None if "error" in results[c] else results[c].get(key) for c in columns]
            cells = ["failed" if v is None else fmt(v) for v in values]
            rows.append([name, *cells, *[compare(values[0], v) for v in values[1:]]])
            for found, value in zip(ratios, values[1:], strict=True):
                if values[0] and value:
                    found.append(values[0] / value)
        if not points and len(measured) > 1:
            rows.append(["geometric mean", *[""] * len(columns), *map(_geomean, ratios)])
        blocks.append(_render(rows))
    return "\n\n".join(blocks)


def notes(measured: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Disagreements between our report and the .pte-based counts, and our fallbacks."""
    found = []
    for name, results in measured.items():
        ours = results[OURS]
        if "error" in ours:
            continue
        if ours["report_macs"] != ours["model_macs"]:
            found.append(
                f"{name}: our report counts {ours['report_macs']:,} MACs, the model "
                f"{ours['model_macs']:,}"
            )
        share = ours["report_lowered_macs"] / ours["report_macs"] if ours["report_macs"] else 1
        if abs(share - ours["cmsis_nn_mac_share"]) > 1e-9:
            found.append(f"{name}: our report says {100 * share:.1f}% of MACs lowered")
        if ours["fallbacks"]:
            found.append(f"{name}: our allowed fp32 fallbacks: {', '.join(ours['fallbacks'])}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", metavar="MODEL", help="zoo models (default: all)")
    parser.add_argument("--samples", type=int, default=8, help="calibration samples (8)")
    parser.add_argument("--json", type=Path, help="also write all measurements here")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.disable(logging.ERROR)  # the peer logs every quantized node and failed fake runs

    bench, peer, peer_error = load_benchmarks()
    from tests.zoo import ZOO

    unknown = sorted(set(args.models) - set(ZOO))
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; the zoo has {', '.join(ZOO)}")
    if peer is None:
        print(f"peer skipped ({peer_error}); to compare, run: {bench.TOSA_HINT}")
    start = time.perf_counter()
    measured = {}
    for name in args.models or list(ZOO):
        measured[name] = measure(name, args.samples, bench, peer)
        print(f"measured {name}", file=sys.stderr)
    print(
        f"model zoo for {TARGET}: {args.samples} synthetic calibration samples; "
        f"{time.perf_counter() - start:.0f} s in all"
    )
    print(tables(measured))
    for note in notes(measured):
        print(f"note: {note}")
    if args.json:
        payload = {"target": TARGET, "samples": args.samples, "peer_error": peer_error}
        args.json.write_text(json.dumps(payload | {"models": measured}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
