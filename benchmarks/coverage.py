"""The coverage table: what cortex-m-nn and its peer make of ordinary PyTorch code.

Usage::

    PYTHONPATH=python python benchmarks/coverage.py [NAME ...] [--architectures | --cases]
        [--cores cortex-m55[,cortex-m33]] [--peer-layout channels_last|nchw] [--no-peer]
        [--samples N] [--json FILE]
    PYTHONPATH=python python benchmarks/coverage.py --render FILE

Compiles every model of the coverage corpus (``tests/coverage``: ``CASES``, one tiny model per
layer or tensor method, and ``ARCHITECTURES``, published small architectures re-implemented
from their papers), or the ones named (a name ending in ``.`` selects a family, e.g.
``conv.``), for each core, with our pipeline and with the peer, ExecuTorch 1.5.1's
``backends/cortex_m`` (``benchmarks/peer.py``: its ``CortexMQuantizer``, then
``to_edge_transform_and_lower`` and its ``CortexMPassManager``), on the same calibration
samples. One row per model, a column per compiler and core:

* ours: ``lowered`` (every operator on a ``cortex_m_nn`` kernel), ``fallback`` (operators the
  quantizer left in float, kept in fp32 with ``--allow-fallback``), ``refused`` (a lowering
  rule refused an operator, or the compile raised ``CompileError``) or ``error`` (anything
  else: a bug). The footnote names the operators and the reasons from the report.
* peer: ``lowered`` (no ``aten::`` kernel call left in its ``.pte``: only ``cortex_m::``
  operators and its dim-order copies), ``fallback`` (``aten::`` calls left, i.e. portable
  float or unquantized kernels, named in the footnote) or ``failed`` (the stage and the
  innermost exception).

One model failing never stops the table. Needs ``pip install tosa-tools==2026.5.0`` for the
peer (see ``peer.py``); without it the peer's column says so and ours is still measured.
``--json`` writes every result (our fallback records, the peer's kernel calls) to a file,
after every model; ``--render FILE`` prints the table of such a file.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
OURS, PEER = "ours", "peer"


def load_corpus() -> tuple[dict[str, Callable], dict[str, Callable]]:
    """(per-layer cases, architectures) of ``tests/coverage``."""
    sys.path.insert(0, str(ROOT))
    from tests.coverage import ARCHITECTURES, CASES
    from tests.coverage.architectures import TIMM, TIMM_MISSING

    if TIMM_MISSING:
        print(f"skipping {', '.join(TIMM)}: {TIMM_MISSING}", file=sys.stderr)
        return CASES, {k: v for k, v in ARCHITECTURES.items() if k not in TIMM}
    return CASES, ARCHITECTURES


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def _fallback_result(records: list) -> dict[str, Any]:
    """Our status from the report's fallback rows: refused if a rule refused one."""
    from cortex_m_nn.core.refusals import Refusal

    fallbacks = [r for r in records if not r.lowered]
    if not fallbacks:
        return {"status": "lowered"}
    refused = any(r.refusal not in (None, Refusal.NOT_QUANTIZED) for r in fallbacks)
    reasons: list[str] = []
    for record in fallbacks:
        reason = f"{record.source_op}: {record.fallback_reason}"
        if reason not in reasons:
            reasons.append(reason)
    return {
        "status": "refused" if refused else "fallback",
        "why": "; ".join(reasons),
        "fallbacks": [
            {
                "op": r.source_op,
                "reason": r.fallback_reason,
                "refusal": getattr(r.refusal, "value", None),
            }
            for r in fallbacks
        ],
    }


def compile_ours(name: str, module, inputs, calibration, cores: list[str]) -> dict[str, dict]:
    """Quantize once, lower for each core with fallbacks allowed (so the report lists them)."""
    from cortex_m_nn.core.errors import CompileError
    from cortex_m_nn.core.target import Target
    from cortex_m_nn.frontend.model_source import ModelSource
    from cortex_m_nn.pipeline import compile_quantized, quantize

    start = time.perf_counter()
    try:
        source = ModelSource(name, copy.deepcopy(module).eval(), tuple(inputs))
        graphs = quantize(source, calibration, progress=False)
    except Exception as error:
        status = "refused" if isinstance(error, CompileError) else "error"
        result = {"status": status, "why": f"quantize: {_first_line(error)}"}
        return {core: dict(result) for core in cores}
    quantized = time.perf_counter() - start
    results: dict[str, dict] = {}
    for core in cores:
        start = time.perf_counter()
        try:
            compiled = compile_quantized(
                source, Target.parse(core), calibration, graphs, allow_fallback=True
            )
            result = _fallback_result(compiled.records)
        except Exception as error:
            status = "refused" if isinstance(error, CompileError) else "error"
            result = {"status": status, "why": f"lower: {_first_line(error)}"}
        result["seconds"] = quantized + time.perf_counter() - start
        results[core] = result
    return results


#: Kernel-call prefixes of the peer's ``.pte`` that are not float fallbacks.
PEER_NATIVE = ("cortex_m::", "dim_order_ops::")


