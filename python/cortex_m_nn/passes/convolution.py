"""What conv2d, depthwise conv2d and transposed conv2d rules share: per-channel requantization
(bias in accumulator units, multipliers, shifts, the fused activation's range) and the
constants their operators take after the input."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.fx import Node

from cortex_m_nn.ops.arithmetic import per_channel_parameters
from cortex_m_nn.passes.activation import activation_range
from cortex_m_nn.passes.context import LoweringContext
from cortex_m_nn.passes.registry import Pattern


@dataclass
class Requantization:
    """A convolution's int32 bias and per-output-channel multipliers and shifts."""

    bias: torch.Tensor
    multipliers: torch.Tensor
    shifts: torch.Tensor
    act_min: int
    act_max: int

    def constants(self, context: LoweringContext, name: str, kernel: torch.Tensor) -> list[Node]:
        """The weight (``kernel``, as int8), bias, multipliers and shifts as constants."""
        weight = kernel.to(torch.int8)
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
    """Per-channel parameters for weights quantized with ``weight_scales`` (one: per tensor)."""
    if weight_scales.numel() == 1:
        weight_scales = weight_scales.expand(out_channels)
    if bias_node is None:
        bias = torch.zeros(out_channels, dtype=torch.int32)
    else:
        bias = context.accumulator_bias(bias_node, input_scale, weight_scales)
    multipliers, shifts = per_channel_parameters(input_scale, weight_scales, pattern.scale)
    act_min, act_max = activation_range(pattern.activation, pattern.scale, pattern.zero_point)
    return Requantization(bias, multipliers, shifts, act_min, act_max)


def weight_bytes(kernel: torch.Tensor, out_channels: int) -> int:
    """int8 weights plus an int32 bias, multiplier and shift per output channel."""
    return kernel.numel() + 4 * out_channels * 3
