"""Layouts of int8 values and the transposes that change them.

A value is stored as its logical (PyTorch) tensor, or, for a 4-D activation with
``QValue.nhwc``, as the logical tensor permuted NCHW → NHWC. Conversions happen at the graph
boundary (folded into quantize/dequantize); inside the graph bytes move only where the model
itself reorders them (a permute, or a view across channels-last bytes).

Every rearrangement is decided on *positions*: for each element of the result, in stored
order, where it sits in the stored input. When that is the identity the result is a view.
Values produced by moving bytes remember their origin (the value before the first move and
the positions in it), so a later rearrangement that restores the origin's order is a view of
the origin and the transposes in between become dead code: ``flatten(2).transpose(1, 2)`` of
a channels-last feature map moves nothing. Otherwise :func:`permute` collapses the physical
permutation (size-1 dims dropped, dims that stay adjacent merged) and emits one
``cortex_m_nn::transpose`` of at most 4 dims — from the origin when one transpose of it gives
the result, so the transpose in between becomes dead code (attention's ``v`` split into heads
and transposed for the product moves once) — or, when the value comes straight from the input
quantize and nothing else reads it, quantizes again with the permutation folded in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import torch
from torch.fx import Node

from cortex_m_nn.core.families import aten
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue, channels_last_order
from cortex_m_nn.lower.registry import Pattern
from cortex_m_nn.ops.library import operator as cortex_op

#: Ops whose rules want (or convert to) channels-last input: a layout choice made for their
#: producer avoids a transpose.
CHANNELS_LAST_CONSUMERS = {
    aten.conv2d.default,
    aten.conv2d.padding,
    aten.max_pool2d.default,
    aten.avg_pool2d.default,
    aten.adaptive_avg_pool2d.default,
    aten.mean.dim,
    aten.upsample_nearest2d.vec,
    aten._upsample_nearest_exact2d.vec,
    aten.upsample_bilinear2d.vec,
}


def stored_order(rank: int, nhwc: bool) -> list[int]:
    """The permutation from the logical tensor to the stored one."""
    return channels_last_order(rank) if nhwc else list(range(rank))


def inverse(permutation: Sequence[int]) -> list[int]:
    result = [0] * len(permutation)
    for position, axis in enumerate(permutation):
        result[axis] = position
    return result


def collapse(shape: Sequence[int], permutation: Sequence[int]) -> tuple[list[int], list[int]]:
    """The smallest (shape, permutation) moving the same bytes as ``shape`` permuted.

    Size-1 dims are dropped and input dims that stay adjacent and in order in the output are
    merged; a result of 0 or 1 dims means no byte moves.
    """
    kept = [d for d in range(len(shape)) if shape[d] != 1]
    rank = {d: i for i, d in enumerate(kept)}
    sizes = [int(shape[d]) for d in kept]
    runs: list[list[int]] = []  # output order; each run is consecutive input dims
    for axis in (rank[d] for d in permutation if shape[d] != 1):
        if runs and runs[-1][-1] + 1 == axis:
            runs[-1].append(axis)
        else:
            runs.append([axis])
    by_input = sorted(range(len(runs)), key=lambda r: runs[r][0])
    position = {r: i for i, r in enumerate(by_input)}
    dims = [math.prod(sizes[a] for a in runs[r]) for r in by_input]
    return dims, [position[r] for r in range(len(runs))]


def as_strided(mapping: torch.Tensor) -> tuple[list[int], list[int], int] | None:
    """The fewest (sizes, strides, offset), outermost first, with ``mapping[i] == offset +
    Σ index_k · strides[k]`` for the row-major index of ``i`` in ``sizes``; None when no such
    affine map exists."""
    sizes: list[int] = []  # innermost first while found
    strides: list[int] = []
    rows = mapping
    while rows.numel() > 1:
        step = int(rows[1] - rows[0])
        expected = rows[0] + step * torch.arange(rows.numel(), dtype=rows.dtype)
        mismatch = (rows != expected).nonzero()
        run = int(mismatch[0, 0]) if len(mismatch) else rows.numel()
        if rows.numel() % run:
            return None
        sizes.append(run)
        strides.append(step)
        rows = rows[::run]
    sizes, strides = sizes[::-1] or [1], strides[::-1] or [1]
    offset = int(mapping[0])
    rebuilt = torch.full((), offset, dtype=torch.int64)
    for size, stride in zip(sizes, strides, strict=True):
        rebuilt = rebuilt.unsqueeze(-1) + stride * torch.arange(size, dtype=torch.int64)
    if not torch.equal(rebuilt.reshape(-1), mapping.to(torch.int64)):
        return None
    return sizes, strides, offset


def as_transpose(mapping: torch.Tensor) -> tuple[list[int], list[int]] | None:
    """The collapsed (dims, permutation) of one transpose whose output byte ``i`` is input
    byte ``mapping[i]``, or None when no single transpose moves bytes that way: an affine
    map (:func:`as_strided`) from offset 0 whose strides tile the input exactly."""
    found = as_strided(mapping)
    if found is None or found[2] != 0 or min(found[1]) <= 0:
        return None
    sizes, strides, _ = found  # output dims, outermost first, with their input strides
    by_stride = sorted(range(len(sizes)), key=lambda d: strides[d])  # innermost input first
    expected_stride = 1
    for d in by_stride:
        if strides[d] != expected_stride:
            return None
        expected_stride *= sizes[d]
    input_dims = by_stride[::-1]  # outermost input dim first
    dims = [sizes[d] for d in input_dims]
    return collapse(dims, [input_dims.index(d) for d in range(len(sizes))])


def positions(x: QValue) -> torch.Tensor:
    """The logical tensor of ``x`` holding each element's position in the stored bytes."""
    stored = torch.arange(math.prod(x.shape), dtype=torch.int64).view(x.stored_shape)
    return stored.permute(inverse(stored_order(len(x.shape), x.nhwc)))


