"""The zoo lowers completely: every model lowers for three cores from NCHW input with no
fallback (only those ``MAY_FALL_BACK`` allows, which the report lists as FALLBACK), every
lowered operator is within 1 LSB of the PT2E reference (``verify``), and each model
serialises to a ``.pte`` holding only what the lowering left.

Each model is exported and calibrated once (with a few samples, the session-scoped
``quantized_models`` of tests/conftest.py) and lowered once per core (a module-scoped
fixture). Lowering is what depends on the core (kernel choice, scratch sizes per ISA);
serialising (``to_edge``/``to_executorch``, seconds per model) does not, so it runs once per
model, for the first core.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tests.quantized_models import SAMPLES, Quantized, QuantizedModels

from cortex_m_nn.check.harness import count_operators
from cortex_m_nn.check.verify import verify
from cortex_m_nn.core.options import Activations, QuantizationOptions, Weights
from cortex_m_nn.core.target import Target
from cortex_m_nn.lower.passes import lower
from cortex_m_nn.lower.records import LoweringResult
from cortex_m_nn.report import compile_report as report

from . import MAY_FALL_BACK, ZOO

CORES = ("cortex-m55", "cortex-m33", "cortex-m0plus")
#: Float operators around an allowed fallback: the boundary back to int8 and the views.
BOUNDARY = {"cortex_m_nn.quantize", "cortex_m_nn.dequantize", "aten.view", "aten.reshape"}


#: The quantizer's options each model is compiled with: the defaults, int16 activations (every
#: op with an int16 case) and int4 weights (every layer with an int4 case); the same fallbacks
#: allowed.
PRECISIONS = {
    "int8": None,
    "int16": QuantizationOptions(activations=Activations.INT16),
    "int4": QuantizationOptions(weights=Weights.INT4),
}


@pytest.fixture(
    scope="module",
    params=[
        pytest.param((name, core, kind), id=f"{name}-{kind}-{core}")
        for name in ZOO
        for kind in PRECISIONS
        for core in CORES
    ],
)
def lowered(
    request: pytest.FixtureRequest, quantized_models: QuantizedModels
) -> tuple[str, Quantized, LoweringResult]:
    name, core, kind = request.param
    quantized = quantized_models.get(name, ZOO[name], PRECISIONS[kind])
    # NCHW: the layout is the compiler's job
    assert all(x.is_contiguous() for x in quantized.source.example_inputs)
    return name, quantized, lower(quantized.graphs[1], Target.parse(core))


def test_lowers_completely(lowered: tuple[str, Quantized, LoweringResult]) -> None:
    name, _, lowering = lowered
    allowed = MAY_FALL_BACK.get(name, set())
    fallbacks = [r for r in lowering.records if not r.lowered]
    assert {r.source_op for r in fallbacks} <= allowed, [
        (r.source_op, r.fallback_reason) for r in fallbacks
    ]
    for operator in count_operators(lowering.graph_module):
        assert operator.startswith("cortex_m_nn.") or operator in BOUNDARY | allowed, operator


def test_matches_the_pt2e_reference(lowered: tuple[str, Quantized, LoweringResult]) -> None:
    _, quantized, lowering = lowered
    calibration = quantized.calibration
    verification = verify(
        lowering, quantized.graphs[1], quantized.source.module, calibration.samples
    )
    assert verification.passed, verification.exceeding
    assert verification.samples == SAMPLES


@pytest.mark.parametrize("name", list(ZOO))
def test_serialises_with_its_fallbacks_reported(
    name: str, quantized_models: QuantizedModels
) -> None:
    quantized = quantized_models.get(name, ZOO[name])
    program = quantized.lower(CORES[0], allow_fallback=bool(MAY_FALL_BACK.get(name)))
    fallbacks = [r for r in program.records if not r.lowered]
    text = report.to_text(report.as_dict(program, None))
    listed = [line for line in text.splitlines() if "FALLBACK" in line]
    assert len(listed) == len(fallbacks)
    assert all(r.source_op[:22] in line for r, line in zip(fallbacks, listed, strict=True))
    # The program calls exactly the operators the lowered graph holds (nothing lost or added).
    serialised = {op.removesuffix(".out") for op in program.operators}
    graph = {op.replace(".", "::", 1) for op in count_operators(program.lowered)}
    assert {op for op in graph if op.startswith("cortex_m_nn::")} == {
        op for op in serialised if op.startswith("cortex_m_nn::")
    }


@pytest.mark.parametrize("name", list(ZOO))
def test_factories_are_seeded(name: str) -> None:
    (first, inputs), (second, again) = ZOO[name](), ZOO[name]()
    assert not first.training
    assert all(torch.equal(a, b) for a, b in zip(inputs, again, strict=True))
    for (key, a), b in zip(first.state_dict().items(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b), key


@pytest.mark.parametrize("name", list(ZOO))
def test_the_small_schedule_is_never_above_the_layer_by_layer_bound(
    name: str, quantized_models: QuantizedModels
) -> None:
    """--memory small (overlaps, a stage in strips) never needs more than every live tensor
    in its own bytes layer by layer (the fast schedule's bound), on every zoo model."""
    quantized = quantized_models.get(name, ZOO[name])
    fast = quantized.lower(CORES[0], allow_fallback=bool(MAY_FALL_BACK.get(name)))
    small = dataclasses.replace(fast, schedule="small", _serialised=None)
    assert small.arena_bytes <= fast.memory.lower_bound_bytes
    assert small.memory.conflicts() == []
