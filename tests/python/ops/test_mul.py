"""``cortex_m_nn::mul`` against a Python-int transcription of arm_elementwise_mul_s8."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.arithmetic import Rounding, use_rounding
from cortex_m_nn.ops.mul import MAX_OUTPUT_SHIFT, mul, mul_parameters

from .independent import broadcast_pairs, ref_requantize
from .test_add import ref_quantize_multiplier
from .test_broadcast import shape_pairs

OP = torch.ops.cortex_m_nn.mul
NAMES = ["input1_offset", "input2_offset", "output_offset", "output_multiplier", "output_shift"]


def expected(x1: torch.Tensor, x2: torch.Tensor, p: dict, single: bool = False) -> torch.Tensor:
    pairs, shape = broadcast_pairs(x1, x2)
    out = []
    for a, b in pairs:
        product = (a + p["input1_offset"]) * (b + p["input2_offset"])
        y = ref_requantize(product, p["output_multiplier"], p["output_shift"], single)
        y += p["output_offset"]
        out.append(min(max(y, p["activation_min"]), p["activation_max"]))
    return torch.tensor(out, dtype=torch.int8).reshape(shape)


def run(x1: torch.Tensor, x2: torch.Tensor, p: dict) -> torch.Tensor:
    return mul(x1, x2, *(p[name] for name in NAMES), p["activation_min"], p["activation_max"])


scales = st.floats(1e-3, 1.0)
zero_points = st.integers(-128, 127)


@st.composite
def quantized_cases(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, dict, tuple]:
    s1, s2, so = draw(scales), draw(scales), draw(st.floats(2e-3, 1.0))
    z1, z2, zo = draw(zero_points), draw(zero_points), draw(zero_points)
    params = mul_parameters(
        s1, s2, so, input1_zero_point=z1, input2_zero_point=z2, output_zero_point=zo
    )
    act_min = draw(st.integers(-128, 0))
    params.update(activation_min=act_min, activation_max=draw(st.integers(act_min, 127)))
    shape1, shape2 = draw(shape_pairs())
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    x1 = torch.randint(-128, 128, shape1, generator=gen, dtype=torch.int8)
    x2 = torch.randint(-128, 128, shape2, generator=gen, dtype=torch.int8)
    return x1, x2, params, (s1, z1, s2, z2, so, zo)


@settings(max_examples=80, deadline=None)
@given(quantized_cases())
def test_mul_matches_independent_and_float(case: tuple) -> None:
    x1, x2, p, (s1, z1, s2, z2, so, zo) = case
    got = run(x1, x2, p)
    assert torch.equal(got, expected(x1, x2, p))
    real = (s1 * (x1.double() - z1)) * (s2 * (x2.double() - z2)) / so + zo
    ideal = real.round().clamp(p["activation_min"], p["activation_max"])
    assert (got.double() - ideal).abs().max() <= 1


@settings(max_examples=40, deadline=None)
@given(quantized_cases())
def test_mul_single_rounding(case: tuple) -> None:
    x1, x2, p, _ = case
    with use_rounding(Rounding.SINGLE):
        got = run(x1, x2, p)
    assert torch.equal(got, expected(x1, x2, p, single=True))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-128, 127), st.integers(-128, 127)), min_size=1, max_size=30),
    st.integers(-127, 128),
    st.integers(-127, 128),
    st.integers(-128, 127),
    st.integers(2**30, 2**31 - 1),
    st.integers(-31, MAX_OUTPUT_SHIFT),
    st.booleans(),
)
def test_mul_raw_arguments(
    pairs: list[tuple[int, int]],
    offset1: int,
    offset2: int,
    offset_out: int,
    multiplier: int,
    shift: int,
    single: bool,
) -> None:
    x1 = torch.tensor([a for a, _ in pairs], dtype=torch.int8)
    x2 = torch.tensor([b for _, b in pairs], dtype=torch.int8)
    values = [offset1, offset2, offset_out, multiplier, shift]
    p = dict(zip(NAMES, values, strict=True), activation_min=-128, activation_max=127)
    with use_rounding(Rounding.SINGLE if single else Rounding.DOUBLE):
        got = run(x1, x2, p)
    assert torch.equal(got, expected(x1, x2, p, single))


@settings(max_examples=100, deadline=None)
@given(scales, scales, st.floats(1e-3, 1.0))
def test_mul_parameters_formula(s1: float, s2: float, so: float) -> None:
    p = mul_parameters(s1, s2, so, input1_zero_point=-5, input2_zero_point=7, output_zero_point=2)
    assert (p["output_multiplier"], p["output_shift"]) == ref_quantize_multiplier(s1 * s2 / so)
    assert (p["input1_offset"], p["input2_offset"], p["output_offset"]) == (5, -7, 2)


def test_mul_parameters_hand_computed() -> None:
    # 0.5 * 0.25 / 0.0625 = 2 = 0.5 * 2^2: multiplier 2^30, left shift 2.
    assert mul_parameters(0.5, 0.25, 0.0625) == {
        "input1_offset": 0,
        "input2_offset": 0,
        "output_offset": 0,
        "output_multiplier": 2**30,
        "output_shift": 2,
    }


def test_mul_parameters_refuse_a_left_shift_that_overflows() -> None:
    with pytest.raises(ValueError, match="calibrate"):
        mul_parameters(1.0, 1.0, 2.0**-14)
    assert mul_parameters(1.0, 1.0, 2.0**-12)["output_shift"] == MAX_OUTPUT_SHIFT


def test_mul_saturates_to_activation_range() -> None:
    p = mul_parameters(1.0, 1.0, 1.0)
    p.update(activation_min=-3, activation_max=100)
    x = torch.tensor([127, -128, 2, 0], dtype=torch.int8)
    y = torch.tensor([127, 1, -2, 5], dtype=torch.int8)
    assert run(x, y, p).tolist() == [100, -3, -3, 0]


def test_mul_functional_out_fake_and_shape_check() -> None:
    p = mul_parameters(0.1, 0.2, 0.05, input2_zero_point=10)
    args = [p[name] for name in NAMES] + [-128, 127]
    x1 = torch.randint(-128, 128, (12, 3), dtype=torch.int8)
    x2 = torch.randint(-128, 128, (1, 3), dtype=torch.int8)
    out = OP(x1, x2, *args)
    assert torch.equal(out, run(x1, x2, dict(p, activation_min=-128, activation_max=127)))
    buffer = torch.empty_like(out)
    assert torch.ops.cortex_m_nn.mul.out(x1, x2, *args, out=buffer) is buffer
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = OP(torch.empty(2, 1, dtype=torch.int8), torch.empty(1, 3, dtype=torch.int8), *args)
    assert fake.shape == (2, 3) and fake.dtype == torch.int8
    with pytest.raises(ValueError, match="do not broadcast"):
        mul(x1, x2[:, :2], *args)
