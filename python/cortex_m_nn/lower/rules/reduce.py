"""sum / mean / amax / amin over any dims → cortex_m_nn::reduce (our own kernel).

A mean over H and W of a 4-D tensor (or L of a 3-D one) stays the average pool
(``rules.pooling``, CMSIS-NN's ``arm_avgpool_s8``); every other mean comes here. The reduced
dims are mapped to the input's stored order (channels-last for 3-D and 4-D activations, so no
byte moves first), size-1 dims are dropped and neighbouring dims reduced alike are merged: the
kernel sees the stored bytes as at most four dims. Its output keeps the reduced dims as size
1 and is viewed as the op's result (``keepdim`` or not) without moving bytes.

A sum gets its own observed output quantization and a mean shares its input's (the quantizer
annotates it as a pool); both requantize ``input_scale / (count * output_scale)`` (count 1 for
a sum). amax/amin share their input's quantization: no arithmetic at all.
"""

from __future__ import annotations

import math

from torch.fx import Node

from cortex_m_nn.core.families import aten
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue, channels_last_order
from cortex_m_nn.lower.layout import reshaped
from cortex_m_nn.lower.registry import Lowered, Pattern, rule
from cortex_m_nn.ops.reduce import MAX, MAX_RANK, MIN, SUM, sum_parameters

#: op → (kind, whether it divides by the count)
KINDS = {
    aten.sum.dim_IntList: (SUM, False),
    aten.sum.default: (SUM, False),
    aten.mean.dim: (SUM, True),
    aten.mean.default: (SUM, True),
    aten.amax.default: (MAX, False),
    aten.amin.default: (MIN, False),
}


def _dims(node: Node, rank: int) -> list[int]:
    """The logical dims reduced, sorted (none given: all of them)."""
    if node.target in (aten.sum.default, aten.mean.default):
        dtype = node.args[1] if len(node.args) > 1 else node.kwargs.get("dtype")
        dims = None
    else:
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        dtype = node.args[3] if len(node.args) > 3 else node.kwargs.get("dtype")
    if dtype is not None:
        raise LoweringRefused(Refusal.REDUCTION, f"{node.target} with dtype={dtype}")
    if dims is None or list(dims) == []:
        return list(range(rank))
    return sorted({int(d) % rank for d in dims})


def collapsed(stored: list[int], reduced: list[bool]) -> tuple[list[int], list[int]]:
    """(shape, reduced dims) of the stored bytes: size-1 dims dropped, neighbours merged."""
    pairs = [(size, flag) for size, flag in zip(stored, reduced, strict=True) if size != 1]
    if not any(flag for _, flag in pairs):
        pairs.append((1, True))  # nothing to add up: a one-element reduction still requantizes
    shape: list[int] = []
    flags: list[bool] = []
    for size, flag in pairs:
        if flags and flags[-1] == flag:
            shape[-1] *= size
        else:
            shape.append(size)
            flags.append(flag)
    return shape, [d for d, flag in enumerate(flags) if flag]


def _integers(x: QValue, pattern: Pattern, kind: int, count: int) -> list[int]:
    """input_offset, output_offset, output_multiplier, output_shift."""
    if kind != SUM:
        if (x.scale, x.zero_point) != (pattern.scale, pattern.zero_point):
            raise LoweringRefused(
                Refusal.QPARAMS_CHANGE, "amax/amin cannot requantize: quantize it like its input"
            )
        return [0, 0, 0, 0]
    multiplier, shift = sum_parameters(x.scale, pattern.scale, count)
    return [-x.zero_point, pattern.zero_point, multiplier, shift]


def lower_reduction(context: LoweringContext, pattern: Pattern) -> Lowered:
    """The op of ``pattern`` (one of :data:`KINDS`) as one cortex_m_nn::reduce."""
    if pattern.activation is not None:
        raise LoweringRefused(Refusal.ACTIVATION_AFTER, "a reduction has no activation range")
    x = context.input_value(pattern.op.args[0])
    rank = len(x.shape)
    kind, divides = KINDS[pattern.op.target]
    dims = _dims(pattern.op, rank) if rank else []
    order = channels_last_order(rank) if x.nhwc else list(range(rank))
    stored = [x.shape[d] for d in order]
    shape, reduced = collapsed(stored, [d in dims for d in order])
    if len(shape) > MAX_RANK:
        raise LoweringRefused(
            Refusal.REDUCTION, f"reducing dims {dims} of {list(x.shape)} needs {len(shape)} dims"
        )
    count = math.prod(x.shape[d] for d in dims) if divides else 1
    source = context.view(x.node, tuple(shape)) if tuple(shape) != x.stored_shape else x.node
    out = context.call("reduce", source, reduced, kind, *_integers(x, pattern, kind, count))
    kept = tuple(1 if d in dims else size for d, size in enumerate(x.shape))
    stored_out = tuple(kept[d] for d in order)
    out = (
        context.view(out, stored_out)
        if stored_out != tuple(1 if d in reduced else s for d, s in enumerate(shape))
        else out
    )
    value = reshaped(
        context, QValue(out, pattern.scale, pattern.zero_point, kept, x.nhwc), pattern.shape
    )
    macs = math.prod(x.shape) if kind == SUM else 0
    return Lowered(value, "reduce", "(own kernel: int8 reduction)", macs)


@rule(
    aten.sum.dim_IntList, aten.sum.default, aten.mean.default, aten.amax.default, aten.amin.default
)
def lower_reduce(context: LoweringContext, pattern: Pattern) -> Lowered:
    return lower_reduction(context, pattern)
