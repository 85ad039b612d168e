"""CMSIS-NN's integer primitives, vectorised over torch int64 tensors.

Every function takes and returns int64 tensors holding int32 values and reproduces the C
arithmetic bit for bit, including two's-complement wrap-around where the C code relies on
it. Scalars may be passed wherever a tensor broadcasts (per-channel multipliers and shifts
broadcast along the last dimension).

Requantization has two modes, chosen when CMSIS-NN is built: the default (doubling high
multiply, then a rounding right shift) and ``CMSIS_NN_USE_SINGLE_ROUNDING`` (one rounding
of the 64-bit product). :class:`~cortex_m_nn.core.abi.Rounding` names them; the operator
references take it as their ``rounding`` argument (``ops/library.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.core.integers import INT32_MAX, INT32_MIN

TensorLike = torch.Tensor | int


def _tensor(value: TensorLike) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.to(torch.int64)
    return torch.tensor(value, dtype=torch.int64)


def wrap_int32(value: torch.Tensor) -> torch.Tensor:
    """Reduce to int32 with two's-complement wrap-around, as a 32-bit C store does."""
    return ((value + 2**31) & 0xFFFFFFFF) - 2**31


def saturate_int32(value: torch.Tensor) -> torch.Tensor:
    return value.clamp(INT32_MIN, INT32_MAX)


def doubling_high_mult(a: TensorLike, b: TensorLike) -> torch.Tensor:
    """``arm_nn_doubling_high_mult``: round(a * b / 2^31), halves up; INT32_MIN² saturates.

    The C code adds 2^30 (or 1 - 2^30 for a negative product) and truncates; both reduce to
    ``floor((a * b + 2^30) / 2^31)``. Only INT32_MIN * INT32_MIN leaves int32.
    """
    product = _tensor(a) * _tensor(b)
    return saturate_int32((product + (1 << 30)) >> 31)


def doubling_high_mult_no_sat(a: TensorLike, b: TensorLike) -> torch.Tensor:
    """``arm_nn_doubling_high_mult_no_sat``: as :func:`doubling_high_mult`, wrapping instead."""
    product = _tensor(a) * _tensor(b)
    return wrap_int32((product + (1 << 30)) >> 31)


def divide_by_power_of_two(dividend: TensorLike, exponent: TensorLike) -> torch.Tensor:
    """``arm_nn_divide_by_power_of_two``: dividend / 2^exponent, halves away from zero."""
    dividend = _tensor(dividend)
    exponent = _tensor(exponent)
    mask = torch.bitwise_left_shift(torch.ones_like(exponent), exponent) - 1
    remainder = dividend & mask
    result = torch.bitwise_right_shift(dividend, exponent)
    threshold = (mask >> 1) + (result < 0).to(torch.int64)
    return result + (remainder > threshold).to(torch.int64)


def multiply_by_power_of_two(value: TensorLike, exponent: int) -> torch.Tensor:
    """``arm_nn_mult_by_power_of_two``: value * 2^exponent, saturating to int32."""
    value = _tensor(value)
    threshold = (1 << (31 - exponent)) - 1
    result = wrap_int32(value << exponent)
    result = torch.where(value > threshold, INT32_MAX, result)
    return torch.where(value < -threshold, INT32_MIN, result)


def requantize(
    acc: TensorLike,
    multiplier: TensorLike,
    shift: TensorLike,
    rounding: Rounding = Rounding.DOUBLE,
) -> torch.Tensor:
    """``arm_nn_requantize``: acc * multiplier * 2^(shift - 31), rounded as CMSIS-NN does.

    ``shift`` > 0 is a left shift, < 0 a right shift (range -31..30). ``DOUBLE`` shifts the
    accumulator left first (wrapping in int32), takes the rounding doubling high product, then
    divides by 2^-shift rounding halves away from zero. ``SINGLE`` rounds the exact 64-bit
    product once, halves up.
    """
    acc, multiplier, shift = _tensor(acc), _tensor(multiplier), _tensor(shift)
    if rounding is Rounding.SINGLE:
        total_shift = 31 - shift
        result = torch.bitwise_right_shift(acc * multiplier, total_shift - 1)
        return wrap_int32((result + 1) >> 1)
    left = shift.clamp(min=0)
    right = (-shift).clamp(min=0)
    shifted = wrap_int32(torch.bitwise_left_shift(acc, left))
    return divide_by_power_of_two(doubling_high_mult_no_sat(shifted, multiplier), right)


def reduce_multiplier(multiplier: TensorLike) -> torch.Tensor:
    """``REDUCE_MULTIPLIER``: a Q31 multiplier as Q15, rounded half up; 0x7FFF from
    0x7FFF0000 on (the int16 kernels' multiplier)."""
    m = _tensor(multiplier)
    return torch.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)


