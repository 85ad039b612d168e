"""Our compute functions on the target: 200 random layer shapes of each (depthwise, pointwise,
window, fully connected) per core and rounding, and on the M55 100 windows of any input depth,
in one image each
(tests/target/compute_cases.py), bit exact with the Python reference (our pointwise kernel also
in place); CMSIS-NN's function, run on the same cases, agrees with the reference wherever it
computes the call."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from tests.target import compute_cases, harness

from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.core.cmsis_nn import mve_one_by_n_inexact
from cortex_m_nn.core.target import Isa

pytestmark = pytest.mark.skipif(harness.missing() is not None, reason=str(harness.missing()))

CASES = compute_cases.random_cases(200, seed=42)
CONVS: list[compute_cases.ConvCase | compute_cases.LinearCase] = []
CONVS += compute_cases.random_pointwise_cases(200, seed=43)
CONVS += compute_cases.random_window_cases(200, seed=44)
CONVS += compute_cases.random_linear_cases(200, seed=45)
#: window_conv_s8 computes any input depth on MVE (first layers of 1 to 3 channels)
MVE_WINDOWS = compute_cases.random_window_cases(100, seed=46, any_depth=True)


def wrapper_computes(case: object, core: harness.Core) -> bool:
    """Whether CMSIS-NN's wrapper computes the case: off MVE the depthwise wrapper takes
    arm_depthwise_conv_3x3_s8, which pads each end by at most 1 and reads one image; on MVE the
    convolution wrapper's 1xN path miscomputes some paddings (core.cmsis_nn)."""
    if isinstance(case, compute_cases.LinearCase):
        return True
    if isinstance(case, compute_cases.ConvCase):
        shapes = (case.input_shape, case.weight_shape, case.output_shape, case.stride)
        return core.name != "m55" or not mve_one_by_n_inexact(*shapes, case.padding, (1, 1))
    return core.name == "m55" or (max(case.padding[2:]) <= 1 and case.batch == 1)


@pytest.fixture(scope="module")
def plugin(request: pytest.FixtureRequest) -> Path:
    return harness.build_plugin(Path(request.config.cache.mkdir("compute-plugin")))


@pytest.mark.parametrize("rounding", list(Rounding), ids=lambda r: r.value)
@pytest.mark.parametrize("name", ["m55", "m33", "m4"])
def test_our_kernels_are_bit_exact_on_random_shapes(
    name: str, rounding: Rounding, plugin: Path, request: pytest.FixtureRequest
) -> None:
    core = harness.CORES[name]
    build = Path(request.config.cache.mkdir(f"compute-{name}-{rounding.value}"))
    extra = CONVS + (MVE_WINDOWS if name == "m55" else [])
    status, outcomes = compute_cases.run(CASES, core, build, rounding, plugin, extra)
    assert len(outcomes) == len(CASES) + len(extra), f"the image stopped early ({status})"
    assert [o.case for o in outcomes if o.ours_differ] == []
    lanes, convs = outcomes[: len(CASES)], outcomes[len(CASES) :]
    computed = [o for o in lanes if wrapper_computes(o.case, core)]
    assert len(computed) >= 60  # the cross-check covers many cases
    convs = [o for o in convs if wrapper_computes(o.case, core)]
    assert len(convs) >= 550
    assert [o.case for o in computed + convs if o.wrapper_differ] == []
    assert all(o.ours_instructions > 0 for o in outcomes)
    isa = Isa.MVE if core.name == "m55" else Isa.DSP  # the compiler's buffer sizes are the kernel's
    assert [o.buffer_bytes for o in outcomes] == [o.case.buffer_bytes(isa) for o in outcomes]
    assert sorted(map(id, (o.case for o in outcomes))) == sorted(map(id, [*CASES, *extra]))


def test_a_wrong_expected_byte_is_reported(
    plugin: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: an expected output one off in one byte fails that case, both functions."""
    real = compute_cases.expected

    def off_by_one(case: compute_cases.Case, rounding: Rounding) -> bytes:
        data = bytearray(real(case, rounding))
        data[len(data) // 2] = (data[len(data) // 2] + 1) % 256
        return bytes(data)

    monkeypatch.setattr(compute_cases, "expected", off_by_one)
    cases = [replace(c, seed=c.seed + 1) for c in CASES[:3]]
    convs = [replace(c, seed=c.seed + 1, channels=c.depth + 1) for c in CONVS[:2]]  # pointwise
    window = next(c for c in CONVS if isinstance(c, compute_cases.ConvCase) and c.window)
    linear = next(c for c in CONVS if isinstance(c, compute_cases.LinearCase))
    convs += [replace(window, seed=window.seed + 1), replace(linear, seed=linear.seed + 1)]
    build = Path(request.config.cache.mkdir("compute-m55-control"))
    status, outcomes = compute_cases.run(
        cases, harness.CORES["m55"], build, Rounding.DOUBLE, plugin, convs
    )
    assert status == 7
    # on MVE ours runs the fully connected case twice (the kernel sums, then bias and offset)
    assert [(o.ours_differ, o.wrapper_differ) for o in outcomes] == [(1, 1)] * 6 + [(2, 1)]
