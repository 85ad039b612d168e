"""``cortex_m_nn::softmax`` against a Python-int transcription of arm_nn_softmax_common_s8."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.ops.softmax import (
    softmax,
    softmax_parameters,
    softmax_s16_parameters,
    softmax_s16_tables,
)

from .independent import ref_requantize

OP = torch.ops.cortex_m_nn.softmax
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


# --- gemmlowp fixed point as CMSIS-NN writes it, in Python ints ---------------------------


def wrap32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def mul_sat(a: int, b: int) -> int:
    if a == b == INT32_MIN:
        return INT32_MAX
    nudge = (1 << 30) if (a < 0) == (b < 0) else 1 - (1 << 30)
    return wrap32(c_div(a * b + nudge, 1 << 31))


def div_pow2(dividend: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder, result = dividend & mask, dividend >> exponent
    threshold = (mask >> 1) + (1 if result < 0 else 0)
    return result + 1 if remainder > threshold else result


def mul_pow2(value: int, exponent: int) -> int:
    threshold = (1 << (31 - exponent)) - 1
    if value > threshold:
        return INT32_MAX
    if value < -threshold:
        return INT32_MIN
    return wrap32(value << exponent)


def exp_on_negative(value: int) -> int:
    quarter_mod = (value & ((1 << 24) - 1)) - (1 << 24)
    remainder = quarter_mod - value
    x = wrap32((quarter_mod << 5) + (1 << 28))
    x2 = mul_sat(x, x)
    inner = wrap32(div_pow2(mul_sat(x2, x2), 2) + mul_sat(x2, x))
    inner = wrap32(x + div_pow2(wrap32(mul_sat(inner, 715827883) + x2), 1))
    result = wrap32(1895147668 + mul_sat(1895147668, inner))
    factors = [1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242]
    for bit, factor in zip(range(24, 31), factors, strict=True):
        if remainder & (1 << bit):
            result = mul_sat(result, factor)
    return INT32_MAX if value == 0 else result


def one_over_one_plus_x(value: int) -> int:
    total = value + INT32_MAX
    half_denominator = wrap32(c_div(total + (1 if total >= 0 else -1), 2))
    x = wrap32(1515870810 + mul_sat(half_denominator, -1010580540))
    for _ in range(3):
        x = wrap32(x + mul_pow2(mul_sat(x, wrap32((1 << 29) - mul_sat(half_denominator, x))), 2))
    return mul_pow2(x, 1)


def clz32(value: int) -> int:
    return 32 - (value & 0xFFFFFFFF).bit_length()


def softmax_row(row: list[int], mult: int, shift: int, diff_min: int) -> list[int]:
    top = max(row)
    total = 0
    for v in row:
        diff = v - top
        if diff >= diff_min:
            total += div_pow2(exp_on_negative(mul_sat(wrap32(diff * (1 << shift)), mult)), 12)
    total = wrap32(total)
    headroom = clz32(total)
    scale = one_over_one_plus_x(wrap32((wrap32(total << headroom) if total > 0 else 0) - 2**31))
    bits_over_unit = 12 - headroom + 23
    out = []
    for v in row:
        diff = v - top
        if diff >= diff_min:
            e = exp_on_negative(mul_sat(wrap32(diff * (1 << shift)), mult))
            res = div_pow2(mul_sat(scale, e), bits_over_unit) - 128
            out.append(min(max(res, -128), 127))
        else:
            out.append(-128)
    return out


def expected(x: torch.Tensor, mult: int, shift: int, diff_min: int) -> torch.Tensor:
    rows = x.reshape(-1, x.shape[-1]).tolist()
    out = [softmax_row(r, mult, shift, diff_min) for r in rows]
    return torch.tensor(out, dtype=torch.int8).reshape(x.shape)


# --- tests --------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 3), min_size=0, max_size=2),
    st.integers(1, 40),
    st.floats(0.005, 1.0),
    st.sampled_from([1.0, 0.5, 2.0]),
    st.data(),
)
def test_softmax_matches_independent(
    lead: list[int], n: int, scale: float, beta: float, data: st.DataObject
) -> None:
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31)))
    x = torch.randint(-128, 128, (*lead, n), generator=gen, dtype=torch.int8)
    params = softmax_parameters(scale, beta)
    got = softmax(x, None, None, *params)
    assert torch.equal(got, expected(x, *params))
    ideal = torch.softmax(beta * scale * x.double(), dim=-1) * 256 - 128
    assert (got.double() - ideal.clamp(-128, 127)).abs().max() <= 1


def test_softmax_all_equal_rows() -> None:
    for n in (1, 2, 3, 4, 10, 12, 256):
        x = torch.full((2, n), 37, dtype=torch.int8)
        got = softmax(x, None, None, *softmax_parameters(0.1))
        assert torch.equal(got, expected(x, *softmax_parameters(0.1)))
        assert (got == got[0, 0]).all()
        assert abs(got[0, 0].item() - min(256 / n - 128, 127)) <= 1


def test_softmax_diff_min_cutoff() -> None:
    mult, shift, _ = softmax_parameters(0.1)
    x = torch.tensor([[127, -128, 100, 20]], dtype=torch.int8)
    diff_min = -50  # -128 (diff -255) and 20 (diff -107) are cut off, 100 (diff -27) is kept
    got = softmax(x, None, None, mult, shift, diff_min)
    assert torch.equal(got, expected(x, mult, shift, diff_min))
    assert got[0, 1] == -128 and got[0, 3] == -128
    kept = softmax(torch.tensor([[127, 100]], dtype=torch.int8), None, None, mult, shift, diff_min)
    assert got[0, [0, 2]].tolist() == kept[0].tolist()  # cut entries leave the sum


def test_softmax_single_element_saturates() -> None:
    got = softmax(
        torch.tensor([[-5], [127]], dtype=torch.int8), None, None, *softmax_parameters(0.05)
    )
    assert got.tolist() == [[127], [127]]


def test_softmax_parameters_hand_computed() -> None:
    # 1/16 * 2^26 = 2^22 = 0.5 * 2^23; diff_min = -floor(31 * 2^26 / 2^23) = -248
    assert softmax_parameters(1 / 16) == (2**30, 23, -248)
    # 0.1 * 2^26 = 0.8 * 2^23; round(0.8 * 2^31) = 1717986918
    assert softmax_parameters(0.1) == (1717986918, 23, -248)
    # beta scales like the input scale; 2^-8 * 2^26 = 0.5 * 2^19 → diff_min -floor(31 * 2^7)
    assert softmax_parameters(1 / 512, beta=2.0) == (2**30, 19, -3968)


@settings(max_examples=100, deadline=None)
@given(st.floats(1e-4, 2.0), st.floats(0.1, 4.0))
def test_softmax_parameters_formula(scale: float, beta: float) -> None:
    mult, shift, diff_min = softmax_parameters(scale, beta)
    real = beta * scale * 2**26
    assert 2**30 <= mult < 2**31 and shift >= 0
    assert abs(mult * 2.0 ** (shift - 31) - real) <= 2.0 ** (shift - 31)
    assert diff_min == -math.floor(31 * 2**26 / 2**shift)


def test_softmax_parameters_reject_huge_scale() -> None:
    with pytest.raises(ValueError):  # 16 * 2^26 = 2^30 needs a shift of 31
        softmax_parameters(4.0, beta=4.0)


def test_softmax_ignores_rounding_mode_and_has_out_and_fake() -> None:
    x = torch.randint(-128, 128, (3, 7), dtype=torch.int8)
    params = softmax_parameters(0.08)
    out = OP(x, None, None, *params)
    assert torch.equal(softmax(x, None, None, *params, rounding=Rounding.SINGLE), out)
    buffer = torch.empty_like(out)
    assert torch.ops.cortex_m_nn.softmax.out(x, None, None, *params, out=buffer) is buffer
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = OP(torch.empty((2, 5, 12), dtype=torch.int8), None, None, *params)
    assert fake.shape == (2, 5, 12) and fake.dtype == torch.int8


# --- the int16 case: arm_softmax_s16 ------------------------------------------------------


def int16(value: int) -> int:
    return (value + 2**15) % 2**16 - 2**15


def lookup(table: list[int], value: int) -> int:
    """arm_softmax_s16's interpolated read, C integer types spelled out."""
    index = int16(256 + (value >> 7))
    offset = int16(value & 0x7F)
    base = table[index]
    slope = int16(table[index + 1] - table[index])
    delta = int16((slope * offset + 64) >> 7)
    return int16(base + delta)


