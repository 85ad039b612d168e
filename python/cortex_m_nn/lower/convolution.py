"""What conv2d, depthwise conv2d and transposed conv2d rules share: per-channel requantization
(bias in accumulator units, multipliers, shifts, the fused activation's range) and the
constants their operators take after the input."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.fx import Node

from cortex_m_nn.core.families import DEQUANTIZE, DEQUANTIZE_PER_CHANNEL
from cortex_m_nn.core.integers import INT4_MAX
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.activation import activation_range
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.registry import Pattern
from cortex_m_nn.ops.arithmetic import per_channel_parameters
from cortex_m_nn.ops.int4 import pack


@dataclass
class Requantization:
    """A convolution's bias (int32; int64 for int16 activations) and per-output-channel
    multipliers and shifts."""

    bias: torch.Tensor
    multipliers: torch.Tensor
    shifts: torch.Tensor
    act_min: int
    act_max: int

    def constants(
        self, context: LoweringContext, name: str, kernel: torch.Tensor, int4: bool = False
    ) -> list[Node]:
        """The weight (``kernel``, as int8; ``int4``: packed two per byte, ``ops/int4.py``),
        bias, multipliers and shifts as constants."""
        weight = kernel.to(torch.int8)
        weight = packed(weight) if int4 else weight
        return context.constants(
            name, weight=weight, bias=self.bias, multipliers=self.multipliers, shifts=self.shifts
        )


def requantization(
    context: LoweringContext,
    pattern: Pattern,
    input_scale: float,
    weight_scales: torch.Tensor,
    bias_node: object,
    out_channels: int,
) -> Requantization:
    """Per-channel parameters for weights quantized with ``weight_scales`` (one: per tensor);
    for int16 activations (``pattern.dtype``) the bias rounded to int64 from the float one."""
    if weight_scales.numel() == 1:
        weight_scales = weight_scales.expand(out_channels)
    int16 = pattern.dtype is torch.int16
    if bias_node is None:
        bias = torch.zeros(out_channels, dtype=torch.int64 if int16 else torch.int32)
    elif int16:
        bias = context.int64_bias(bias_node, input_scale * weight_scales.to(torch.float64))
    else:
        bias = context.accumulator_bias(bias_node, input_scale, weight_scales)
    multipliers, shifts = per_channel_parameters(input_scale, weight_scales, pattern.scale)
    if int16 and int(shifts.max()) > 14:
        raise LoweringRefused(
            Refusal.INT16_REQUANTIZATION, f"int16 convolution's shift {int(shifts.max())} > 14"
        )
    act_min, act_max = activation_range(
        pattern.activation, pattern.scale, pattern.zero_point, pattern.dtype
    )
    return Requantization(bias, multipliers, shifts, act_min, act_max)


def weight_bytes(
    kernel: torch.Tensor, out_channels: int, bias_bytes: int = 4, int4: bool = False
) -> int:
    """int8 weights (``int4``: two per byte) plus a bias (``bias_bytes``), an int32 multiplier
    and shift per output channel."""
    return kernel.numel() // (2 if int4 else 1) + (bias_bytes + 8) * out_channels


def weight_bits(node: object) -> int:
    """4 for weights quantized to int4 (``dequantize`` with ``quant_max`` 7 or less), else 8."""
    if isinstance(node, Node) and node.target in DEQUANTIZE_PER_CHANNEL:
        quant_max = node.args[5]
    elif isinstance(node, Node) and node.target in DEQUANTIZE:
        quant_max = node.args[4]
    else:
        return 8
    return 4 if int(quant_max) <= INT4_MAX else 8


def packed(values: torch.Tensor) -> torch.Tensor:
    """int4 values packed (``ops.int4.pack``); refused where the innermost dim is odd."""
    try:
        return pack(values)
    except ValueError as error:
        raise LoweringRefused(Refusal.NOT_INT8, f"int4 weights: {error}") from error
