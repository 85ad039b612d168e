"""``cortex_m_nn::softmax``: int8 softmax over the last dimension (``arm_softmax_s8``).

Output scale is 1/256 and zero point -128. ``multiplier``/``shift`` scale the differences
``x - max(row)`` to Q5.26 (``shift`` is a left shift, >= 0); entries with a difference below
``diff_min`` output -128 and are left out of the sum. Per row (fixed point as in CMSIS-NN)::

    e    = exp_on_negative_values(doubling_high_mult(diff << shift, multiplier))
    sum  = Σ divide_by_power_of_two(e, 12)
    h    = clz(sum)
    r    = one_over_one_plus_x((sum << h) - 2^31)
    out  = clamp(divide_by_power_of_two(doubling_high_mult(r, e), 35 - h) - 128, -128, 127)

The rounding mode does not matter here: softmax never calls ``arm_nn_requantize``.
The C code shifts by ``35 - h`` in 32 bits, which is undefined once the sum reaches 2^28
(rows of 512+ near-maximal entries); there this reference keeps the exact arithmetic.

int16 is the other case (``arm_softmax_s16``; int16 input of zero point 0, output scale
1/32768 and zero point 0), with two 513-entry int16 tables made at compile time
(:func:`softmax_s16_tables`, as TFLite Micro fills them): ``exp_table`` holds exp(x) on
[-10, 0], ``reciprocal_table`` 1/(1 + x) on [0, 1], both Q0.15 and read with linear
interpolation. ``multiplier``/``shift`` scale ``x - max(row)`` (``arm_nn_requantize``, with
the kernels' rounding) onto the exp table's input; ``diff_min`` is 0 (unused). Per row::

    s      = clamp(requantize(x - max, multiplier, shift) + 32767, -32768, 32767)
    e      = lookup(exp_table, s)                     (int16; the row's e cached, summed)
    h      = clz(sum e)
    r      = lookup(reciprocal_table, int16(((sum << (h - 1)) + 2^13 >> 14) - 98304))
    out    = int16(((e * r) >> (30 - h)) + 1 >> 1)
    lookup(t, v) = int16(t[256 + (v >> 7)] + ((int16(t[i + 1] - t[i]) * (v & 127) + 64) >> 7))

The last cast wraps where CMSIS-NN does not clamp: a row of one entry gives -32768
(``docs/int16.md``, defect 1), so rows of one are refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from cortex_m_nn.ops.arithmetic import (
    Rounding,
    count_leading_zeros,
    divide_by_power_of_two,
    doubling_high_mult,
    exp_on_negative_values,
    one_over_one_plus_x,
    quantize_multiplier,
    requantize,
    wrap_int32,
)
from cortex_m_nn.ops.library import define_operator

#: Integer bits of the scaled input differences (TFLite's ``kScaledDiffIntegerBits``).
INPUT_INTEGER_BITS = 5
#: Fractional bits dropped from each exponential before summing (CMSIS-NN's ``ACCUM_BITS``).
ACCUM_BITS = 12


def softmax_parameters(input_scale: float, beta: float = 1.0) -> tuple[int, int, int]:
    """(multiplier, shift, diff_min) for :func:`softmax`, as TFLite Micro computes them."""
    real = min(beta * input_scale * (1 << (31 - INPUT_INTEGER_BITS)), (1 << 31) - 1.0)
    multiplier, shift = quantize_multiplier(real)
    if shift < 0:
        raise ValueError(f"softmax input scale {input_scale} * beta {beta} is too small")
    max_input_rescaled = (
        ((1 << INPUT_INTEGER_BITS) - 1) * (1 << (31 - INPUT_INTEGER_BITS)) / (1 << shift)
    )
    return multiplier, shift, -math.floor(max_input_rescaled)


#: Entries of each int16 softmax table (512 segments and the end point).
S16_TABLE = 513
#: The exp table's input range is [-10, 0]: one int16 step of it (TFLite Micro's scale).
S16_EXP_INPUT_SCALE = 10.0 / 65535.0
#: Output quantization of the int16 softmax (TFLite Micro's): scale 1/32768, zero point 0.
S16_OUTPUT_SCALE = 1.0 / 32768.0
#: ``diff << shift`` stays in int32 for int16 differences (|diff| <= 65535) up to this shift.
S16_MAX_SHIFT = 15


def softmax_s16_parameters(input_scale: float, beta: float = 1.0) -> tuple[int, int]:
    """(multiplier, shift) of the int16 case, as TFLite Micro computes them: the input scale
    over the exp table's step. ValueError for a shift the kernel's int32 cannot take."""
    multiplier, shift = quantize_multiplier(beta * input_scale / S16_EXP_INPUT_SCALE)
    if shift > S16_MAX_SHIFT:
        raise ValueError(f"int16 softmax input scale {input_scale} is too large (shift {shift})")
    return multiplier, shift


def _table(
    function: Callable[[np.ndarray], np.ndarray], input_scale: float, input_zero_point: int
) -> torch.Tensor:
    """TFLite Micro's ``LUTPopulateInt16<float>`` for an output of scale 2/65535 (so [-1, 1)):
    512 segments over the input's int16 range, each sample biased by half the interpolation
    error at the segment's midpoint, then the end point; float32 arithmetic, rounded half away
    from zero."""
    f32 = np.float32
    scale = f32(input_scale)
    input_min = scale * f32(-32768 - input_zero_point)
    input_max = scale * f32(32767 - input_zero_point)
    output_scale = f32(2.0) / f32(65535.0)
    inverse = f32(65536.0) / (output_scale * f32(32767) - output_scale * f32(-32768))
    step = (input_max - input_min) / f32(512)
    half = step / f32(2)

    def rounded(value: np.ndarray) -> np.ndarray:
        return (np.sign(value) * np.floor(np.abs(value) + f32(0.5))).astype(np.float32)

    i = np.arange(512, dtype=np.float32)
    value = function(input_min + i * step)
    middle = function(input_min + i * step + half)
    following = function(input_min + (i + f32(1)) * step)
    sample = rounded(value * inverse)
    interpolated = rounded((following * inverse + rounded(value * inverse)) / f32(2))
    bias = rounded((interpolated - rounded(middle * inverse)) / f32(2))
    entries = np.clip(sample - bias, -32768, 32767)
    end = rounded(function(np.array([input_max], dtype=np.float32)) * inverse)
    table = np.concatenate([entries, np.clip(end, -32768, 32767)])
    return torch.from_numpy(table.astype(np.int16))


def softmax_s16_tables() -> tuple[torch.Tensor, torch.Tensor]:
    """(exp table, reciprocal table): exp(x) on [-10, 0] and 1/(1 + x) on [0, 1], int16[513]
    each, as TFLite Micro's softmax fills them (input scales 10/65535 and 1/65535)."""
    f32 = np.float32
    steps = f32(65535.0)
    exp = _table(lambda v: np.exp(v).astype(f32), float(f32(10.0) / steps), 32767)
    reciprocal = _table(
        lambda v: (f32(1.0) / (f32(1.0) + v)).astype(f32), float(f32(1.0) / steps), -32768
    )
    return exp, reciprocal


