"""aten.linear → cortex_m_nn::linear (per-tensor weights, arm_fully_connected_s8)."""

from __future__ import annotations

import math

import torch

from cortex_m_nn import scratch
from cortex_m_nn.ops.arithmetic import quantize_multiplier
from cortex_m_nn.ops.linear import kernel_sums
from cortex_m_nn.passes.activation import activation_range
from cortex_m_nn.passes.graph_values import LoweringRefused, QValue
from cortex_m_nn.passes.lower import Lowered, LoweringContext, Pattern, rule
from cortex_m_nn.quantizer.quantizer import aten
from cortex_m_nn.target import Isa


@rule(aten.linear.default)
def lower_linear(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    source, weight_node = node.args[:2]
    bias_node = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
    x = context.input_value(source)
    if not x.layout_free:
        raise LoweringRefused("linear over the width of a channels-last 4-D tensor")
    weight, weight_scale = context.quantized_constant(weight_node)
    if weight_scale.numel() != 1:
        raise LoweringRefused("per-channel linear weights are not supported yet")
    out_features, in_features = weight.shape
    bias = None
    if bias_node is not None:
        bias = context.accumulator_bias(bias_node, x.scale, weight_scale)
    multiplier, shift = quantize_multiplier(x.scale * float(weight_scale) / pattern.scale)
    act_min, act_max = activation_range(pattern.activation, pattern.scale, pattern.zero_point)
    source_node = x.node
    if x.nhwc:  # layout-free here, so the logical shape is the same bytes
        source_node = context.view(x.node, x.shape)
    batches = math.prod(x.shape[:-1])
    buffer_bytes = scratch.linear_scratch_bytes(
        context.target, (batches, in_features), tuple(weight.shape)
    )
    sums = None
    if context.target.isa is Isa.MVE:
        # CMSIS-NN's MVE path wants the kernel sums in ctx->buf: computed here, not at run time.
        sums = kernel_sums(weight, bias, -x.zero_point)
        bias = None
        if buffer_bytes != 4 * out_features:
            raise LoweringRefused(f"CMSIS-NN asks {buffer_bytes} B for MVE linear kernel sums")
    elif buffer_bytes:
        raise LoweringRefused(f"CMSIS-NN asks {buffer_bytes} B of scratch for a non-MVE linear")
    out = context.call(
        "linear",
        source_node,
        context.constant(weight.to(torch.int8), f"{node.name}_weight"),
        None if bias is None else context.constant(bias, f"{node.name}_bias"),
        None if sums is None else context.constant(sums, f"{node.name}_kernel_sums"),
        -x.zero_point,
        pattern.zero_point,
        multiplier,
        shift,
        act_min,
        act_max,
    )
    value = QValue(out, pattern.scale, pattern.zero_point, pattern.shape)
    weight_bytes = weight.numel() + (0 if bias is None and sums is None else 4 * out_features)
    return Lowered(
        value,
        "linear",
        "arm_fully_connected_s8",
        batches * in_features * out_features,
        weight_bytes,
    )