def softmax_s16_row(
    row: list[int], mult: int, shift: int, exp: list[int], recip: list[int], single: bool
) -> list[int]:
    """arm_softmax_s16 on one row, transcribed from its C loops in Python ints."""
    top = max(row)
    cached, total = [], 0
    for v in row:
        scaled = ref_requantize(v - top, mult, shift, single)
        symmetric = min(max(scaled + 32767, -32768), 32767)
        cached.append(lookup(exp, symmetric))
        total = wrap32(total + cached[-1])
    headroom = clz32(total)
    shifted = wrap32(wrap32(total << (headroom - 1)) + (1 << 13)) >> 14
    reciprocal = lookup(recip, int16(shifted - 98304))
    right = int16(30 - headroom)
    return [int16(((e * reciprocal) >> right) + 1 >> 1) for e in cached]


def test_s16_tables_are_tflite_micros() -> None:
    """The entries a host build of TFLite Micro's LUTPopulateInt16<float> gives
    (docs/int16.md, section 3), at both ends and the middle."""
    exp, recip = softmax_s16_tables()
    assert exp.dtype == recip.dtype == torch.int16 and exp.shape == recip.shape == (513,)
    assert [exp[i].item() for i in (0, 256, 511, 512)] == [2, 221, 32133, 32767]
    assert [recip[i].item() for i in (0, 256, 511, 512)] == [32767, 21845, 16400, 16384]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(1, 3), min_size=0, max_size=2),
    st.integers(2, 64),
    st.floats(1e-4, 2e-3),
    st.booleans(),
    st.data(),
)
def test_s16_matches_independent(
    lead: list[int], n: int, scale: float, single: bool, data: st.DataObject
) -> None:
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31)))
    x = torch.randint(-32768, 32768, (*lead, n), generator=gen, dtype=torch.int32).to(torch.int16)
    mult, shift = softmax_s16_parameters(scale)
    exp, recip = softmax_s16_tables()
    rounding = Rounding.SINGLE if single else Rounding.DOUBLE
    got = softmax(x, exp, recip, mult, shift, 0, rounding=rounding)
    tables = exp.tolist(), recip.tolist()
    rows = [softmax_s16_row(r, mult, shift, *tables, single) for r in x.reshape(-1, n).tolist()]
    assert got.dtype == torch.int16 and got.reshape(-1, n).tolist() == rows
    ideal = torch.softmax(scale * x.double(), dim=-1) * 32768
    # within the bound the lowering lets verify allow (rules/softmax.py): 4 LSB per entry of
    # the row (each exp within 2 of exact, the table's floor of 2 at exp(-10) included) and 4
    assert (got.double() - ideal).abs().max() <= 4 * n + 4


def test_s16_refuses_rows_of_one_and_missing_tables() -> None:
    exp, recip = softmax_s16_tables()
    mult, shift = softmax_s16_parameters(1e-3)
    with pytest.raises(ValueError, match="one entry"):
        softmax(torch.zeros((2, 1), dtype=torch.int16), exp, recip, mult, shift, 0)
    with pytest.raises(ValueError, match="tables"):
        softmax(torch.zeros((2, 3), dtype=torch.int16), None, None, mult, shift, 0)
    with pytest.raises(ValueError, match="no tables"):
        softmax(torch.zeros((2, 3), dtype=torch.int8), exp, recip, mult, shift, 0)