def requantize_s64(
    acc: TensorLike, reduced_multiplier: TensorLike, shift: TensorLike
) -> torch.Tensor:
    """``arm_nn_requantize_s64`` (the int16 kernels' output stage): the int64 accumulator
    times the Q15 multiplier, shifted right by ``14 - shift`` into int32 (wrapping, as the C
    assignment does), then halved rounding half up. Independent of the s8 ``Rounding``."""
    acc, multiplier, shift = _tensor(acc), _tensor(reduced_multiplier), _tensor(shift)
    result = wrap_int32(torch.bitwise_right_shift(acc * multiplier, 14 - shift))
    return torch.bitwise_right_shift(wrap_int32(result + 1), 1)


def _round_half_away(value: float) -> int:
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def quantize_multiplier(real: float) -> tuple[int, int]:
    """Split ``real`` into (multiplier, shift): real ≈ multiplier * 2^(shift - 31).

    TFLite / CMSIS-NN convention: multiplier in [2^30, 2^31), shift > 0 a left shift.
    0 (and anything below 2^-32, which would be shifted out entirely) gives (0, 0); a
    mantissa that rounds up to 2^31 becomes 2^30 with the shift one larger.
    """
    if not math.isfinite(real) or real < 0:
        raise ValueError(f"requantization multiplier must be finite and >= 0, got {real!r}")
    if real == 0.0:
        return 0, 0
    mantissa, shift = math.frexp(real)
    fixed = _round_half_away(mantissa * (1 << 31))
    if fixed == 1 << 31:
        fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        raise ValueError(f"requantization multiplier {real!r} is too large (shift {shift} > 30)")
    return fixed, shift


def per_channel_parameters(
    input_scale: float,
    weight_scales: Sequence[float] | torch.Tensor,
    output_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-output-channel (multipliers, shifts) as int32 tensors, as TFLite Micro computes them.

    The effective scale of channel c is ``input_scale * weight_scales[c] / output_scale`` in
    double precision.
    """
    if isinstance(weight_scales, torch.Tensor):
        weight_scales = weight_scales.reshape(-1).tolist()
    pairs = [quantize_multiplier(input_scale * float(s) / output_scale) for s in weight_scales]
    multipliers = torch.tensor([m for m, _ in pairs], dtype=torch.int32)
    shifts = torch.tensor([s for _, s in pairs], dtype=torch.int32)
    return multipliers, shifts


def count_leading_zeros(value: torch.Tensor) -> torch.Tensor:
    """CLZ of the int32 values read as uint32 (32 for zero)."""
    value = _tensor(value)
    exponent = torch.frexp(value.clamp(min=0).to(torch.float64)).exponent.to(torch.int64)
    return torch.where(value < 0, 0, 32 - exponent)


# Softmax fixed-point helpers (gemmlowp's, as CMSIS-NN uses them).

_EXP_BARREL_SHIFTER = (1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242)


def exp_on_negative_values(value: TensorLike) -> torch.Tensor:
    """``arm_nn_exp_on_negative_values``: exp(x) in Q0.31 for x <= 0 given in Q5.26."""
    value = _tensor(value)
    quarter = 1 << 24
    value_mod_minus_quarter = (value & (quarter - 1)) - quarter
    remainder = value_mod_minus_quarter - value
    x = wrap_int32((value_mod_minus_quarter << 5) + (1 << 28))
    x2 = doubling_high_mult(x, x)
    x4_over_4 = divide_by_power_of_two(doubling_high_mult(x2, x2), 2)
    poly = doubling_high_mult(wrap_int32(x4_over_4 + doubling_high_mult(x2, x)), 715827883)
    inner = wrap_int32(x + divide_by_power_of_two(wrap_int32(poly + x2), 1))
    result = wrap_int32(1895147668 + doubling_high_mult(1895147668, inner))
    for bit, factor in enumerate(_EXP_BARREL_SHIFTER, start=24):
        selected = (remainder & (1 << bit)) != 0
        result = torch.where(selected, doubling_high_mult(result, factor), result)
    return torch.where(value == 0, INT32_MAX, result)


def one_over_one_plus_x(value: TensorLike) -> torch.Tensor:
    """``arm_nn_one_over_one_plus_x_for_x_in_0_1``: 1 / (1 + x) for x in [0, 1), both Q0.31."""
    value = _tensor(value)
    total = value + INT32_MAX
    half_denominator = wrap_int32(
        torch.div(total + torch.where(total >= 0, 1, -1), 2, rounding_mode="trunc")
    )
    x = wrap_int32(1515870810 + doubling_high_mult(half_denominator, -1010580540))
    one_quarter = 1 << 29
    for _ in range(3):
        error = wrap_int32(one_quarter - doubling_high_mult(half_denominator, x))
        x = wrap_int32(x + multiply_by_power_of_two(doubling_high_mult(x, error), 2))
    return multiply_by_power_of_two(x, 1)
