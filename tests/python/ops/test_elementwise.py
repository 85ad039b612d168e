"""``cortex_m_nn::add`` (add, and sub through ``sub_parameters``) and ``cortex_m_nn::mul``
against Python-int transcriptions of arm_elementwise_add_s8 and arm_elementwise_mul_s8, the
real result and (sub) TFLite's SUB: one table, a row per operator and rounding."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.ops.add import LEFT_SHIFT_INT16, add, add_parameters, sub_parameters
from cortex_m_nn.ops.mul import MAX_OUTPUT_SHIFT, mul, mul_parameters

from .independent import broadcast_pairs, ref_requantize, wrap32
from .test_broadcast import shape_pairs

ADD_NAMES = [
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
MUL_NAMES = ["input1_offset", "input2_offset", "output_offset", "output_multiplier", "output_shift"]


def _clamp(value: int, p: dict) -> int:
    return min(max(value, p["activation_min"]), p["activation_max"])


def c_loop(
    x1: torch.Tensor, x2: torch.Tensor, p: dict, element: Callable[[int, int], int]
) -> torch.Tensor:
    """A scalar C loop over element pairs broadcast independently; output offset, clamp."""
    pairs, shape = broadcast_pairs(x1, x2)
    out = [_clamp(element(a, b) + p["output_offset"], p) for a, b in pairs]
    return torch.tensor(out, dtype=x1.dtype).reshape(shape)


def c_add_loop(x1: torch.Tensor, x2: torch.Tensor, p: dict, single: bool) -> torch.Tensor:
    """arm_elementwise_add_s8's scalar loop."""

    def element(a: int, b: int) -> int:
        a = wrap32((a + p["input1_offset"]) << p["left_shift"])
        b = wrap32((b + p["input2_offset"]) << p["left_shift"])
        a = ref_requantize(a, p["input1_multiplier"], p["input1_shift"], single)
        b = ref_requantize(b, p["input2_multiplier"], p["input2_shift"], single)
        return ref_requantize(wrap32(a + b), p["output_multiplier"], p["output_shift"], single)

    return c_loop(x1, x2, p, element)


def c_mul_loop(x1: torch.Tensor, x2: torch.Tensor, p: dict, single: bool) -> torch.Tensor:
    """arm_elementwise_mul_s8's scalar loop."""

    def element(a: int, b: int) -> int:
        product = (a + p["input1_offset"]) * (b + p["input2_offset"])
        return ref_requantize(product, p["output_multiplier"], p["output_shift"], single)

    return c_loop(x1, x2, p, element)


def tflite_sub(x1: torch.Tensor, x2: torch.Tensor, p: dict, single: bool) -> torch.Tensor:
    """TFLite's reference SUB: rescale both inputs with positive multipliers, then subtract."""

    def element(a: int, b: int) -> int:
        a = wrap32((a + p["input1_offset"]) << 20)
        b = wrap32((b + p["input2_offset"]) << 20)
        a = ref_requantize(a, p["input1_multiplier"], p["input1_shift"], single)
        b = ref_requantize(b, -p["input2_multiplier"], p["input2_shift"], single)
        return ref_requantize(wrap32(a - b), p["output_multiplier"], p["output_shift"], single)

    return c_loop(x1, x2, p, element)


