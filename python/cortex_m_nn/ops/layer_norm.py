"""``cortex_m_nn::layer_norm``: int8 layer norm and group norm in integer arithmetic (our kernel).

CMSIS-NN has no normalization kernel; this arithmetic is ours, and ``kernels/op_layer_norm.cpp``
computes it bit for bit. The stored input is viewed as ``[outer, spatial, channels]`` with
``channels`` split into ``groups`` groups of ``channels / groups``; each (outer, group) is one
*normalized group* of ``n = spatial · channels / groups`` elements. ``nn.LayerNorm`` over the
last dims is ``spatial = 1, groups = 1, channels = prod(normalized_shape)``; ``nn.GroupNorm``
on channels-last storage (NHWC, NLC, or ``[N, C]``) is ``spatial = H·W, channels = C``.

Statistics (int32, on the raw int8 values ``q``; the zero point cancels in ``q - mean``)::

    sum = Σ q,  sumsq = Σ q²                       (|sum| < 2^23, sumsq ≤ 2^30: n ≤ 2^16)
    V   = n·sumsq − sum²                           (int64: n² · variance in q units, ≤ 2^46)
    D   = V·2^14 + epsilon                         (epsilon = round(n² · eps / s_in² · 2^14))

The scale cancels in ``(x − mean) / √(var + eps)`` except in eps, converted at compile time.
Inverse square root, exact and per group: ``k = (62 − bitlength(D)) // 2`` normalizes
``D' = D·4^k`` into [2^60, 2^62), ``S = isqrt(D')`` (floor, in [2^30, 2^31)) and
``R = ⌊2^60 / S⌋`` (≤ 2^30); ``D = 0`` gives ``R = 0``. Then ``1/√V ≈ R · 2^(k + 7 − 60)``.

Per element, with ``d = n·q − sum`` (|d| < 2^24) and per channel ``c`` (folded at compile time
from gamma, beta and the output quantization; ``g = gamma / s_out``, ``b = beta / s_out + zp``)::

    y   = (d·R + 2^(36 − k)) >> (37 − k)           (normalized value, Q16, |y| < 2^25)
    out = clamp((y·M[c] + B[c] + 2^(T[c] − 1)) >> T[c], activation_min, activation_max)

where ``M[c] · 2^−T[c] = g · 2^−16`` (``|M| < 2^31``, ``1 ≤ T ≤ 52``) and
``B[c] = round(b · 2^T[c])`` clamped to ±2^61 (beyond, the output saturates either way).
``>>`` is an arithmetic (flooring) shift of int64 values; nothing overflows int64.

Error bound against float: for the exact real value ``v = layer_norm(dequantize(q)) / s_out +
zp`` (before rounding), every output satisfies ``|out − clamp(v)| ≤ 0.5 + 2^−7`` LSB: the
rounding to int8 is the 0.5; the rest (isqrt and reciprocal floors, relative < 2^−28; Q16
rounding of ``y``, 2^−17; eps rounding, relative < 2^−16 of D; ``M``, relative 2^−31) stays
below 2^−7 LSB for outputs in range. The ``tests/python/ops/test_layer_norm.py`` table holds it.
"""

from __future__ import annotations

import math

import torch

from cortex_m_nn.ops.library import define_operator

#: Largest normalized group (elements): keeps sum and sum of squares in int32.
MAX_GROUP = 1 << 16
#: Fraction bits of D (V · 2^EPS_FRACTION_BITS + epsilon): eps keeps its precision.
EPS_FRACTION_BITS = 14
#: Fraction bits of the normalized value y.
NORMALIZED_FRACTION_BITS = 16
#: Largest output shift T; keeps y·M + B in int64 and a clamped B saturating.
MAX_SHIFT = 52
#: |B| is clamped to this.
MAX_BIAS = 1 << 61
#: Largest epsilon; D stays below 2^62.
MAX_EPSILON = 1 << 61


def epsilon_parameter(eps: float, input_scale: float, group: int) -> int:
    """``round(n² · eps / s_in² · 2^14)``, clamped: eps in D's integer domain."""
    real = eps / (input_scale * input_scale) * group * group * 2.0**EPS_FRACTION_BITS
    return int(min(round(real), MAX_EPSILON))


