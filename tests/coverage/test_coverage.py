"""The coverage corpus lowers completely and matches the PT2E reference.

* every architecture, quantized once (the session's ``quantized_models``), lowered for
  cortex-m55 and cortex-m33 from NCHW with no fallback and verified (every lowered operator
  within 1 LSB of the PT2E reference); for cortex-m55 the whole compile, ``.pte`` included;
* every per-layer case, quantized with two samples and lowered for cortex-m55 (lowering and
  verification only: serialising 200 tiny programs would cost minutes, and the architectures
  serialise every kind of operator the cases lower).

Issue 12's features land in parallel; a model that fails today is marked
``xfail(strict=True)`` in ``expected.py`` with the feature that fixes it, so the marker has to
go when that feature lands (a strict xfail that passes fails).
"""

from __future__ import annotations

import pytest
import torch
from tests.quantized_models import QuantizedModels

from cortex_m_nn.check.verify import verify, verify_program
from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.core.target import Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.lower.passes import lower
from cortex_m_nn.pipeline import quantize

from . import ARCHITECTURES, CASES
from .architectures import TIMM, TIMM_MISSING
from .expected import FAILING

CORES = ("cortex-m55", "cortex-m33")
#: The core whose architecture compiles are serialised too (the .pte does not depend on the
#: core beyond its metadata; the other core is lowered and verified only, to keep CI cheap).
SERIALISED = "cortex-m55"
#: Calibration samples of a per-layer case (verification runs each twice, once doubled).
CASE_SAMPLES = 2


def _params(names: list[str], cores: tuple[str, ...] = ("",)) -> list:
    params = []
    for name in names:
        for core in cores:
            key = f"{name}@{core}" if f"{name}@{core}" in FAILING else name
            marks = [pytest.mark.xfail(strict=True, reason=FAILING[key])] if key in FAILING else []
            if name in TIMM and TIMM_MISSING:
                marks.append(pytest.mark.skip(reason=TIMM_MISSING))
            ident = f"{name}-{core}" if core else name
            params.append(pytest.param(name, *([core] if core else []), marks=marks, id=ident))
    return params


@pytest.mark.parametrize(("name", "core"), _params(list(ARCHITECTURES), CORES))
def test_architecture_lowers_and_verifies(
    name: str, core: str, quantized_models: QuantizedModels
) -> None:
    quantized = quantized_models.get(f"coverage.{name}", ARCHITECTURES[name])
    if core == SERIALISED:  # the whole compile, .pte included (it raises on a fallback)
        verification = verify_program(quantized.lower(core))
    else:
        graph = quantized.graphs[1]
        lowering = lower(graph, Target.parse(core))
        assert not lowering.fallbacks, [
            (r.source_op, r.fallback_reason) for r in lowering.fallbacks
        ]
        samples = quantized.calibration.samples
        verification = verify(lowering, graph, quantized.source.module, samples, Rounding.DOUBLE)
    assert verification.passed, verification.per_node


@pytest.mark.parametrize("name", _params(list(CASES)))
def test_case_lowers_and_verifies(name: str) -> None:
    module, inputs = CASES[name]()
    source = ModelSource(name, module, inputs)
    calibration = synthetic(inputs, count=CASE_SAMPLES)
    _, quantized = quantize(source, calibration, progress=False)
    lowering = lower(quantized, Target.parse("cortex-m55"))
    assert not lowering.fallbacks, [(r.source_op, r.fallback_reason) for r in lowering.fallbacks]
    verification = verify(lowering, quantized, module, calibration.samples, Rounding.DOUBLE)
    assert verification.passed, verification.per_node


def test_expected_failures_name_corpus_models() -> None:
    known = {*CASES, *(f"{n}@{c}" for n in ARCHITECTURES for c in CORES), *ARCHITECTURES}
    assert set(FAILING) <= known, set(FAILING) - known


@pytest.mark.parametrize("name", _params(list(ARCHITECTURES)))
def test_architectures_are_seeded_and_small(name: str) -> None:
    """Seeded, eval mode, batch 1; the re-implemented ones small (timm's are the size timm
    builds: 1.3 M and 5.7 M parameters)."""
    (first, inputs), (second, again) = ARCHITECTURES[name](), ARCHITECTURES[name]()
    assert not first.training and inputs[0].shape[0] == 1
    assert all(torch.equal(a, b) for a, b in zip(inputs, again, strict=True))
    for (key, a), b in zip(first.state_dict().items(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b), key
    if name not in TIMM:
        assert 64 <= inputs[0].shape[-1] <= 96
        assert sum(p.numel() for p in first.parameters()) < 250_000
