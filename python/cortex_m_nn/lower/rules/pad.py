"""aten.pad (constant mode) and aten.constant_pad_nd on int8 tensors → cortex_m_nn::pad.

The output shares the input's scale and zero point. The shared observer sees the padded
tensor, so the pad constant lies inside the quantized range; it is quantized exactly as PT2E
quantizes every element of the padded tensor (round half to even), so the result equals the
PT2E reference bit for bit: no constant is refused for rounding. Non-finite constants
(``-inf`` before a max pool) have no scale at all: the quantizer leaves such pads in float,
reported as a fallback, and NaN is refused here too. Padding is applied in the input's
storage order (channels-last stays channels-last); tensors above 4-D are collapsed by folding
unpadded inner dims into their outer neighbour.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from cortex_m_nn.core.families import aten
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import quantize_value
from cortex_m_nn.lower.layout import (
    moved_input,
    relayout,
    stored_order,
    view,
    wants_channels_last,
)
from cortex_m_nn.lower.registry import Lowered, Pattern, rule


def _collapse(
    shape: list[int], pre: list[int], post: list[int]
) -> tuple[list[int], list[int], list[int]]:
    """Fold each unpadded dim into the dim before it (pads scale by its size)."""
    dims, before, after = [shape[0]], [pre[0]], [post[0]]
    for size, low, high in zip(shape[1:], pre[1:], post[1:], strict=True):
        if low == high == 0:
            dims[-1], before[-1], after[-1] = dims[-1] * size, before[-1] * size, after[-1] * size
        else:
            dims.append(size), before.append(low), after.append(high)
    return dims, before, after


@rule(aten.constant_pad_nd.default, aten.pad.default)
def lower_pad(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    x = moved_input(context, pattern, "pad", int16=True)
    pads = [int(p) for p in node.args[1]]
    if node.target is aten.pad.default:
        mode = node.args[2] if len(node.args) > 2 else node.kwargs.get("mode", "constant")
        if mode != "constant":
            raise LoweringRefused(
                Refusal.PAD_MODE, f"pad mode {mode!r}: only constant padding has a kernel"
            )
        value = node.args[3] if len(node.args) > 3 else node.kwargs.get("value")
    else:
        value = node.args[2] if len(node.args) > 2 else node.kwargs.get("value", 0)
    value = 0.0 if value is None else float(value)
    if not math.isfinite(value):
        raise LoweringRefused(
            Refusal.PAD_VALUE, f"pad value {value} has no int8 value; pad with a finite one"
        )
    if min(pads, default=0) < 0:
        raise LoweringRefused(
            Refusal.NEGATIVE_PADDING, f"negative padding {pads} crops; slice the tensor instead"
        )
    rank = len(x.shape)
    if rank in (3, 4) and wants_channels_last(pattern, rank):
        x = relayout(context, x, nhwc=True)  # pad where the convolution or pool reads it
    if len(pads) % 2 or len(pads) // 2 > rank:
        raise LoweringRefused(Refusal.PAD_RANK, f"padding {pads} for a {rank}-D tensor")
    pre, post = [0] * rank, [0] * rank
    for i in range(len(pads) // 2):  # pairs run from the last dim backwards
        pre[rank - 1 - i], post[rank - 1 - i] = pads[2 * i], pads[2 * i + 1]
    order = stored_order(rank, x.nhwc)
    shape = list(x.stored_shape)
    pre, post = [pre[d] for d in order], [post[d] for d in order]
    result = replace(x, shape=pattern.shape)
    if rank > 4:
        shape, pre, post = _collapse(shape, pre, post)
        if len(shape) > 4:
            raise LoweringRefused(
                Refusal.PAD_DIMS, f"padding {len(shape)} separate dims (arm_pad_s8: at most 4)"
            )
    pad_value = quantize_value(value, x.scale, x.zero_point, x.dtype)
    source = view(context, x.node, x.stored_shape, shape)
    out = context.call("pad", source, pre, post, pad_value)
    padded = [p + d + q for p, d, q in zip(pre, shape, post, strict=True)]
    node_out = view(context, out, padded, result.stored_shape)
    value_out = replace(result, node=node_out)
    return Lowered(value_out, "pad", "(int16 pad)" if x.dtype is torch.int16 else "arm_pad_s8")
