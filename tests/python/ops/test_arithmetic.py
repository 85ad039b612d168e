"""CMSIS-NN integer primitives against literal Python-int transcriptions of the C code."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cortex_m_nn.ops import arithmetic as ar
from cortex_m_nn.ops.library import SCHEMAS

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
int32s = st.integers(INT32_MIN, INT32_MAX)
multipliers = st.integers(2**30, INT32_MAX)


# --- independent Python-int versions, written from the C sources -----------------------


def wrap32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def c_div(a: int, b: int) -> int:
    """C's truncating integer division."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def ref_dhm(a: int, b: int) -> int:
    nudge = 1 << 30
    if (a < 0) != (b < 0):
        nudge = 1 - nudge
    result = wrap32(c_div(a * b + nudge, 1 << 31))
    return INT32_MAX if a == b == INT32_MIN else result


def ref_dhm_no_sat(a: int, b: int) -> int:
    return wrap32((a * b + (1 << 30)) >> 31)


def ref_div_pow2(dividend: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder = dividend & mask
    result = dividend >> exponent
    threshold = (mask >> 1) + (1 if result < 0 else 0)
    return result + 1 if remainder > threshold else result


def ref_requantize(val: int, mult: int, shift: int, single: bool = False) -> int:
    if single:
        result = (val * mult) >> (31 - shift - 1)
        return wrap32((result + 1) >> 1)
    shifted = wrap32(val * (1 << max(shift, 0)))
    return ref_div_pow2(ref_dhm_no_sat(shifted, mult), max(-shift, 0))


def round_half_away(x: Fraction) -> int:
    magnitude = math.floor(abs(x) + Fraction(1, 2))
    return magnitude if x >= 0 else -magnitude


def t(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


# --- doubling high multiply ---------------------------------------------------------------


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(int32s, int32s), min_size=1, max_size=20))
def test_doubling_high_mult_matches_c(pairs: list[tuple[int, int]]) -> None:
    a, b = t([p[0] for p in pairs]), t([p[1] for p in pairs])
    assert ar.doubling_high_mult(a, b).tolist() == [ref_dhm(x, y) for x, y in pairs]
    assert ar.doubling_high_mult_no_sat(a, b).tolist() == [ref_dhm_no_sat(x, y) for x, y in pairs]


def test_doubling_high_mult_saturates_int32_min_squared() -> None:
    assert ar.doubling_high_mult(INT32_MIN, INT32_MIN).item() == INT32_MAX
    assert ar.doubling_high_mult_no_sat(INT32_MIN, INT32_MIN).item() == INT32_MIN
    assert ar.doubling_high_mult(INT32_MIN, INT32_MAX).item() == -INT32_MAX


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(1, 2**30, 1), (-1, 2**30, 0), (3, 2**30, 2), (-3, 2**30, -1), (-5, 2**30, -2)],
)
def test_doubling_high_mult_rounds_halves_up(a: int, b: int, expected: int) -> None:
    assert ar.doubling_high_mult(a, b).item() == expected


# --- rounding divide by power of two -----------------------------------------------------


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(int32s, st.integers(0, 31)), min_size=1, max_size=20))
def test_divide_by_power_of_two(pairs: list[tuple[int, int]]) -> None:
    d, e = t([p[0] for p in pairs]), t([p[1] for p in pairs])
    got = ar.divide_by_power_of_two(d, e).tolist()
    assert got == [ref_div_pow2(x, y) for x, y in pairs]
    assert got == [round_half_away(Fraction(x, 2**y)) for x, y in pairs]


@pytest.mark.parametrize(
    ("dividend", "exponent", "expected"),
    [(5, 1, 3), (-5, 1, -3), (3, 1, 2), (-3, 1, -2), (-6, 2, -2), (6, 2, 2), (-7, 0, -7)],
)
def test_divide_by_power_of_two_halves_away_from_zero(
    dividend: int, exponent: int, expected: int
) -> None:
    assert ar.divide_by_power_of_two(dividend, exponent).item() == expected


# --- requantize ---------------------------------------------------------------------------


@settings(max_examples=120, deadline=None)
@given(
    st.lists(int32s, min_size=1, max_size=16),
    st.lists(st.tuples(multipliers, st.integers(-31, 30)), min_size=1, max_size=16),
    st.sampled_from(list(ar.Rounding)),
)
def test_requantize_matches_c(
    values: list[int], params: list[tuple[int, int]], rounding: ar.Rounding
) -> None:
    n = min(len(values), len(params))
    values, params = values[:n], params[:n]
    got = ar.requantize(t(values), t([p[0] for p in params]), t([p[1] for p in params]), rounding)
    single = rounding is ar.Rounding.SINGLE
    assert got.tolist() == [
        ref_requantize(v, m, s, single) for v, (m, s) in zip(values, params, strict=True)
    ]


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**24), 2**24), multipliers, st.integers(-31, 0))
def test_requantize_math(val: int, mult: int, shift: int) -> None:
    """Without overflow, SINGLE rounds the exact product once (halves up); DOUBLE twice."""
    exact = Fraction(val * mult, 2 ** (31 - shift))
    single = ar.requantize(val, mult, shift, ar.Rounding.SINGLE).item()
    assert single == math.floor(exact + Fraction(1, 2))
    first = math.floor(Fraction(val * mult, 2**31) + Fraction(1, 2))
    double = ar.requantize(val, mult, shift, ar.Rounding.DOUBLE).item()
    assert double == round_half_away(Fraction(first, 2**-shift))


