"""slice, narrow, select, expand, repeat, flip, pixel_shuffle, pixel_unshuffle, unflatten and
movedim on int8 tensors: a view, one ``cortex_m_nn::transpose`` or one
``cortex_m_nn::strided_copy`` (``lower/gather``).

The model's own op is applied to the positions of the input's stored bytes, which gives,
for every element of the result, where it is stored in the input: whatever the op and the
input's layout, the result is exactly those bytes. ``split``, ``chunk``, ``unbind``, ``stack``
and ``roll`` arrive here as slices, selects and concatenations (``quantize/decompose``).
A 4-D result is stored in a layout where it is a view if there is one; otherwise
channels-last when the input is or a convolution or pool reads it.
"""

from __future__ import annotations

import torch

from cortex_m_nn.core.families import MOVEMENT
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.gather import free_view, gather
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import (
    _stored,
    census,
    moved_input,
    movement,
    positions,
    relayout,
    wants_channels_last,
)
from cortex_m_nn.lower.registry import Lowered, Pattern, rule


def moved_positions(pattern: Pattern, x: QValue) -> torch.Tensor:
    """The logical result of the pattern's op, holding each element's stored input position."""
    node = pattern.op
    try:
        logical = node.target(positions(x), *node.args[1:], **node.kwargs)
    except (RuntimeError, TypeError, ValueError) as error:
        raise LoweringRefused(Refusal.NOT_STRIDED, f"cannot follow the op: {error}") from error
    if tuple(logical.shape) != tuple(pattern.shape):
        raise LoweringRefused(
            Refusal.NOT_STRIDED, f"result {list(logical.shape)}, expected {list(pattern.shape)}"
        )
    return logical


@rule(*MOVEMENT)
def lower_movement(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = moved_input(context, pattern, "a copy")
    logical = moved_positions(pattern, x)
    shape = tuple(pattern.shape)
    channels_last = len(shape) == 4 and wants_channels_last(pattern)
    before = census(context)
    for nhwc in (True, False) if len(shape) == 4 else (False,):
        result = QValue(x.node, x.scale, x.zero_point, shape, nhwc)
        free = free_view(context, x, result, _stored(logical, nhwc))
        if free is not None:  # no byte moves; a convolution or pool reads channels-last
            free = relayout(context, free, nhwc=True) if channels_last else free
            return Lowered(free, *movement(context, before))
    nhwc = len(shape) == 4 and (x.nhwc or channels_last)
    result = QValue(x.node, x.scale, x.zero_point, shape, nhwc)
    return Lowered(*gather(context, x, result, _stored(logical, nhwc)))