def _stored(logical: torch.Tensor, nhwc: bool) -> torch.Tensor:
    return logical.permute(stored_order(logical.dim(), nhwc)).reshape(-1)


def _free_source(context: LoweringContext, x: QValue, stored: torch.Tensor) -> QValue | None:
    """A value whose stored bytes are exactly ``stored`` (positions in ``x``): ``x`` or its
    origin, or None when bytes must move."""
    identity = torch.arange(stored.numel(), dtype=torch.int64)
    if torch.equal(stored, identity):
        return x
    origin = context.origins.get(x.node)
    if origin is None or math.prod(origin[0].shape) != stored.numel():  # a slice of it
        return None
    if torch.equal(origin[1][stored], identity):
        return origin[0]
    return None


def _remember(context: LoweringContext, x: QValue, node: Node, stored: torch.Tensor) -> None:
    """Record ``node``'s origin: ``x``'s origin if it has one, else ``x`` itself."""
    origins = context.origins
    if x.node in origins:
        source, mapping = origins[x.node]
        origins[node] = (source, mapping[stored])
    else:
        origins[node] = (x, stored)


def view(context: LoweringContext, node: Node, before: Sequence[int], after: Sequence[int]) -> Node:
    """``node`` viewed as ``after`` (no node when the shape does not change)."""
    return node if list(before) == list(after) else context.view(node, tuple(after))


def _free_view(
    context: LoweringContext, x: QValue, result: QValue, stored: torch.Tensor
) -> QValue | None:
    """``result`` as a view of ``x`` or of its origin, if no byte has to move."""
    source = _free_source(context, x, stored)
    if source is None:
        return None
    node = context.view(source.node, result.stored_shape)  # one lowered node per value
    if source is x and x.node in context.origins:
        _remember(context, x, node, stored)
    return replace(result, node=node)


def is_free(context: LoweringContext, x: QValue, permutation: Sequence[int], nhwc: bool) -> bool:
    """Whether ``x`` permuted into the given output layout needs no transpose."""
    stored = _stored(positions(x).permute(list(permutation)), nhwc)
    return _free_source(context, x, stored) is not None


def only_reader(pattern: Pattern, dequantize: object = None) -> bool:
    """Whether the pattern's op is the one reader of a quantized input (``dequantize``, by
    default its first argument)."""
    dequantize = pattern.op.args[0] if dequantize is None else dequantize
    if not isinstance(dequantize, Node) or not isinstance(dequantize.args[0], Node):
        return False
    readers = [user for d in dequantize.args[0].users for user in d.users]
    return readers == [pattern.op]