@pytest.mark.parametrize(
    ("val", "mult", "shift", "double", "single"),
    [
        (1, 2**30, -1, 1, 0),  # 0.25: DOUBLE rounds 0.5 up to 1 first, then 0.5 away to 1
        (-2, 2**30, -1, -1, 0),  # -0.5: DOUBLE rounds away from zero, SINGLE rounds up
        (2**20, 2**30, 12, 0, INT32_MIN),  # DOUBLE's left shift wraps in int32
        (100, 2**30, 3, 400, 400),
    ],
)
def test_rounding_modes_differ(val: int, mult: int, shift: int, double: int, single: int) -> None:
    assert ar.requantize(val, mult, shift).item() == double  # DOUBLE is the default
    assert ar.requantize(val, mult, shift, ar.Rounding.SINGLE).item() == single
    assert ref_requantize(val, mult, shift) == double
    assert ref_requantize(val, mult, shift, single=True) == single


def test_requantize_broadcasts_per_channel() -> None:
    acc = t([[1000, 1000], [-1000, -1000]])
    got = ar.requantize(acc, t([2**30, 2**30]), t([-1, -2]))
    assert got.tolist() == [[250, 125], [-250, -125]]


# --- quantize_multiplier ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("real", "expected"),
    [
        (0.0, (0, 0)),
        (0.5, (2**30, 0)),
        (1.0, (2**30, 1)),
        (0.25, (2**30, -1)),
        (0.75, (3 * 2**29, 0)),
        (1.0 - 2.0**-40, (2**30, 1)),  # mantissa rounds up to 2^31
        (0.5 + 2.0**-32, (2**30 + 1, 0)),  # exact half: away from zero, not to even
        (2.0**-32, (2**30, -31)),
        (2.0**-33, (0, 0)),  # would be shifted out entirely
        (2.0**29, (2**30, 30)),
    ],
)
def test_quantize_multiplier_edges(real: float, expected: tuple[int, int]) -> None:
    assert ar.quantize_multiplier(real) == expected


@pytest.mark.parametrize("real", [-0.5, math.inf, math.nan, 2.0**30])
def test_quantize_multiplier_rejects(real: float) -> None:
    with pytest.raises(ValueError):
        ar.quantize_multiplier(real)


@settings(max_examples=120, deadline=None)
@given(st.floats(2.0**-31, 2.0**29, allow_nan=False, allow_infinity=False))
def test_quantize_multiplier_is_nearest(real: float) -> None:
    mult, shift = ar.quantize_multiplier(real)
    assert 2**30 <= mult < 2**31
    exact = Fraction(real) * 2 ** (31 - shift)
    assert abs(exact - mult) <= Fraction(1, 2)


def test_per_channel_parameters() -> None:
    mults, shifts = ar.per_channel_parameters(0.5, torch.tensor([0.25, 0.0, 0.75]), 0.125)
    assert mults.dtype == shifts.dtype == torch.int32
    assert mults.tolist() == [2**30, 0, 3 * 2**29]
    assert shifts.tolist() == [1, 0, 2]


# --- softmax helpers ----------------------------------------------------------------------


def test_count_leading_zeros() -> None:
    values = [0, 1, 2, 3, 2**19, 2**31 - 1, -1, INT32_MIN]
    assert ar.count_leading_zeros(t(values)).tolist() == [32, 31, 30, 30, 12, 1, 0, 0]


@settings(max_examples=200, deadline=None)
@given(st.lists(int32s, min_size=1, max_size=10), st.integers(0, 30))
def test_multiply_by_power_of_two_saturates(values: list[int], exponent: int) -> None:
    got = ar.multiply_by_power_of_two(t(values), exponent).tolist()
    assert got == [max(INT32_MIN, min(INT32_MAX, v * 2**exponent)) for v in values]


@settings(max_examples=200, deadline=None)
@given(st.integers(INT32_MIN, 0))
def test_exp_on_negative_values_accuracy(value: int) -> None:
    got = ar.exp_on_negative_values(value).item()
    assert abs(got / 2**31 - math.exp(value / 2**26)) < 3e-7


@settings(max_examples=200, deadline=None)
@given(st.integers(0, INT32_MAX))
def test_one_over_one_plus_x_accuracy(value: int) -> None:
    got = ar.one_over_one_plus_x(value).item()
    assert abs(got / 2**31 - 1 / (1 + value / 2**31)) < 1e-8


def test_all_operators_registered() -> None:
    import cortex_m_nn.ops  # noqa: F401

    expected = {"quantize", "dequantize", "conv2d", "depthwise_conv2d", "linear", "add"}
    assert expected | {"avg_pool2d", "softmax"} <= set(SCHEMAS)
