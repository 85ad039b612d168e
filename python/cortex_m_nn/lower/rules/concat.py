"""aten.cat / aten.concat on int8 tensors → cortex_m_nn::concat (copies into one buffer).

The quantizer gives every input and the output one shared observer, so no input needs
requantizing (a constant input, a ViT's class token, is quantized with them and becomes a
constant of the program); an input whose quantization differs anyway (it comes through an
operator with fixed output quantization, such as softmax) is refused. Inputs are brought to
one layout: channels-last for 4-D tensors unless all inputs are in logical order and no
convolution or pool reads the result. Tensors above 4-D are collapsed to ``[outer, dim,
inner]``. Inputs all gathered from one tensor (``stack`` of its ``unbind``, ``cat`` of its
slices) are one move of that tensor when that gives the result (``lower/gather``), so the
slices become dead code.
"""

from __future__ import annotations

import math

from torch.fx import Node

from cortex_m_nn.core.families import aten
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.binary import quantized_constant
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.gather import gathered_concat
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import relayout, stored_order, view, wants_channels_last
from cortex_m_nn.lower.registry import Lowered, Pattern, rule


def _input(context: LoweringContext, source: Node) -> QValue:
    """An activation, or a quantized constant (a class token concatenated in front of the
    patches) made a constant tensor of the program."""
    constant = quantized_constant(context, source)
    if constant is None:
        return context.input_value(source)
    node = context.constant(constant.values.contiguous(), f"{source.name}_values")
    return QValue(node, constant.scale, constant.zero_point, constant.shape)


@rule(aten.cat.default, aten.concat.default)
def lower_concat(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    if pattern.activation is not None:
        raise LoweringRefused(Refusal.ACTIVATION_AFTER, "activation after concat")
    inputs = [_input(context, source) for source in node.args[0]]
    for index, x in enumerate(inputs):
        if (x.scale, x.zero_point) != (pattern.scale, pattern.zero_point):
            raise LoweringRefused(
                Refusal.CONCAT_REQUANTIZING,
                f"concat input {index} is quantized with ({x.scale}, {x.zero_point}), the "
                f"output with ({pattern.scale}, {pattern.zero_point}); requantizing is not "
                "supported",
            )
    rank = len(pattern.shape)
    if any(len(x.shape) != rank for x in inputs):
        raise LoweringRefused(Refusal.CONCAT_RANKS, "concat of tensors with different ranks")
    dim = int(node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) % rank
    nhwc = rank == 4 and (any(x.nhwc for x in inputs) or wants_channels_last(pattern))
    result = QValue(node, pattern.scale, pattern.zero_point, pattern.shape, nhwc)
    fused = gathered_concat(context, inputs, result, dim)
    if fused is not None:  # slices of one tensor put back together: one move of it
        return Lowered(*fused)
    inputs = [relayout(context, x, nhwc) for x in inputs]
    order = stored_order(rank, nhwc)
    axis = order.index(dim)
    sources = []
    for x in inputs:
        shape = list(x.stored_shape)
        if rank > 4:  # [outer, dim, inner]
            shape = [math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])]
        sources.append(view(context, x.node, x.stored_shape, shape))
    out_shape = list(result.stored_shape)
    if rank > 4:
        out_shape = [math.prod(out_shape[:axis]), out_shape[axis], math.prod(out_shape[axis + 1 :])]
        axis = 1
    out = context.call("concat", sources, axis)
    out = view(context, out, out_shape, result.stored_shape)
    value = QValue(out, pattern.scale, pattern.zero_point, pattern.shape, nhwc)
    function = "arm_concatenation_s8_" + "wzyx"[axis + 4 - len(out_shape)]
    return Lowered(value, "concat", function)
