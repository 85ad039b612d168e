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
"""

from __future__ import annotations

import math

import torch

from cortex_m_nn.ops.arithmetic import (
    count_leading_zeros,
    divide_by_power_of_two,
    doubling_high_mult,
    exp_on_negative_values,
    one_over_one_plus_x,
    quantize_multiplier,
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


def _fake(input: torch.Tensor, multiplier: int, shift: int, diff_min: int) -> torch.Tensor:
    return torch.empty_like(input, dtype=torch.int8)


@define_operator("softmax", "Tensor input, int multiplier, int shift, int diff_min", _fake)
def softmax(input: torch.Tensor, multiplier: int, shift: int, diff_min: int) -> torch.Tensor:
    """Reference ``arm_softmax_s8`` over the last dimension of an int8 tensor."""
    if input.dim() < 1 or input.shape[-1] == 0:
        raise ValueError(f"softmax needs a non-empty last dimension, got {tuple(input.shape)}")
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