def moved_input(
    context: LoweringContext, pattern: Pattern, name: str, int16: bool = False
) -> QValue:
    """The int8 (``int16``: or int16) input of an op that only moves bytes (``name``: "a
    view", "pad"), which can fuse no activation and must keep the input's quantization."""
    x = context.input_value(pattern.op.args[0], int16=int16)
    if pattern.activation is not None:
        raise LoweringRefused(Refusal.ACTIVATION_AFTER, f"activation after {name}")
    if (x.scale, x.zero_point, x.dtype) != (pattern.scale, pattern.zero_point, pattern.dtype):
        raise LoweringRefused(
            Refusal.QPARAMS_CHANGE,
            f"{name.removeprefix('a ')} with different input and output quantization",
        )
    return x


def boundary_quantize(x: QValue) -> bool:
    """Whether ``x`` is the output of an input (boundary) quantize."""
    return x.node.op == "call_function" and x.node.target is cortex_op("quantize")


def quantize_as(context: LoweringContext, x: QValue, shape: Sequence[int], nhwc: bool) -> QValue:
    """The boundary quantize producing ``x``, emitted again for its float input reshaped to
    ``shape`` and stored ``nhwc`` or not: a view of the input folded into the quantize."""
    source, scale, zero_point, _, dtype = x.node.args
    reshaped = context.graph.call_function(aten.reshape.default, (source, list(shape)))
    order = channels_last_order(len(shape)) if nhwc else []
    node = context.call("quantize", reshaped, scale, zero_point, order, dtype)
    return replace(x, node=node, shape=tuple(shape), nhwc=nhwc)


def permute(
    context: LoweringContext,
    x: QValue,
    permutation: Sequence[int],
    nhwc: bool,
    fold: bool = False,
) -> QValue:
    """``x`` permuted (logically) and stored ``nhwc`` or not.

    With ``fold`` (the caller is the only reader of ``x``) a boundary quantize producing ``x``
    is emitted again with the permutation folded in, instead of a transpose after it.
    """
    shape = tuple(x.shape[d] for d in permutation)
    result = replace(x, shape=shape, nhwc=nhwc)
    stored = _stored(positions(x).permute(list(permutation)), nhwc)
    free = _free_view(context, x, result, stored)
    if free is not None:
        return free
    stored_in = inverse(stored_order(len(x.shape), x.nhwc))
    stored_out = stored_order(len(shape), nhwc)
    physical = [stored_in[permutation[stored_out[i]]] for i in range(len(shape))]
    if fold and boundary_quantize(x):
        source, scale, zero_point, before, dtype = x.node.args
        before = list(before) or list(range(len(physical)))
        folded = [before[p] for p in physical]
        folded = [] if folded == sorted(folded) else folded  # identity: no permutation
        node = context.call("quantize", source, scale, zero_point, folded, dtype)
        return replace(result, node=node)
    source, (dims, collapsed) = x, collapse(x.stored_shape, physical)
    origin = context.origins.get(x.node)
    if origin is not None:  # one transpose from the origin instead of a second one
        found = as_transpose(origin[1][stored])
        if found is not None and len(found[1]) <= 4:
            source, (dims, collapsed) = origin[0], found
    if len(collapsed) > 4:
        raise LoweringRefused(
            Refusal.TRANSPOSE_DIMS,
            f"transpose moving {len(collapsed)} independent dims {dims} (CMSIS-NN: at most 4)",
        )
    source_node = view(context, source.node, source.stored_shape, dims)
    moved = context.call("transpose", source_node, collapsed)
    node = view(context, moved, [dims[d] for d in collapsed], result.stored_shape)
    _remember(context, x, node, stored)
    return replace(result, node=node)


def reshape(context: LoweringContext, x: QValue, shape: Sequence[int], nhwc: bool) -> QValue | None:
    """``x`` viewed as ``shape`` (stored ``nhwc`` or not) if no byte has to move, else None."""
    result = replace(x, shape=tuple(shape), nhwc=nhwc)
    stored = _stored(positions(x).reshape(list(shape)), nhwc)
    return _free_view(context, x, result, stored)


def relayout(context: LoweringContext, x: QValue, nhwc: bool, fold: bool = False) -> QValue:
    """``x`` stored channels-last (``nhwc``) or in logical order, transposed if needed
    (``fold``: see :func:`permute`)."""
    if x.nhwc == nhwc:
        return x
    done = context.relayouts
    key = (x.node, nhwc)
    if key not in done or done[key].shape != x.shape:
        done[key] = permute(context, x, list(range(len(x.shape))), nhwc, fold)
    return done[key]


