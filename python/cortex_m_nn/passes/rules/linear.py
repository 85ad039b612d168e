"""aten.linear → cortex_m_nn::linear: per-tensor weights → ``arm_fully_connected_s8``,
per-channel weights (the quantizer's choice, ``quantizer/config.py``) →
``arm_fully_connected_per_channel_s8`` with int32 multipliers and shifts per output channel."""

from __future__ import annotations

import math

import torch

from cortex_m_nn import scratch
from cortex_m_nn.ops.arithmetic import per_channel_parameters, quantize_multiplier
from cortex_m_nn.ops.linear import kernel_sums
from cortex_m_nn.passes.activation import activation_range
from cortex_m_nn.passes.context import LoweringContext
from cortex_m_nn.passes.graph_values import QValue
from cortex_m_nn.passes.refusals import LoweringRefused, Refusal
from cortex_m_nn.passes.registry import Lowered, Pattern, rule
from cortex_m_nn.quantizer.quantizer import aten
from cortex_m_nn.target import Isa


def _bias_or_sums(
    context: LoweringContext,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    batches: int,
    input_offset: int,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(bias, kernel sums): CMSIS-NN's MVE path wants the kernel sums (which include the
    bias) in its buffer, computed here rather than at run time; the others take the bias."""
    out_features, in_features = weight.shape
    buffer_bytes = scratch.linear_scratch_bytes(
        context.target, (batches, in_features), tuple(weight.shape)
    )
    if context.target.isa is Isa.MVE:
        if buffer_bytes != 4 * out_features:
            raise LoweringRefused(
                Refusal.LINEAR_SCRATCH, f"CMSIS-NN asks {buffer_bytes} B for MVE linear kernel sums"
            )
        return None, kernel_sums(weight, bias, input_offset)
    if buffer_bytes:
        raise LoweringRefused(
            Refusal.LINEAR_SCRATCH,
            f"CMSIS-NN asks {buffer_bytes} B of scratch for a non-MVE linear",
        )
    return bias, None


#: The per-channel vectors' constant names.
_NAMES = ("multipliers", "shifts")


@rule(aten.linear.default)
def lower_linear(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    source, weight_node = node.args[:2]
    bias_node = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
    x = context.input_value(source)
    if not x.layout_free:
        raise LoweringRefused(
            Refusal.LINEAR_OVER_WIDTH, "linear over the width of a channels-last 4-D tensor"
        )
    weight, weight_scales = context.quantized_constant(weight_node)
    out_features, in_features = weight.shape
    per_channel = weight_scales.numel() > 1
    bias = None
    if bias_node is not None:
        bias = context.accumulator_bias(bias_node, x.scale, weight_scales.reshape(-1))
    channels: list[object] = [None, None]  # per-channel multipliers and shifts
    if per_channel:
        vectors = per_channel_parameters(x.scale, weight_scales, pattern.scale)
        channels = [
            context.constant(v, f"{node.name}_{k}") for v, k in zip(vectors, _NAMES, strict=True)
        ]
        multiplier, shift = 0, 0
    else:
        multiplier, shift = quantize_multiplier(x.scale * float(weight_scales) / pattern.scale)
    act_min, act_max = activation_range(pattern.activation, pattern.scale, pattern.zero_point)
    source_node = x.node
    if x.nhwc:  # layout-free here, so the logical shape is the same bytes
        source_node = context.view(x.node, x.shape)
    batches = math.prod(x.shape[:-1])
    bias, sums = _bias_or_sums(context, weight, bias, batches, -x.zero_point)
    out = context.call(
        "linear",
        source_node,
        context.constant(weight.to(torch.int8), f"{node.name}_weight"),
        None if bias is None else context.constant(bias, f"{node.name}_bias"),
        None if sums is None else context.constant(sums, f"{node.name}_kernel_sums"),
        *channels,
        -x.zero_point,
        pattern.zero_point,
        multiplier,
        shift,
        act_min,
        act_max,
    )
    value = QValue(out, pattern.scale, pattern.zero_point, pattern.shape)
    weight_bytes = weight.numel() + (0 if bias is None and sums is None else 4 * out_features)
    weight_bytes += 8 * out_features if per_channel else 0
    return Lowered(
        value,
        "linear",
        "arm_fully_connected_per_channel_s8" if per_channel else "arm_fully_connected_s8",
        batches * in_features * out_features,
        weight_bytes,
    )
