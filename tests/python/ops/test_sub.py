"""Subtraction: ``cortex_m_nn::add`` with ``sub_parameters`` (input 2's multiplier negated),
against Python ints: the C loop of arm_elementwise_add_s8 with that argument, the real
difference, and TFLite's SUB (negation after rescaling)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.add import add, add_parameters, sub_parameters
from cortex_m_nn.ops.arithmetic import Rounding, use_rounding

from .independent import broadcast_pairs, ref_requantize, wrap32
from .test_broadcast import shape_pairs

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


def c_add_loop(x1: torch.Tensor, x2: torch.Tensor, p: dict, single: bool) -> torch.Tensor:
    """arm_elementwise_add_s8's scalar loop, element pairs broadcast independently."""
    pairs, shape = broadcast_pairs(x1, x2)
    out = []
    for a, b in pairs:
        a = ref_requantize(
            wrap32((a + p["input1_offset"]) << p["left_shift"]),
            p["input1_multiplier"],
            p["input1_shift"],
            single,
        )
        b = ref_requantize(
            wrap32((b + p["input2_offset"]) << p["left_shift"]),
            p["input2_multiplier"],
            p["input2_shift"],
            single,
        )
        s = ref_requantize(wrap32(a + b), p["output_multiplier"], p["output_shift"], single)
        out.append(min(max(s + p["output_offset"], p["activation_min"]), p["activation_max"]))
    return torch.tensor(out, dtype=torch.int8).reshape(shape)


def tflite_sub(x1: torch.Tensor, x2: torch.Tensor, p: dict, single: bool) -> torch.Tensor:
    """TFLite's reference SUB: rescale both inputs with positive multipliers, then subtract."""
    pairs, shape = broadcast_pairs(x1, x2)
    positive = dict(p, input2_multiplier=-p["input2_multiplier"])
    out = []
    for a, b in pairs:
        a = ref_requantize(
            wrap32((a + p["input1_offset"]) << 20),
            p["input1_multiplier"],
            p["input1_shift"],
            single,
        )
        b = ref_requantize(
            wrap32((b + p["input2_offset"]) << 20),
            positive["input2_multiplier"],
            p["input2_shift"],
            single,
        )
        s = ref_requantize(wrap32(a - b), p["output_multiplier"], p["output_shift"], single)
        out.append(min(max(s + p["output_offset"], p["activation_min"]), p["activation_max"]))
    return torch.tensor(out, dtype=torch.int8).reshape(shape)


def run(x1: torch.Tensor, x2: torch.Tensor, p: dict) -> torch.Tensor:
    return add(x1, x2, *(p[name] for name in NAMES), p["activation_min"], p["activation_max"])


scales = st.floats(1e-3, 1.0)
zero_points = st.integers(-128, 127)


@st.composite
def quantized_cases(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, dict, tuple]:
    s1, s2, so = draw(scales), draw(scales), draw(scales)
    z1, z2, zo = draw(zero_points), draw(zero_points), draw(zero_points)
    params = sub_parameters(
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
@given(quantized_cases(), st.booleans())
def test_sub_matches_c_loop_real_difference_and_tflite(case: tuple, single: bool) -> None:
    x1, x2, p, (s1, z1, s2, z2, so, zo) = case
    with use_rounding(Rounding.SINGLE if single else Rounding.DOUBLE):
        got = run(x1, x2, p)
    assert torch.equal(got, c_add_loop(x1, x2, p, single))
    real = (s1 * (x1.double() - z1) - s2 * (x2.double() - z2)) / so + zo
    ideal = real.round().clamp(p["activation_min"], p["activation_max"])
    assert (got.double() - ideal).abs().max() <= 1
    assert (got.double() - tflite_sub(x1, x2, p, single).double()).abs().max() <= 1


def test_sub_parameters_negate_only_input2_multiplier() -> None:
    kwargs = dict(input1_zero_point=3, input2_zero_point=-9, output_zero_point=11)
    added, subtracted = (
        add_parameters(0.2, 0.07, 0.1, **kwargs),
        sub_parameters(0.2, 0.07, 0.1, **kwargs),
    )
    assert subtracted["input2_multiplier"] == -added["input2_multiplier"] < 0
    del added["input2_multiplier"], subtracted["input2_multiplier"]
    assert added == subtracted


def test_sub_hand_computed() -> None:
    """Equal scales 0.5, output scale 0.5: y = x1 - x2 exactly (no ties possible here)."""
    p = sub_parameters(0.5, 0.5, 0.5)
    p.update(activation_min=-128, activation_max=127)
    x1 = torch.tensor([10, -128, 127, 0, 100], dtype=torch.int8)
    x2 = torch.tensor([3, 1, -1, 0, -100], dtype=torch.int8)
    assert run(x1, x2, p).tolist() == [7, -128, 127, 0, 127]


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-255, 255),
    st.integers(2**30, 2**31 - 1),
    st.integers(-31, 0),
    st.booleans(),
)
def test_negated_multiplier_differs_only_at_rounding_ties(
    value: int, multiplier: int, shift: int, single: bool
) -> None:
    """requantize(v, -m) is -requantize(v, m), or one above it when v·m is an exact half."""
    v = value << 20
    negated = ref_requantize(v, -multiplier, shift, single)
    positive = ref_requantize(v, multiplier, shift, single)
    assert negated - (-positive) in (0, 1)
    half = 1 << (30 - shift if single else 30)
    if (v * multiplier) % (2 * half) != half:
        assert negated == -positive


def test_a_tie_rounds_up_with_the_negated_multiplier() -> None:
    v, m = 1 << 20, 2**30 + 2**10  # v·m = 2^50 + 2^30: an exact half before the >> 31
    assert (v * m) % 2**31 == 2**30
    assert ref_requantize(v, m, 0) == 2**19 + 1
    assert ref_requantize(v, -m, 0) == -(2**19)  # not -(2^19 + 1)
    assert ref_requantize(v, -m, 0, single=True) == -(2**19)