def census(context: LoweringContext) -> tuple[int, int]:
    """(transposes, quantizes) in the lowered graph so far, for :func:`movement`."""
    targets = [node.target for node in context.graph.nodes]
    return targets.count(cortex_op("transpose")), targets.count(cortex_op("quantize"))


#: What the report names a transpose of each dtype (CMSIS-NN has no s16 transpose: our loop).
TRANSPOSE_FUNCTIONS = {torch.int8: "arm_transpose_s8", torch.int16: "(int16 transpose loop)"}


def movement(
    context: LoweringContext, before: tuple[int, int], dtype: torch.dtype = torch.int8
) -> tuple[str, str]:
    """(kernel, CMSIS-NN function) for the report: what a rule emitted since ``before``."""
    transposes, quantizes = census(context)
    if transposes > before[0]:
        return "transpose", TRANSPOSE_FUNCTIONS[dtype]
    if quantizes > before[1]:
        return "view", "(folded into the input quantize)"
    return "view", "(view)"


def noting_transposes(
    context: LoweringContext,
    before: tuple[int, int],
    function: str,
    dtype: torch.dtype = torch.int8,
) -> str:
    """The report's CMSIS-NN function of a rule that may have transposed an input first."""
    if census(context)[0] > before[0]:
        return f"{function} after {TRANSPOSE_FUNCTIONS[dtype]}"
    return function


def consumers(pattern: Pattern) -> list[Node]:
    """The source-graph ops reading this pattern's quantized output."""
    last = pattern.activation or pattern.op
    return [
        user
        for quantize in last.users
        for dequantize in quantize.users
        for user in dequantize.users
    ]


#: The 1-D ops that read a 3-D ``[N, C, L]`` channels-last (NLC, see :func:`as_image`).
CHANNELS_LAST_CONSUMERS_1D = {aten.conv1d.default, aten.conv1d.padding}
CHANNELS_LAST_CONSUMERS_1D |= {aten.conv_transpose1d.default, aten.upsample_nearest1d.vec}
CHANNELS_LAST_CONSUMERS_1D |= {aten._upsample_nearest_exact1d.vec, aten.upsample_linear1d.vec}


def wants_channels_last(pattern: Pattern, rank: int = 4) -> bool:
    """Whether some consumer of the pattern's ``rank``-D output (4: NCHW, 3: NCL) works on
    channels-last tensors."""
    readers = CHANNELS_LAST_CONSUMERS if rank == 4 else CHANNELS_LAST_CONSUMERS_1D
    return any(user.op == "call_function" and user.target in readers for user in consumers(pattern))


def as_image(context: LoweringContext, x: QValue, fold: bool = False) -> QValue:
    """``x`` as a 4-D channels-last value for CMSIS-NN's 2-D kernels (``fold``: see
    :func:`permute`).

    A 3-D ``[N, C, L]`` becomes ``[N, C, 1, L]``: stored ``[N, 1, L, C]``, the bytes of the 3-D
    value stored channels-last (NLC), so 1-D convolutions and pools run as 2-D ones of height 1.
    """
    if len(x.shape) not in (3, 4):
        raise LoweringRefused(
            Refusal.IMAGE_RANK, f"a {len(x.shape)}-D input; convolutions and pools take 3-D or 4-D"
        )
    x = relayout(context, x, nhwc=True, fold=fold)
    if len(x.shape) == 4:
        return x
    n, channels, length = x.shape
    image = reshape(context, x, (n, channels, 1, length), nhwc=True)
    assert image is not None, "NLC is NHWC with H = 1"
    return image


def reshaped(context: LoweringContext, x: QValue, shape: Sequence[int]) -> QValue:
    """``x`` viewed as ``shape`` where no byte moves, channels-last if possible (a 2-D kernel's
    output as the 1-D op's ``[N, C, L]``, or a pool's 1×1 output as ``[N, C]``)."""
    if tuple(shape) == x.shape:
        return x
    for nhwc in (True, False) if len(shape) in (3, 4) else (False,):
        free = reshape(context, x, shape, nhwc)
        if free is not None:
            return free
    raise LoweringRefused(
        Refusal.NOT_A_VIEW, f"output {list(x.shape)} is not a view of {list(shape)}"
    )