def _fake(input: torch.Tensor, *arguments: object) -> torch.Tensor:
    dtype = torch.int16 if input.dtype is torch.int16 else torch.int8
    return torch.empty_like(input, dtype=dtype)


@define_operator(
    "softmax",
    "Tensor input, Tensor? exp_table, Tensor? reciprocal_table, int multiplier, int shift,"
    " int diff_min",
    _fake,
)
def softmax(
    input: torch.Tensor,
    exp_table: torch.Tensor | None,
    reciprocal_table: torch.Tensor | None,
    multiplier: int,
    shift: int,
    diff_min: int,
    *,
    rounding: Rounding,
) -> torch.Tensor:
    """Reference ``arm_softmax_s8`` over the last dimension of an int8 tensor (no tables), or
    ``arm_softmax_s16`` of an int16 one (the tables)."""
    if input.dim() < 1 or input.shape[-1] == 0:
        raise ValueError(f"softmax needs a non-empty last dimension, got {tuple(input.shape)}")
    if input.dtype is torch.int16:
        return _softmax_s16(input, exp_table, reciprocal_table, multiplier, shift, rounding)
    if exp_table is not None or reciprocal_table is not None:
        raise ValueError("the int8 softmax takes no tables")
    x = input.to(torch.int64)
    diff = x - x.amax(dim=-1, keepdim=True)
    keep = diff >= diff_min
    exps = exp_on_negative_values(doubling_high_mult(wrap_int32(diff << shift), multiplier))
    parts = torch.where(keep, divide_by_power_of_two(exps, ACCUM_BITS), 0)
    total = wrap_int32(parts.sum(dim=-1, keepdim=True))
    headroom = count_leading_zeros(total)
    normalized = torch.where(total > 0, wrap_int32(total << headroom.clamp(max=31)), 0)
    scale = one_over_one_plus_x(wrap_int32(normalized - 2**31))
    bits_over_unit = ACCUM_BITS - headroom + 23
    out = divide_by_power_of_two(doubling_high_mult(scale, exps), bits_over_unit) - 128
    out = torch.where(keep, out.clamp(-128, 127), -128)
    return out.to(torch.int8)


def _lookup(table: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """CMSIS-NN's interpolated int16 table read, in its C integer types."""
    t = table.to(torch.int64)
    index = 256 + (value >> 7)
    base = t[index]
    slope = wrap_int16(t[index + 1] - base)
    return wrap_int16(base + wrap_int16((slope * (value & 0x7F) + 64) >> 7))


def wrap_int16(value: torch.Tensor) -> torch.Tensor:
    """``(int16_t)`` of an integer: the low 16 bits, signed."""
    return ((value + 32768) & 0xFFFF) - 32768


def _softmax_s16(
    input: torch.Tensor,
    exp_table: torch.Tensor | None,
    reciprocal_table: torch.Tensor | None,
    multiplier: int,
    shift: int,
    rounding: Rounding,
) -> torch.Tensor:
    """``arm_softmax_s16``; ValueError for arguments it does not take."""
    for table in (exp_table, reciprocal_table):
        if table is None or table.dtype is not torch.int16 or tuple(table.shape) != (S16_TABLE,):
            raise ValueError(f"the int16 softmax takes two int16[{S16_TABLE}] tables")
    if input.shape[-1] < 2:
        raise ValueError("an int16 softmax row of one entry: CMSIS-NN wraps its result")
    if not (0 <= multiplier < 2**31 and -31 <= shift <= S16_MAX_SHIFT):
        raise ValueError(f"int16 softmax multiplier in [0, 2^31), shift in [-31, {S16_MAX_SHIFT}]")
    x = input.to(torch.int64)
    diff = x - x.amax(dim=-1, keepdim=True)
    scaled = requantize(diff, multiplier, shift, rounding)
    exps = _lookup(exp_table, (scaled + 32767).clamp(-32768, 32767))
    total = exps.sum(dim=-1, keepdim=True)
    headroom = count_leading_zeros(total)
    shifted = wrap_int32(wrap_int32(total << (headroom - 1)) + (1 << 13)) >> 14
    reciprocal = _lookup(reciprocal_table, wrap_int16(shifted - 98304))
    out = ((exps * reciprocal) >> (30 - headroom)) + 1 >> 1
    return wrap_int16(out).to(torch.int16)
