"""Fused activations: relu, relu6, hardtanh and clamp become the kernel's output range.

Where one cannot fuse (no single lowered producer), ``rules/lut.py`` makes it a table. A
batch matmul's positive scale takes the same place in its pattern (:func:`fused_scale`); it
bounds nothing.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from cortex_m_nn.core.families import ACTIVATIONS, aten
from cortex_m_nn.core.graph import positive_scale
from cortex_m_nn.core.integers import RANGES
from cortex_m_nn.lower.graph_values import quantize_value


def float_bounds(activation: Node | None) -> tuple[float | None, float | None]:
    """The float clamp range an activation applies (None: unbounded)."""
    if activation is None or positive_scale(activation) is not None:
        return None, None
    target = activation.target
    if target in (aten.relu.default, aten.relu_.default):
        return 0.0, None
    if target is aten.relu6.default:
        return 0.0, 6.0
    if target in (aten.hardtanh.default, aten.hardtanh_.default):
        low = (
            activation.args[1]
            if len(activation.args) > 1
            else activation.kwargs.get("min_val", -1.0)
        )
        high = (
            activation.args[2]
            if len(activation.args) > 2
            else activation.kwargs.get("max_val", 1.0)
        )
        return float(low), float(high)
    if target is aten.clamp.default:
        low = activation.args[1] if len(activation.args) > 1 else activation.kwargs.get("min")
        high = activation.args[2] if len(activation.args) > 2 else activation.kwargs.get("max")
        return (None if low is None else float(low)), (None if high is None else float(high))
    raise ValueError(f"not an activation: {target}")


def activation_range(
    activation: Node | None, scale: float, zero_point: int, dtype: torch.dtype = torch.int8
) -> tuple[int, int]:
    """[activation_min, activation_max] in the output's integer domain (int8 or int16)."""
    low, high = float_bounds(activation)
    q_min, q_max = RANGES[dtype]
    q_low = q_min if low is None else quantize_value(low, scale, zero_point, dtype)
    q_high = q_max if high is None else quantize_value(high, scale, zero_point, dtype)
    return q_low, q_high


def fused_scale(activation: Node | None) -> float:
    """The positive scale a pattern's op output is multiplied by before its quantize (1.0:
    none; ``lower/patterns.py``)."""
    scale = None if activation is None else positive_scale(activation)
    return 1.0 if scale is None else scale


def is_activation(node: Node) -> bool:
    return node.op == "call_function" and node.target in ACTIVATIONS
