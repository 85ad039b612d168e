"""Data movement decided on positions: a view, one transpose, or one strided copy.

A rule gives the positions, in the stored input, of every element of the result in stored
order (:func:`cortex_m_nn.lower.layout.positions` with the model's op applied to it). When
that is the identity the result is a view. Otherwise the bytes move once: by
``cortex_m_nn::transpose`` when the positions are a permutation of at most four collapsed
dims, else by ``cortex_m_nn::strided_copy`` when they are affine in the output index (steps,
stride-0 broadcasts, reversals). Like :func:`~cortex_m_nn.lower.layout.permute`, a value that
was itself moved is read from its origin when that gives the result in one move, so the move
in between becomes dead code.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import (
    _free_view,
    _remember,
    _stored,
    as_strided,
    as_transpose,
    inverse,
    stored_order,
    view,
)
from cortex_m_nn.ops.strided_copy import MAX_DIMS

#: (value, kernel, CMSIS-NN function) of a gather, for the rule's ``Lowered``.
Gathered = tuple[QValue, str, str]


def _transposed(
    context: LoweringContext, source: QValue, mapping: torch.Tensor, result: QValue
) -> QValue | None:
    """``result`` as one transpose of ``source``, if the positions are one."""
    if mapping.numel() != math.prod(source.shape):
        return None
    found = as_transpose(mapping)
    if found is None or not 2 <= len(found[1]) <= 4:
        return None
    dims, permutation = found
    moved = context.call(
        "transpose", view(context, source.node, source.stored_shape, dims), permutation
    )
    node = view(context, moved, [dims[d] for d in permutation], result.stored_shape)
    return replace(result, node=node)


def _copied(
    context: LoweringContext, source: QValue, mapping: torch.Tensor, result: QValue
) -> QValue | None:
    """``result`` as one strided copy of ``source``, if the positions are affine."""
    found = as_strided(mapping)
    if found is None or len(found[0]) > MAX_DIMS:
        return None
    sizes, strides, offset = found
    flat = view(context, source.node, source.stored_shape, [math.prod(source.shape)])
    copied = context.call("strided_copy", flat, sizes, strides, offset)
    return replace(result, node=view(context, copied, sizes, result.stored_shape))


def gathered(context: LoweringContext, x: QValue) -> bool:
    """Whether ``x`` was made from its origin by more than a transpose (a slice, a flip):
    then a strided copy of the origin may give a further move of ``x`` at once."""
    origin = context.origins.get(x.node)
    if origin is None:
        return False
    return origin[1].numel() != math.prod(origin[0].shape) or as_transpose(origin[1]) is None


def free_view(
    context: LoweringContext, x: QValue, result: QValue, stored: torch.Tensor
) -> QValue | None:
    """``result`` as a view of ``x`` (or of its origin) if its bytes are those at ``stored``
    as they lie, else None."""
    if stored.numel() != math.prod(x.shape):
        return None
    return _free_view(context, x, result, stored)


def gather(context: LoweringContext, x: QValue, result: QValue, stored: torch.Tensor) -> Gathered:
    """``result`` (shape and layout; its node is ignored) made of the bytes of ``x`` at
    ``stored`` (positions in the stored ``x``, in the result's stored order)."""
    free = free_view(context, x, result, stored)
    if free is not None:
        return free, "view", "(view)"
    candidates = [(x, stored)]
    origin = context.origins.get(x.node)
    if origin is not None:  # read from the origin: the move that made x may become dead
        candidates.insert(0, (origin[0], origin[1][stored]))
    for source, mapping in candidates:
        for make, kernel, function in (
            (_transposed, "transpose", "arm_transpose_s8"),
            (_copied, "strided_copy", "(memcpy runs)"),
        ):
            value = make(context, source, mapping, result)
            if value is not None:
                _remember(context, x, value.node, stored)
                return value, kernel, function
    raise LoweringRefused(
        Refusal.NOT_STRIDED,
        f"moving {list(x.shape)} into {list(result.shape)} is no view, transpose or strided copy",
    )


def gathered_concat(
    context: LoweringContext, inputs: list[QValue], result: QValue, dim: int
) -> Gathered | None:
    """``cat(inputs, dim)`` as one move of the value they were all gathered from (slices of
    one tensor put back together: a view, a transpose or one strided copy), else None."""
    origins = [context.origins.get(x.node) for x in inputs]
    if any(o is None for o in origins) or len({o[0].node for o in origins}) != 1:
        return None
    logical = []
    for x, (_, mapping) in zip(inputs, origins, strict=True):
        order = stored_order(len(x.shape), x.nhwc)
        logical.append(mapping.view(x.stored_shape).permute(inverse(order)))
    origin = origins[0][0]
    try:
        return gather(context, origin, result, _stored(torch.cat(logical, dim), result.nhwc))
    except LoweringRefused:
        return None
