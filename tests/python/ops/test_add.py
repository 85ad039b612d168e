"""``cortex_m_nn::add`` against a Python-int transcription of arm_elementwise_add_s8."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.add import add, add_parameters
from cortex_m_nn.ops.arithmetic import Rounding, use_rounding

from .independent import broadcast_pairs, ref_requantize, wrap32
from .test_broadcast import shape_pairs

OP = torch.ops.cortex_m_nn.add
NAMES = [
    "input1_offset",
    "input1_multiplier",
    "input1_shift",
    "input2_offset",
    "input2_multiplier",
    "input2_shift",
    "left_shift",
    "output_offset",
    "output_multiplier",
    "output_shift",
]


def expected(x1: torch.Tensor, x2: torch.Tensor, p: dict, single: bool = False) -> torch.Tensor:
    pairs, shape = broadcast_pairs(x1, x2)
    out = []
    for a, b in pairs:
        a = wrap32((a + p["input1_offset"]) << p["left_shift"])
        b = wrap32((b + p["input2_offset"]) << p["left_shift"])
        a = ref_requantize(a, p["input1_multiplier"], p["input1_shift"], single)
        b = ref_requantize(b, p["input2_multiplier"], p["input2_shift"], single)
        s = ref_requantize(wrap32(a + b), p["output_multiplier"], p["output_shift"], single)
        s += p["output_offset"]
        out.append(min(max(s, p["activation_min"]), p["activation_max"]))
    return torch.tensor(out, dtype=torch.int8).reshape(shape)


def ref_quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier, written out for real > 2^-32."""
    mantissa, exponent = math.frexp(real)
    fixed = math.floor(mantissa * 2**31 + 0.5)
    if fixed == 2**31:
        return 2**30, exponent + 1
    return fixed, exponent


scales = st.floats(1e-3, 1.0)
zero_points = st.integers(-128, 127)


@st.composite
def quantized_cases(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, dict, tuple]:
    s1, s2, so = draw(scales), draw(scales), draw(scales)
    z1, z2, zo = draw(zero_points), draw(zero_points), draw(zero_points)
    params = add_parameters(
        s1, s2, so, input1_zero_point=z1, input2_zero_point=z2, output_zero_point=zo
    )
    act_min = draw(st.integers(-128, 0))
    params.update(activation_min=act_min, activation_max=draw(st.integers(act_min, 127)))
    shape1, shape2 = draw(shape_pairs())  # same shapes and broadcasting ones
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    x1 = torch.randint(-128, 128, shape1, generator=gen, dtype=torch.int8)
    x2 = torch.randint(-128, 128, shape2, generator=gen, dtype=torch.int8)
    return x1, x2, params, (s1, z1, s2, z2, so, zo)


def run(x1: torch.Tensor, x2: torch.Tensor, p: dict) -> torch.Tensor:
    return add(x1, x2, *(p[name] for name in NAMES), p["activation_min"], p["activation_max"])


@settings(max_examples=60, deadline=None)
@given(quantized_cases())
def test_add_matches_independent_and_float(case: tuple) -> None:
    x1, x2, p, (s1, z1, s2, z2, so, zo) = case
    got = run(x1, x2, p)
    assert torch.equal(got, expected(x1, x2, p))
    real = (s1 * (x1.double() - z1) + s2 * (x2.double() - z2)) / so + zo
    ideal = real.round().clamp(p["activation_min"], p["activation_max"])
    assert (got.double() - ideal).abs().max() <= 1


