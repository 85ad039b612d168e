"""permute, transpose, t, numpy_T, mT, swapaxes on int8 or int16 tensors → cortex_m_nn::transpose.

The logical permutation is composed with the input's and output's storage orders; when the
stored bytes need not move (e.g. ``permute(0, 2, 3, 1)`` of a tensor held channels-last) no
operator is emitted, and a permute of the graph input is folded into the input quantize.
A 4-D result is stored channels-last when a convolution or pool reads it, else in whichever
layout is free, else like the input. A permutation moving more than four dims after
collapsing (more than ``arm_transpose_s8`` takes) is one ``cortex_m_nn::strided_copy``
(int8 only: an int16 one is refused).
"""

from __future__ import annotations

import torch
from torch.fx import Node

from cortex_m_nn.core.families import TRANSPOSES, aten
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.gather import gather, gathered
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import (
    _stored,
    census,
    is_free,
    moved_input,
    movement,
    only_reader,
    permute,
    positions,
    wants_channels_last,
)
from cortex_m_nn.lower.registry import Lowered, Pattern, rule


def logical_permutation(node: Node, rank: int) -> list[int]:
    """The permutation a transposing ATen op applies to a ``rank``-D tensor."""
    identity = list(range(rank))
    target = node.target
    if target is aten.permute.default:
        permutation = [int(d) % rank for d in node.args[1]]
        if sorted(permutation) != identity:
            raise LoweringRefused(
                Refusal.NOT_A_PERMUTATION, f"permute {list(node.args[1])} is not a permutation"
            )
        return permutation
    if target is aten.numpy_T.default:
        return identity[::-1]
    if target is aten.t.default:
        first, second = (0, 1) if rank == 2 else (0, 0)
    elif target is aten.mT.default:
        first, second = rank - 2, rank - 1
    else:
        first, second = (int(d) % rank for d in node.args[1:3])
    identity[first], identity[second] = identity[second], identity[first]
    return identity


@rule(*TRANSPOSES)
def lower_transpose(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = moved_input(context, pattern, "a transpose", int16=True)
    int16 = x.dtype is torch.int16
    permutation = logical_permutation(pattern.op, len(x.shape))
    layouts = (True, False) if len(permutation) == 4 else (False,)
    free = [nhwc for nhwc in layouts if is_free(context, x, permutation, nhwc)]
    if len(permutation) == 4 and wants_channels_last(pattern):
        nhwc = True  # a convolution or pool reads it
    elif free:
        nhwc = free[0]
    else:
        nhwc = len(permutation) == 4 and x.nhwc
    before = census(context)
    result = QValue(x.node, x.scale, x.zero_point, tuple(pattern.shape), nhwc, x.dtype)
    stored = _stored(positions(x).permute(permutation), nhwc)
    # a slice of a slice's origin: one strided copy of the origin (int8 only)
    if gathered(context, x) and not int16:
        return Lowered(*gather(context, x, result, stored))
    try:
        value = permute(context, x, permutation, nhwc, fold=only_reader(pattern))
    except LoweringRefused as refused:  # more than 4 dims move: one strided copy instead
        if refused.kind is not Refusal.TRANSPOSE_DIMS:
            raise
        if int16:
            raise LoweringRefused(
                Refusal.NOT_INT8, f"{refused}; the strided copy instead is int8 only"
            ) from refused
        return Lowered(*gather(context, x, result, stored))
    return Lowered(value, *movement(context, before, x.dtype))
