"""Planned arena against the live-tensor lower bound and against the peer's plan, per model.

Usage::

    PYTHONPATH=python python benchmarks/bench_memory.py [SOURCE ...] [--target T]
        [--samples N] [--no-peer] [--json FILE]

``SOURCE`` is anything ``cortex-m-compile`` takes as a model: a built-in name, a
``path/file.py:factory`` or a ``.pt2`` file; without one, the built-in DS-CNN and the test
models of ``tests/python/models.py``. Each model is compiled with our pipeline (operators
that do not lower stay as fp32 fallbacks, so every model compiles) and with the peer,
ExecuTorch 1.5.1's own Cortex-M pipeline (``benchmarks/peer.py``, given the model as
``channels_last`` as its compiler does), with the same synthetic calibration samples.

Columns:

* our arena: Σ of the ``forward`` plan's ``non_const_buffer_sizes`` in our ``.pte``;
* live bound: our graph's live-tensor lower bound (``cortex_m_nn.plan.memory_plan``): the most
  bytes (each tensor 16-byte aligned) live at any kernel call; no plan of that graph can
  be smaller;
* peer arena: the same Σ in the peer's ``.pte`` for the same model;
* our / bound and our / peer: the ratios.

The peer needs ``pip install tosa-tools==2026.5.0``; without it (or with ``--no-peer``) the
peer's columns are empty.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEST_MODELS = ROOT / "tests" / "python" / "models.py"
DEFAULT_SOURCES = [
    "ds_cnn",
    f"{TEST_MODELS}:conv_stack",
    f"{TEST_MODELS}:pools",
    f"{TEST_MODELS}:with_rms_norm",
]
TOSA_HINT = "pip install tosa-tools==2026.5.0"


def load_peer() -> tuple[Any, str | None]:
    """``benchmarks/peer.py`` if the peer's pipeline imports here, else (None, why)."""
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import peer
        from executorch.backends.cortex_m.passes.cortex_m_pass_manager import (  # noqa: F401
            CortexMPassManager,
        )
    except ImportError as error:
        return None, f"{type(error).__name__}: {error}"
    return peer, None


def measure(source_spec: str, target_text: str, samples: int, peer: Any) -> dict[str, Any]:
    """Our arena and bound, and the peer's arena, for one model."""
    from cortex_m_nn.core.target import Target
    from cortex_m_nn.frontend.calibration import synthetic
    from cortex_m_nn.frontend.model_source import load_model
    from cortex_m_nn.pipeline import compile_model

    source = zoo_source(source_spec) if source_spec.startswith("zoo:") else load_model(source_spec)
    calibration = synthetic(source.example_inputs, count=samples)
    compiled = compile_model(
        source, Target.parse(target_text), calibration, allow_fallback=True, progress=False
    )
    plan = compiled.memory
    result: dict[str, Any] = {
        "model": source.name,
        "source": source_spec,
        "arena_bytes": plan.arena_bytes,
        "lower_bound_bytes": plan.lower_bound_bytes,
        "largest_scratch_bytes": plan.largest_scratch_bytes,
        "fallbacks": len(compiled.stages.lowering.fallbacks),
        "pte_bytes": len(compiled.pte),
        "peer": None,
    }
    if peer is not None:
        found = peer.compile_with_peer(
            source.module, source.example_inputs, calibration.samples, True, target_text
        )
        found.pop("pte", None)
        result["peer"] = {
            k: found[k] for k in ("arena_bytes", "pte_bytes", "error", "stage") if k in found
        }
    return result


def zoo_source(spec: str) -> Any:
    """``zoo:<name>``: a model of tests/zoo (a package, so not loadable as ``file.py:f``)."""
    from cortex_m_nn.frontend.model_source import ModelSource

    sys.path.insert(0, str(ROOT))
    from tests.zoo import ZOO

    name = spec.removeprefix("zoo:")
    module, inputs = ZOO[name]()
    return ModelSource(name, module, tuple(inputs))


def zoo_specs() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from tests.zoo import ZOO

    return [f"zoo:{name}" for name in ZOO]


def _ratio(a: int | None, b: int | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "—"


def table(results: list[dict[str, Any]]) -> str:
    header = (
        f"{'model':<28} {'our arena':>10} {'live bound':>10} {'our/bound':>9} "
        f"{'peer arena':>10} {'our/peer':>8}  note"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        peer = r["peer"] or {}
        peer_arena = peer.get("arena_bytes")
        notes = []
        if r["fallbacks"]:
            notes.append(f"{r['fallbacks']} fp32 fallback(s)")
        if "error" in peer:
            notes.append(f"peer failed at {peer['stage']}: {peer['error'][:60]}")
        lines.append(
            f"{r['model'][:28]:<28} {r['arena_bytes']:>10,} {r['lower_bound_bytes']:>10,} "
            f"{_ratio(r['arena_bytes'], r['lower_bound_bytes']):>9} "
            f"{'—' if peer_arena is None else f'{peer_arena:,}':>10} "
            f"{_ratio(r['arena_bytes'], peer_arena):>8}  {'; '.join(notes)}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", metavar="SOURCE", help="models (default: see doc)")
    parser.add_argument("--target", default="cortex-m55", help="target (cortex-m55)")
    parser.add_argument("--samples", type=int, default=8, help="calibration samples (8)")
    parser.add_argument("--no-peer", action="store_true", help="our numbers only")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    parser.add_argument("--zoo", action="store_true", help="every model of tests/zoo")
    args = parser.parse_args(argv)

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)  # the peer logs a line per quantized node
    peer, peer_error = (None, "--no-peer") if args.no_peer else load_peer()
    if peer is None and not args.no_peer:
        print(f"peer skipped ({peer_error}); to compare, run: {TOSA_HINT}")

    results = []
    specs = args.sources or ([] if args.zoo else DEFAULT_SOURCES)
    if args.zoo:
        specs = specs + zoo_specs()
    for spec in specs:
        results.append(measure(spec, args.target, args.samples, peer))
        print(f"measured {results[-1]['model']}", file=sys.stderr)
    print(f"planned arena for {args.target} ({args.samples} synthetic calibration samples)")
    print(table(results))
    if args.json:
        payload = {"target": args.target, "peer_error": peer_error, "results": results}
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