@settings(max_examples=30, deadline=None)
@given(quantized_cases())
def test_add_single_rounding(case: tuple) -> None:
    x1, x2, p, _ = case
    with use_rounding(Rounding.SINGLE):
        got = run(x1, x2, p)
    assert torch.equal(got, expected(x1, x2, p, single=True))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-128, 127), st.integers(-128, 127)), min_size=1, max_size=30),
    st.integers(2**30, 2**31 - 1),
    st.integers(-31, 0),
    st.integers(2**30, 2**31 - 1),
    st.integers(-31, 0),
    st.integers(2**30, 2**31 - 1),
    st.integers(-31, 2),
    st.integers(0, 20),
)
def test_add_raw_arguments(
    pairs: list[tuple[int, int]],
    m1: int,
    sh1: int,
    m2: int,
    sh2: int,
    mo: int,
    sho: int,
    left_shift: int,
) -> None:
    x1 = torch.tensor([a for a, _ in pairs], dtype=torch.int8)
    x2 = torch.tensor([b for _, b in pairs], dtype=torch.int8)
    values = [7, m1, sh1, -3, m2, sh2, left_shift, 5, mo, sho]
    p = dict(zip(NAMES, values, strict=True), activation_min=-128, activation_max=127)
    assert torch.equal(run(x1, x2, p), expected(x1, x2, p))


def test_add_parameters_equal_scales() -> None:
    """Equal input scales, output scale twice that: hand-computed TFLite Micro values."""
    p = add_parameters(0.05, 0.05, 0.1, input1_zero_point=-128, output_zero_point=3)
    assert p == {
        "input1_offset": 128,
        "input1_multiplier": 2**30,  # 0.5
        "input1_shift": 0,
        "input2_offset": 0,
        "input2_multiplier": 2**30,
        "input2_shift": 0,
        "left_shift": 20,
        "output_offset": 3,
        "output_multiplier": 2**30,  # 0.1 / (2^20 * 0.1) = 2^-20 = 0.5 * 2^-19
        "output_shift": -19,
    }


@settings(max_examples=100, deadline=None)
@given(scales, scales, scales)
def test_add_parameters_formula(s1: float, s2: float, so: float) -> None:
    p = add_parameters(s1, s2, so)
    twice = 2 * max(s1, s2)
    assert (p["input1_multiplier"], p["input1_shift"]) == ref_quantize_multiplier(s1 / twice)
    assert (p["input2_multiplier"], p["input2_shift"]) == ref_quantize_multiplier(s2 / twice)
    out = ref_quantize_multiplier(twice / (2**20 * so))
    assert (p["output_multiplier"], p["output_shift"]) == out
    assert p["input1_shift"] <= 0 and p["input2_shift"] <= 0  # right shifts are negative
    assert p["left_shift"] == 20


def test_add_saturates_to_activation_range() -> None:
    p = add_parameters(1.0, 1.0, 0.01)
    p.update(activation_min=-50, activation_max=60)
    x = torch.tensor([127, -128, 0], dtype=torch.int8)
    assert run(x, x, p).tolist() == [60, -50, 0]


def test_add_functional_out_fake_and_shape_check() -> None:
    p = add_parameters(0.1, 0.2, 0.3, input2_zero_point=10)
    args = [p[name] for name in NAMES] + [-128, 127]
    x1 = torch.randint(-128, 128, (1, 4, 4, 3), dtype=torch.int8)
    x2 = torch.randint(-128, 128, (1, 4, 4, 3), dtype=torch.int8)
    out = OP(x1, x2, *args)
    assert torch.equal(out, run(x1, x2, dict(p, activation_min=-128, activation_max=127)))
    buffer = torch.empty_like(out)
    assert torch.ops.cortex_m_nn.add.out(x1, x2, *args, out=buffer) is buffer
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = OP(torch.empty(2, 3, dtype=torch.int8), torch.empty(2, 3, dtype=torch.int8), *args)
    assert fake.shape == (2, 3) and fake.dtype == torch.int8
    with pytest.raises(ValueError, match="do not broadcast"):
        add(x1, x2[..., :2], *args)
    with FakeTensorMode():
        fake = OP(torch.empty(4, 1, dtype=torch.int8), torch.empty(1, 3, dtype=torch.int8), *args)
    assert fake.shape == (4, 3)
