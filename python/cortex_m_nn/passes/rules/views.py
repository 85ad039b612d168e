"""reshape, view, flatten, squeeze, unsqueeze and dropout (eval) on int8 tensors: free views."""

from __future__ import annotations

from cortex_m_nn.passes.graph_values import LoweringRefused, QValue
from cortex_m_nn.passes.lower import Lowered, LoweringContext, Pattern, rule
from cortex_m_nn.quantizer.quantizer import aten


@rule(aten.dropout.default)
def lower_dropout(context: LoweringContext, pattern: Pattern) -> Lowered:
    if pattern.op.args[2] if len(pattern.op.args) > 2 else pattern.op.kwargs.get("train"):
        raise LoweringRefused("dropout in training mode")
    x = context.input_value(pattern.op.args[0])
    if pattern.activation is not None:
        raise LoweringRefused("activation after dropout")
    return Lowered(x, "view", "(identity)")


@rule(
    aten.flatten.using_ints,
    aten.view.default,
    aten.reshape.default,
    aten.squeeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.unsqueeze.default,
)
def lower_view(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = context.input_value(pattern.op.args[0])
    if pattern.activation is not None:
        raise LoweringRefused("activation after a view")
    if (x.scale, x.zero_point) != (pattern.scale, pattern.zero_point):
        raise LoweringRefused("view with different input and output quantization")
    if not x.layout_free:
        raise LoweringRefused(
            "view that reorders a channels-last tensor (C > 1 and H·W > 1); "
            "lowered with permuted weights in a later release"
        )
    result = QValue(x.node, x.scale, x.zero_point, pattern.shape)
    if len(pattern.shape) == 4:  # keep 4-D activations channels-last, as convolutions expect
        result = QValue(x.node, x.scale, x.zero_point, pattern.shape, nhwc=True)
        if not result.layout_free:
            raise LoweringRefused("view into a 4-D tensor whose channels-last order differs")
    out = context.view(x.node, result.stored_shape)
    return Lowered(QValue(out, x.scale, x.zero_point, pattern.shape, result.nhwc), "view", "(view)")