def compile_peer(peer: Any, module, inputs, samples, cores: list[str], channels_last: bool):
    """The peer per core: ``lowered`` / ``fallback`` (its ``aten::`` calls) / ``failed``."""
    results: dict[str, dict] = {}
    for core in cores:
        measured = peer.compile_with_peer(module, inputs, samples, channels_last, core)
        measured.pop("pte", None)
        if "error" in measured:
            why = f"{measured['stage']}: {measured['cause']}"
            results[core] = {"status": "failed", "why": why, "seconds": measured["compile_seconds"]}
            continue
        calls = measured["kernel_calls"]
        left = {op: n for op, n in calls.items() if not op.startswith(PEER_NATIVE)}
        result = {"status": "fallback" if left else "lowered", "kernel_calls": calls}
        if left:
            result["why"] = ", ".join(f"{op}×{n}" if n > 1 else op for op, n in left.items())
        result["seconds"] = measured["compile_seconds"]
        results[core] = result
    return results


def measure(name: str, factory: Callable, args: argparse.Namespace, peer: Any) -> dict:
    """Every compiler's result for one corpus model; never raises."""
    from cortex_m_nn.frontend.calibration import synthetic

    try:
        module, inputs = factory()
        calibration = synthetic(inputs, count=args.samples)
    except Exception as error:  # the corpus itself is broken: say so in the table
        failed = {"status": "error", "why": f"factory: {_first_line(error)}"}
        return {OURS: {c: failed for c in args.cores}, PEER: {c: failed for c in args.cores}}
    results = {OURS: compile_ours(name, module, inputs, calibration, args.cores)}
    if peer is not None:
        channels_last = args.peer_layout == "channels_last"
        results[PEER] = compile_peer(
            peer, module, inputs, calibration.samples, args.cores, channels_last
        )
    return results


# --- the table ------------------------------------------------------------------------------


def _cell(result: dict | None, reasons: list[str]) -> str:
    if result is None:
        return "—"
    if "why" not in result:
        return result["status"]
    if result["why"] not in reasons:
        reasons.append(result["why"])
    return f"{result['status']} [{reasons.index(result['why']) + 1}]"


def _render(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    lines.insert(1, "-" * max(len(line) for line in lines))
    return "\n".join(lines)


def table(measured: dict[str, dict], kinds: dict[str, str], cores: list[str]) -> str:
    """One row per model, a column per compiler and core, reasons as numbered footnotes."""
    columns = [(who, core) for core in cores for who in (OURS, PEER)]
    header = ["model", "kind", *(f"{who} {core.removeprefix('cortex-')}" for who, core in columns)]
    rows, reasons = [header], []
    totals = {column: 0 for column in columns}
    for name, results in measured.items():
        cells = []
        for who, core in columns:
            result = results.get(who, {}).get(core)
            totals[(who, core)] += bool(result and result["status"] == "lowered")
            cells.append(_cell(result, reasons))
        rows.append([name, kinds[name], *cells])
    rows.append(["lowered", "", *(f"{totals[c]}/{len(measured)}" for c in columns)])
    notes = "\n".join(f"[{n}] {reason}" for n, reason in enumerate(reasons, 1))
    return f"{_render(rows)}\n\n{notes}"


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="models or families (prefix ending in '.')")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--architectures", action="store_true", help="only the architectures")
    which.add_argument("--cases", action="store_true", help="only the per-layer cases")
    parser.add_argument("--cores", default="cortex-m55", help="comma-separated (cortex-m33 too)")
    parser.add_argument("--peer-layout", choices=("channels_last", "nchw"), default="channels_last")
    parser.add_argument("--no-peer", action="store_true", help="measure ours only")
    parser.add_argument("--samples", type=int, default=4, help="calibration samples")
    parser.add_argument("--json", type=Path, help="write every result to this file")
    args = parser.parse_args(argv)
    args.cores = [core.strip() for core in args.cores.split(",") if core.strip()]
    return args


def _selected(args: argparse.Namespace) -> tuple[dict[str, Callable], dict[str, str]]:
    cases, architectures = load_corpus()
    corpus = {} if args.cases else {n: ("architecture", f) for n, f in architectures.items()}
    if not args.architectures:
        corpus.update({n: ("layer/op", f) for n, f in cases.items()})
    if args.names:
        wanted = lambda n: any(n == w or (w.endswith(".") and n.startswith(w)) for w in args.names)  # noqa: E731
        corpus = {n: entry for n, entry in corpus.items() if wanted(n)}
    return {n: f for n, (_, f) in corpus.items()}, {n: k for n, (k, _) in corpus.items()}


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    logging.disable(logging.WARNING)  # the peer logs a line per quantized node
    warnings.filterwarnings("ignore")
    factories, kinds = _selected(args)
    from bench_memory import load_peer  # the same import check as the memory benchmark

    peer, why = (None, "--no-peer") if args.no_peer else load_peer()
    if peer is None:
        print(f"peer not measured: {why}", file=sys.stderr)
    measured: dict[str, dict] = {}
    for index, (name, factory) in enumerate(factories.items(), 1):
        print(f"[{index}/{len(factories)}] {name}", file=sys.stderr, flush=True)
        measured[name] = measure(name, factory, args, peer)
        if args.json:  # after every model, so that an interrupted run keeps what it measured
            document = {n: {"kind": kinds[n], **r} for n, r in measured.items()}
            args.json.write_text(json.dumps(document, indent=2, default=str))
    print(table(measured, kinds, args.cores))
    return 0


def render(path: Path) -> str:
    """The table of a ``--json`` file (also of an interrupted run)."""
    document = json.loads(path.read_text())
    cores = sorted({core for r in document.values() for core in r.get(OURS, {})})
    kinds = {name: result.pop("kind") for name, result in document.items()}
    return table(document, kinds, cores)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--render"]:  # --render FILE: the table of a --json file
        print(render(Path(sys.argv[2])))
        sys.exit(0)
    torch.manual_seed(0)
    sys.exit(main())
