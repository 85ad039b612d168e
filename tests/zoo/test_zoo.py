"""The zoo lowers completely: every model compiles for three cores from NCHW input with no
fallback (only those ``MAY_FALL_BACK`` allows, which the report lists as FALLBACK), and every
lowered operator is within 1 LSB of the PT2E reference (``verify_program``).

Each model is exported and calibrated once (with a few samples, the session-scoped
``quantized_models`` of tests/conftest.py) and lowered once per core (a module-scoped
fixture), so the whole zoo stays a few minutes of CI.
"""

from __future__ import annotations

import pytest
import torch
from tests.quantized_models import SAMPLES, QuantizedModels

from cortex_m_nn import report
from cortex_m_nn.compile import CompiledProgram
from cortex_m_nn.testing import count_operators
from cortex_m_nn.verify import verify_program

from . import MAY_FALL_BACK, ZOO

CORES = ("cortex-m55", "cortex-m33", "cortex-m0plus")
#: Float operators around an allowed fallback: the boundary back to int8 and the views.
BOUNDARY = {"cortex_m_nn.quantize", "cortex_m_nn.dequantize", "aten.view", "aten.reshape"}


@pytest.fixture(
    scope="module",
    params=[pytest.param((name, core), id=f"{name}-{core}") for name in ZOO for core in CORES],
)
def compiled(
    request: pytest.FixtureRequest,
    quantized_models: QuantizedModels,
    ds_cnn_compiled: CompiledProgram,
) -> tuple[str, CompiledProgram]:
    name, core = request.param
    if (name, core) == ("ds_cnn", "cortex-m55"):  # the session's DS-CNN is this very compile
        return name, ds_cnn_compiled
    quantized = quantized_models.get(name, ZOO[name])
    # NCHW: the layout is the compiler's job
    assert all(x.is_contiguous() for x in quantized.source.example_inputs)
    return name, quantized.lower(core, allow_fallback=bool(MAY_FALL_BACK.get(name)))


def test_lowers_completely(compiled: tuple[str, CompiledProgram]) -> None:
    name, program = compiled
    allowed = MAY_FALL_BACK.get(name, set())
    fallbacks = [r for r in program.records if not r.lowered]
    assert {r.source_op for r in fallbacks} <= allowed, [
        (r.source_op, r.fallback_reason) for r in fallbacks
    ]
    text = report.to_text(report.as_dict(program, None))
    listed = [line for line in text.splitlines() if "FALLBACK" in line]
    assert len(listed) == len(fallbacks)
    assert all(r.source_op[:22] in line for r, line in zip(fallbacks, listed, strict=True))
    for operator in count_operators(program.lowered):
        assert operator.startswith("cortex_m_nn.") or operator in BOUNDARY | allowed, operator


def test_matches_the_pt2e_reference(compiled: tuple[str, CompiledProgram]) -> None:
    _, program = compiled
    verification = verify_program(program)
    assert verification.passed, verification.per_node
    assert verification.samples == SAMPLES


@pytest.mark.parametrize("name", list(ZOO))
def test_factories_are_seeded(name: str) -> None:
    (first, inputs), (second, again) = ZOO[name](), ZOO[name]()
    assert not first.training
    assert all(torch.equal(a, b) for a, b in zip(inputs, again, strict=True))
    for (key, a), b in zip(first.state_dict().items(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b), key
