"""reshape, view, flatten, squeeze, unsqueeze and dropout (eval) on int8 or int16 tensors.

A view is free when the stored bytes already are in the order the new shape needs. A 4-D
result is kept channels-last when that is free too (or when a convolution or pool reads it).
A view across channels-last bytes (e.g. flatten of ``[N, C, H, W]`` with C > 1 and H·W > 1)
first transposes them to logical (NCHW-contiguous) order: exact, whatever reads the result.
A view of the graph input alone is folded into the input quantize (the float input is
reshaped, then quantized straight into the layout the result needs).
"""

from __future__ import annotations

from cortex_m_nn.core.families import VIEWS, aten
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.layout import (
    boundary_quantize,
    census,
    moved_input,
    movement,
    only_reader,
    quantize_as,
    relayout,
    reshape,
    wants_channels_last,
)
from cortex_m_nn.lower.registry import Lowered, Pattern, rule


@rule(aten.dropout.default)
def lower_dropout(context: LoweringContext, pattern: Pattern) -> Lowered:
    if pattern.op.args[2] if len(pattern.op.args) > 2 else pattern.op.kwargs.get("train"):
        raise LoweringRefused(Refusal.DROPOUT_TRAINING, "dropout in training mode")
    x = context.input_value(pattern.op.args[0], int16=True)
    if pattern.activation is not None:
        raise LoweringRefused(Refusal.ACTIVATION_AFTER, "activation after dropout")
    if x.dtype is not pattern.dtype:
        raise LoweringRefused(Refusal.QPARAMS_CHANGE, "dropout between int8 and int16")
    return Lowered(x, "view", "(identity)")


@rule(*VIEWS)
def lower_view(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = moved_input(context, pattern, "a view", int16=True)
    shape = pattern.shape
    # Free candidates first; a 4-D result prefers channels-last, as convolutions expect.
    channels_last = len(shape) == 4 and wants_channels_last(pattern)
    fold = only_reader(pattern) and boundary_quantize(x)
    before = census(context)
    for nhwc in (True, False) if len(shape) == 4 else (False,):
        free = reshape(context, x, shape, nhwc)
        if free is not None:
            if channels_last and not free.nhwc and fold:  # a convolution or pool reads it
                free = quantize_as(context, x, shape, nhwc=True)
            elif channels_last and not free.nhwc:
                free = relayout(context, free, nhwc=True)
            return Lowered(free, *movement(context, before))
    if fold:  # a view of the graph input: reshape the float input, quantize as needed
        return Lowered(quantize_as(context, x, shape, channels_last), *movement(context, before))
    logical = relayout(context, x, nhwc=False)  # transpose to NCHW-contiguous order
    result = reshape(context, logical, shape, nhwc=False)
    if channels_last:
        result = relayout(context, result, nhwc=True)
    return Lowered(result, *movement(context, before))