def ref_quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier, written out for real > 2^-32."""
    mantissa, exponent = math.frexp(real)
    fixed = math.floor(mantissa * 2**31 + 0.5)
    if fixed == 2**31:
        return 2**30, exponent + 1
    return fixed, exponent


Real = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Binary:
    """One operator of the family: how it is parametrised, run and computed independently."""

    name: str
    #: the cortex_m_nn operator it runs on (sub is add with input 2's multiplier negated)
    kernel: str
    parameters: Callable[..., dict]
    names: list[str]
    c_loop: Callable[[torch.Tensor, torch.Tensor, dict, bool], torch.Tensor]
    #: the real result from (s1, a, s2, b), a and b already minus their zero points
    real: Callable[[float, torch.Tensor, float, torch.Tensor], torch.Tensor]
    output_scales: st.SearchStrategy[float]
    #: further references the result must be within 1 LSB of
    within_one: tuple[Callable[..., torch.Tensor], ...] = ()
    #: the activations' dtype (int16: the s16 kernels' case, zero points 0)
    dtype: torch.dtype = torch.int8
    #: the input scales drawn
    input_scales: st.SearchStrategy[float] = st.floats(1e-3, 1.0)

    @property
    def reference(self) -> Callable[..., torch.Tensor]:
        return add if self.kernel == "add" else mul

    @property
    def op(self) -> torch._ops.OpOverloadPacket:
        return getattr(torch.ops.cortex_m_nn, self.kernel)

    def run(
        self, x1: torch.Tensor, x2: torch.Tensor, p: dict, rounding: Rounding = Rounding.DOUBLE
    ) -> torch.Tensor:
        args = (p[name] for name in self.names)
        limits = p["activation_min"], p["activation_max"]
        return self.reference(x1, x2, *args, *limits, rounding=rounding)


scales = st.floats(1e-3, 1.0)
zero_points = st.integers(-128, 127)

ADD = Binary(
    "add", "add", add_parameters, ADD_NAMES, c_add_loop, lambda s1, a, s2, b: s1 * a + s2 * b,
    scales,
)  # fmt: skip
SUB = Binary(
    "sub", "add", sub_parameters, ADD_NAMES, c_add_loop, lambda s1, a, s2, b: s1 * a - s2 * b,
    scales, within_one=(tflite_sub,),
)  # fmt: skip
MUL = Binary(
    "mul", "mul", mul_parameters, MUL_NAMES, c_mul_loop, lambda s1, a, s2, b: s1 * a * (s2 * b),
    st.floats(2e-3, 1.0),
)  # fmt: skip

# The int16 cases (arm_elementwise_add_s16, arm_elementwise_mul_s16): int16 scales, left shift
# 15, products up to 2^30 and an output coarse enough to keep them in int32.
scales16 = st.floats(1e-5, 1e-2)
ADD16 = Binary(
    "add", "add", lambda *s, **z: add_parameters(*s, left_shift=LEFT_SHIFT_INT16, **z), ADD_NAMES,
    c_add_loop, lambda s1, a, s2, b: s1 * a + s2 * b, scales16, (), torch.int16, scales16,
)  # fmt: skip
SUB16 = Binary(
    "sub", "add", lambda *s, **z: sub_parameters(*s, left_shift=LEFT_SHIFT_INT16, **z), ADD_NAMES,
    c_add_loop, lambda s1, a, s2, b: s1 * a - s2 * b, scales16, (), torch.int16, scales16,
)  # fmt: skip
MUL16 = Binary(
    "mul", "mul", lambda *s, **z: mul_parameters(*s, largest_product=2**30, **z), MUL_NAMES,
    c_mul_loop, lambda s1, a, s2, b: s1 * a * (s2 * b), st.floats(4e-10, 1e-4), (), torch.int16,
    scales16,
)  # fmt: skip


@st.composite
def quantized_cases(draw: st.DrawFn, binary: Binary) -> tuple:
    s1, s2 = draw(binary.input_scales), draw(binary.input_scales)
    so = draw(binary.output_scales)
    if binary.dtype is torch.int16 and binary.kernel == "mul":
        assume(s1 * s2 / so <= 0.25)  # the largest product stays in int32 (mul_parameters)
    low, high = torch.iinfo(binary.dtype).min, torch.iinfo(binary.dtype).max
    int8 = binary.dtype is torch.int8
    z1, z2, zo = (draw(zero_points) if int8 else 0 for _ in range(3))
    params = binary.parameters(
        s1, s2, so, input1_zero_point=z1, input2_zero_point=z2, output_zero_point=zo
    )
    act_min = draw(st.integers(low, 0))
    params.update(activation_min=act_min, activation_max=draw(st.integers(act_min, high)))
    shape1, shape2 = draw(shape_pairs())  # same shapes and broadcasting ones
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    x1, x2 = (
        torch.randint(low, high + 1, s, generator=gen, dtype=torch.int32).to(binary.dtype)
        for s in (shape1, shape2)
    )
    return x1, x2, params, (s1, z1, s2, z2, so, zo)


DOUBLE, SINGLE, EITHER = st.just(False), st.just(True), st.booleans()


@dataclass(frozen=True)
class Row:
    """Random quantized cases of one operator: under which rounding, how many, and whether
    the result is also compared with the real one (and ``within_one``)."""

    binary: Binary
    single: st.SearchStrategy[bool]
    examples: int
    against_real: bool = True
    id: str = field(default="", compare=False)


QUANTIZED = [
    Row(ADD, DOUBLE, 60, id="add-double"),
    Row(ADD, SINGLE, 30, against_real=False, id="add-single"),
    Row(SUB, EITHER, 80, id="sub-either"),
    Row(MUL, DOUBLE, 80, id="mul-double"),
    Row(MUL, SINGLE, 40, against_real=False, id="mul-single"),
    Row(ADD16, EITHER, 60, id="add-int16"),
    Row(SUB16, EITHER, 40, id="sub-int16"),
    Row(MUL16, EITHER, 60, id="mul-int16"),
]


@pytest.mark.parametrize("row", QUANTIZED, ids=lambda row: row.id)
def test_matches_c_loop_and_real_result(row: Row) -> None:
    binary = row.binary

    @settings(max_examples=row.examples, deadline=None)
    @given(quantized_cases(binary), row.single)
    def check(case: tuple, single: bool) -> None:
        x1, x2, p, (s1, z1, s2, z2, so, zo) = case
        got = binary.run(x1, x2, p, Rounding.SINGLE if single else Rounding.DOUBLE)
        assert torch.equal(got, binary.c_loop(x1, x2, p, single))
        if row.against_real:
            real = binary.real(s1, x1.double() - z1, s2, x2.double() - z2) / so + zo
            ideal = real.round().clamp(p["activation_min"], p["activation_max"])
            assert (got.double() - ideal).abs().max() <= 1
            for other in binary.within_one:
                assert (got.double() - other(x1, x2, p, single).double()).abs().max() <= 1

    check()


multipliers = st.integers(2**30, 2**31 - 1)
RAW = {
    # offsets 7, -3, 5; both inputs' multipliers and shifts; left shift; the output's
    "add": (
        st.tuples(
            st.just(7), multipliers, st.integers(-31, 0), st.just(-3), multipliers,
            st.integers(-31, 0), st.integers(0, 20), st.just(5), multipliers, st.integers(-31, 2),
        ),
        ADD, DOUBLE, 40,
    ),
    # the three offsets, the output multiplier and shift
    "mul": (
        st.tuples(
            st.integers(-127, 128), st.integers(-127, 128), st.integers(-128, 127), multipliers,
            st.integers(-31, MAX_OUTPUT_SHIFT),
        ),
        MUL, EITHER, 60,
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(RAW))
def test_raw_arguments(name: str) -> None:
    values, binary, rounding, examples = RAW[name]
    pairs = st.lists(
        st.tuples(st.integers(-128, 127), st.integers(-128, 127)), min_size=1, max_size=30
    )

    @settings(max_examples=examples, deadline=None)
    @given(pairs, values, rounding)
    def check(pairs: list[tuple[int, int]], values: tuple[int, ...], single: bool) -> None:
        x1 = torch.tensor([a for a, _ in pairs], dtype=torch.int8)
        x2 = torch.tensor([b for _, b in pairs], dtype=torch.int8)
        p = dict(zip(binary.names, values, strict=True), activation_min=-128, activation_max=127)
        got = binary.run(x1, x2, p, Rounding.SINGLE if single else Rounding.DOUBLE)
        assert torch.equal(got, binary.c_loop(x1, x2, p, single))

    check()


#: (operator, scales, activation range, x1, x2, expected: worked out by hand)
SATURATION = [
    (ADD, (1.0, 1.0, 0.01), (-50, 60), [127, -128, 0], [127, -128, 0], [60, -50, 0]),
    (SUB, (1.0, 1.0, 0.01), (-50, 60), [127, -128, 0], [-128, 127, 0], [60, -50, 0]),
    (MUL, (1.0, 1.0, 1.0), (-3, 100), [127, -128, 2, 0], [127, 1, -2, 5], [100, -3, -3, 0]),
]


@pytest.mark.parametrize("case", SATURATION, ids=lambda case: case[0].name)
def test_saturates_to_activation_range(case: tuple) -> None:
    binary, scales_, (low, high), x1, x2, want = case
    p = binary.parameters(*scales_)
    p.update(activation_min=low, activation_max=high)
    x1, x2 = torch.tensor(x1, dtype=torch.int8), torch.tensor(x2, dtype=torch.int8)
    assert binary.run(x1, x2, p).tolist() == want


#: (operator, scales, shapes of x1, x2, of a broadcast pair and its output)
FUNCTIONAL = [
    (ADD, (0.1, 0.2, 0.3), (1, 4, 4, 3), (1, 4, 4, 3), ((2, 3), (2, 3)), ((4, 1), (1, 3))),
    (MUL, (0.1, 0.2, 0.05), (12, 3), (1, 3), ((2, 1), (1, 3)), ((4, 1), (1, 3))),
]


@pytest.mark.parametrize("case", FUNCTIONAL, ids=lambda case: case[0].name)
def test_functional_out_fake_and_shape_check(case: tuple) -> None:
    binary, scales_, shape1, shape2, fake1, fake2 = case
    p = binary.parameters(*scales_, input2_zero_point=10)
    args = [p[name] for name in binary.names] + [-128, 127]
    x1 = torch.randint(-128, 128, shape1, dtype=torch.int8)
    x2 = torch.randint(-128, 128, shape2, dtype=torch.int8)
    out = binary.op(x1, x2, *args)
    assert torch.equal(out, binary.run(x1, x2, dict(p, activation_min=-128, activation_max=127)))
    buffer = torch.empty_like(out)
    assert binary.op.out(x1, x2, *args, out=buffer) is buffer
    assert torch.equal(buffer, out)
    for a, b in (fake1, fake2):
        with FakeTensorMode():
            fake = binary.op(
                torch.empty(a, dtype=torch.int8), torch.empty(b, dtype=torch.int8), *args
            )
        assert list(fake.shape) == [max(i, j) for i, j in zip(a, b, strict=True)]
        assert fake.dtype == torch.int8
    with pytest.raises(ValueError, match="do not broadcast"):
        binary.reference(x1, x2[..., :2], *args)


# --- parameters: per operator, hand-computed and by formula ----------------------------------


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
    assert SUB.run(x1, x2, p).tolist() == [7, -128, 127, 0, 127]


@settings(max_examples=300, deadline=None)
@given(st.integers(-255, 255), multipliers, st.integers(-31, 0), st.booleans())
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