def channel_parameters(
    gamma: torch.Tensor, beta: torch.Tensor, output_scale: float, output_zero_point: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(multipliers int32, shifts int32, biases int64) per channel from float gamma and beta."""
    multipliers, shifts, biases = [], [], []
    for g_real, b_real in zip(gamma.tolist(), beta.tolist(), strict=True):
        g = g_real / output_scale
        shift = (
            MAX_SHIFT
            if g == 0
            else min(MAX_SHIFT, 31 + NORMALIZED_FRACTION_BITS - math.frexp(g)[1])
        )
        multiplier = round(g * 2.0 ** (shift - NORMALIZED_FRACTION_BITS))
        if abs(multiplier) == 1 << 31:
            multiplier, shift = multiplier // 2, shift - 1
        if shift < 1 or not math.isfinite(g):
            raise ValueError(f"layer norm gamma / output scale {g} is too large")
        b = (b_real / output_scale + output_zero_point) * 2.0**shift
        multipliers.append(multiplier)
        shifts.append(shift)
        biases.append(int(max(-MAX_BIAS, min(MAX_BIAS, round(b)))))
    return (
        torch.tensor(multipliers, dtype=torch.int32),
        torch.tensor(shifts, dtype=torch.int32),
        torch.tensor(biases, dtype=torch.int64),
    )


def inverse_sqrt(d: int) -> tuple[int, int]:
    """(R, k) with ``1/√D ≈ R · 2^(k − 60)``: R = ⌊2^60 / isqrt(D · 4^k)⌋, exact integers."""
    if d <= 0:
        return 0, 0
    k = (62 - d.bit_length()) // 2
    return (1 << 60) // math.isqrt(d << (2 * k)), k


def _check(
    input: torch.Tensor, multipliers: torch.Tensor, spatial: int, groups: int
) -> tuple[int, int]:
    """(outer, n) of a valid call; raises ValueError otherwise."""
    channels = multipliers.numel()
    if input.dtype != torch.int8 or spatial < 1 or groups < 1 or channels % groups:
        raise ValueError(f"layer_norm: int8 input, {groups} groups of {channels} channels")
    if input.numel() % (spatial * channels):
        raise ValueError(f"layer_norm: {input.numel()} elements, not [*, {spatial}, {channels}]")
    n = spatial * channels // groups
    if n > MAX_GROUP:
        raise ValueError(f"layer_norm: groups of {n} elements, at most {MAX_GROUP}")
    return input.numel() // (spatial * channels), n


def _fake(input: torch.Tensor, *args: object) -> torch.Tensor:
    return torch.empty_like(input, dtype=torch.int8, memory_format=torch.contiguous_format)


@define_operator(
    "layer_norm",
    "Tensor input, Tensor multipliers, Tensor shifts, Tensor biases, int spatial, int groups,"
    " int epsilon, int activation_min, int activation_max",
    _fake,
)
def layer_norm(
    input: torch.Tensor,
    multipliers: torch.Tensor,
    shifts: torch.Tensor,
    biases: torch.Tensor,
    spatial: int,
    groups: int,
    epsilon: int,
    activation_min: int,
    activation_max: int,
) -> torch.Tensor:
    """Reference: normalize every group, then the per-channel affine requantization."""
    outer, n = _check(input, multipliers, spatial, groups)
    channels = multipliers.numel()
    q = input.reshape(outer, spatial, groups, channels // groups).to(torch.int64)
    total = q.sum(dim=(1, 3), keepdim=True)
    squares = (q * q).sum(dim=(1, 3), keepdim=True)
    variance = n * squares - total * total
    pairs = [inverse_sqrt(v * 2**EPS_FRACTION_BITS + epsilon) for v in variance.flatten().tolist()]
    r = torch.tensor([p[0] for p in pairs], dtype=torch.int64).reshape(variance.shape)
    shift = 37 - torch.tensor([p[1] for p in pairs], dtype=torch.int64).reshape(variance.shape)
    y = ((n * q - total) * r + (1 << (shift - 1))) >> shift
    y = y.reshape(outer, spatial, channels)
    t = shifts.to(torch.int64)
    acc = y * multipliers.to(torch.int64) + biases.to(torch.int64) + (1 << (t - 1))
    out = (acc >> t).clamp(activation_min, activation_max)
    return out.to(torch.int8).reshape(input.shape).contiguous()
