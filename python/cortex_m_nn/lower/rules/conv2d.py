"""aten.conv2d → cortex_m_nn::conv2d or cortex_m_nn::depthwise_conv2d.

groups == in channels with one input channel per group (any channel multiplier ``out / in``)
is depthwise (``arm_depthwise_conv_wrapper_s8``, ``ch_mult``); every other ``groups`` is
cortex_m_nn::conv2d with the OHWI weight ``[Cout, KH, KW, Cin / groups]`` as PyTorch stores
it, which CMSIS-NN reads as ``groups = Cin / weight channels`` (``arm_convolve_s8``, on MVE,
DSP and scalar). Weights stay per output channel. Dilation is passed through to both.

Padding: numbers, ``'valid'`` (none) or ``'same'`` (``aten.conv2d.padding``; PyTorch allows it
at stride 1 only). CMSIS-NN takes the top/left pad and reads past the bottom/right edge as far
as the output dims make it; its kernels compute an end padded as its start or one more,
TensorFlow's SAME, which TFLM relies on, with two exceptions: the depthwise 3x3 path
(``arm_depthwise_conv_3x3_s8``, off MVE) pads each end by at most 1, and MVE's 1xN path
(``arm_convolve_1_x_n_s8``) only some layouts, so the conv2d kernel calls ``arm_convolve_s8``
for the others (``core.cmsis_nn.mve_one_by_n_inexact``). So ``'same'`` with an odd
``dilation * (kernel - 1)`` (PyTorch pads one more at the end) is one convolution with padding
``[top, left, bottom, right]``, and so is an ``F.pad`` of the spatial dims with the zero
point in front of a convolution only it feeds (``(0, 1, 0, 1)`` before a stride-2
convolution, TF-SAME style): the pad is folded into the convolution's padding when the sum
has that form and each end stays below the dilated kernel's extent (no output window wholly
in the padding: the 1x1 paths read none). Any other pad stays its own cortex_m_nn::pad
(``arm_pad_s8``), one copy of the padded input.

aten.conv1d on ``[N, C, L]`` lowers onto the same operators as a convolution of height 1:
its input stored channels-last (NLC) is the NHWC tensor ``[N, 1, L, C]`` (``layout.as_image``),
its weight ``[O, I, K]`` becomes ``[O, I, 1, K]`` and its output stays NLC for the next one.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from cortex_m_nn.core.cmsis_nn import WRAPPER, Case, cmsis_function
from cortex_m_nn.core.families import aten
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.core.target import Isa
from cortex_m_nn.lower import scratch
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.convolution import requantization, weight_bits, weight_bytes
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import (
    as_image,
    census,
    noting_transposes,
    only_reader,
    reshaped,
)
from cortex_m_nn.lower.records import REMOVED
from cortex_m_nn.lower.registry import Lowered, Pattern, rule
from cortex_m_nn.ops.library import operator as cortex_op

#: The 1-D overloads (numeric and string padding).
_ONE_D = (aten.conv1d.default, aten.conv1d.padding)


def _pair(value: object, name: str, one_d: bool, fill: int) -> list[int]:
    """A stride/padding/dilation as [H, W]; a 1-D convolution's as [fill, L]."""
    values = [int(v) for v in (value if isinstance(value, list | tuple) else [value])]
    if one_d:
        return [fill, values[0]]
    return values * 2 if len(values) == 1 else values


def _variant(
    context: LoweringContext,
    input_nhwc: tuple[int, ...],
    weight: torch.Tensor,
    depthwise: bool,
    output_nhwc: tuple[int, ...],
    common: dict[str, list[int]],
    int16: bool = False,
    int4: bool = False,
) -> tuple[str, str, torch.Tensor, list[int], int]:
    """(operator, CMSIS-NN function, kernel in its layout, extra arguments, scratch bytes);
    ``int16``: the operator's int16-activation case (``_s16`` functions); ``int4``: its
    int4-weight case (``_s4``; a 1xN convolution calls ``arm_convolve_s4`` itself)."""
    out_channels, in_channels = weight.shape[0], input_nhwc[3]
    case = Case.S16 if int16 else Case.S4 if int4 else Case.S8
    if depthwise:
        kernel = weight.permute(1, 2, 3, 0)  # [1, KH, KW, C_out]
        scratch_bytes = scratch.depthwise_conv2d_scratch_bytes(
            context.target,
            input_nhwc,
            tuple(kernel.shape),
            output_nhwc,
            **common,
            depth_multiplier=out_channels // in_channels,
            int16=int16,
            int4=int4,
        )
        extra = [out_channels // in_channels]
        mve_s4 = int4 and context.target.isa is Isa.MVE  # op_depthwise_conv2d.cpp, docs/int4.md
        function = cmsis_function("depthwise_conv2d", case, 1 if mve_s4 else 0)
        return "depthwise_conv2d", function, kernel, extra, scratch_bytes
    kernel = weight.permute(0, 2, 3, 1)  # OHWI
    shapes = (input_nhwc, tuple(kernel.shape), output_nhwc)
    scratch_bytes = scratch.conv2d_scratch_bytes(
        context.target, *shapes, **common, int16=int16, int4=int4
    )
    one_by_n = int4 and scratch.is_one_by_n(*shapes, **common)
    function = cmsis_function("conv2d", case, 1 if one_by_n else 0)
    return "conv2d", function, kernel, [], scratch_bytes


def _stored(kernel: torch.Tensor, depthwise: bool, int4: bool) -> torch.Tensor:
    """The kernel as the operator stores it: an int4 conv2d weight's rows merged, OHWI →
    ``[Cout, KH, KW * Cin]``, before packing (``ops/int4.py``)."""
    return kernel.flatten(2) if int4 and not depthwise else kernel


def _padding(value: object, kernel: tuple[int, int], dilation: list[int], one_d: bool) -> list[int]:
    """The convolution's padding as (top, left, bottom, right)."""
    if value is None or value == "valid":
        return [0, 0, 0, 0]
    if value != "same":
        if isinstance(value, str):
            raise LoweringRefused(Refusal.STRING_PADDING, f"padding={value!r}")
        return _pair(value, "padding", one_d, 0) * 2
    total = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
    return [t // 2 for t in total] + [t - t // 2 for t in total]


def _cmsis_padding(
    sides: list[int], kernel: tuple[int, int], dilation: list[int], three_by_three: bool
) -> bool:
    """Whether CMSIS-NN's kernels compute this padding: each end pads as its start or one more
    (TensorFlow's SAME), and less than the dilated kernel, so no output window lies wholly in
    the padding (the 1x1 paths read no padding at all); a depthwise 3x3 (``three_by_three``:
    multiplier 1, no dilation) pads each end by at most 1 (``arm_depthwise_conv_3x3_s8``).
    MVE's 1xN path computes only some of these; the kernel takes ``arm_convolve_s8`` for the
    others (``core.cmsis_nn.mve_one_by_n_inexact``)."""
    if three_by_three and max(sides[2:]) > 1 and sides[:2] != sides[2:]:
        return False
    pairs = zip(sides[:2], sides[2:], kernel, dilation, strict=True)
    return all(
        end == start or (end == start + 1 and end <= d * (k - 1)) for start, end, k, d in pairs
    )


def _schema_padding(sides: list[int]) -> list[int]:
    """``[h, w]`` when both ends pad as their starts, else ``[top, left, bottom, right]``."""
    return sides[:2] if sides[:2] == sides[2:] else sides


def _folded_pad(context: LoweringContext, x: QValue, pattern: Pattern) -> tuple[QValue, list[int]]:
    """``x`` and (top, left, bottom, right) when ``x`` is a cortex_m_nn::pad of the input's
    spatial dims with its zero point that only this convolution reads (TensorFlow's SAME as
    ``F.pad(x, (0, 1, 0, 1))`` in front of a stride-2 convolution), else ``x`` and zeros."""
    node = x.node
    none = (x, [0, 0, 0, 0])
    if not (node.op == "call_function" and node.target is cortex_op("pad") and x.nhwc):
        return none
    source, pre, post, value = node.args
    others = [0, 3] if len(x.shape) == 4 else [0, 2]  # not NHWC's H, W or NLC's L
    if value != x.zero_point or node.users or not only_reader(pattern):
        return none
    if any(pre[d] or post[d] for d in others):
        return none
    if len(x.shape) == 4:
        sides = [pre[1], pre[2], post[1], post[2]]
        n, c, h, w = x.shape
        logical: tuple[int, ...] = (n, c, h - sides[0] - sides[2], w - sides[1] - sides[3])
    else:
        sides = [0, pre[1], 0, post[1]]
        n, c, length = x.shape
        logical = (n, c, length - sides[1] - sides[3])
    return replace(x, node=source, shape=logical, nhwc=True), sides


def _fold(
    context: LoweringContext,
    x: QValue,
    pattern: Pattern,
    sides: list[int],
    kernel: tuple[int, int],
    dilation: list[int],
    three_by_three: bool,
) -> tuple[QValue, list[int]]:
    """(input, padding) with a preceding pad folded into the padding where CMSIS-NN computes
    the sum (:func:`_cmsis_padding`); its report row says so."""
    unpadded, extra = _folded_pad(context, x, pattern)
    total = [a + b for a, b in zip(sides, extra, strict=True)]
    if not any(extra) or not _cmsis_padding(total, kernel, dilation, three_by_three):
        return x, sides
    for record in context.records:
        if record.output_node == x.node.name:
            record.kernel = REMOVED
            record.cmsis_function = "(folded into the next convolution's padding)"
    context.graph.erase_node(x.node)
    return unpadded, total


def _check_dtype(x: QValue, pattern: Pattern, grouped: bool) -> bool:
    """Whether the int16 case applies (int16 in and out, not grouped unless depthwise:
    ``arm_convolve_s16`` has no groups); refused for an int16 value otherwise."""
    int16 = x.dtype is torch.int16
    if int16 != (pattern.dtype is torch.int16) or (int16 and grouped):
        raise LoweringRefused(
            Refusal.NOT_INT8, "an int16 convolution takes and gives int16, depthwise or ungrouped"
        )
    return int16


def _int4_weights(weight_node: object, refused: bool) -> bool:
    """Whether the weights are int4 (the int4 case); refused with int16 activations or groups
    (``refused``): the s4 kernels take int8 activations, depthwise or ungrouped."""
    int4 = weight_bits(weight_node) == 4
    if int4 and refused:
        raise LoweringRefused(
            Refusal.NOT_INT8, "int4 weights take int8 activations, depthwise or ungrouped"
        )
    return int4


@rule(aten.conv2d.default, aten.conv1d.default, aten.conv2d.padding, aten.conv1d.padding)
def lower_conv2d(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    one_d = node.target in _ONE_D
    args = list(node.args) + [None] * (7 - len(node.args))
    source, weight_node, bias_node, stride, padding, dilation, groups = args[:7]
    x = context.input_value(source, int16=True)
    if len(x.shape) != (3 if one_d else 4):
        raise LoweringRefused(
            Refusal.CONV_INPUT_RANK,
            f"{'conv1d' if one_d else 'conv2d'} input of shape {list(x.shape)}",
        )
    before = census(context)
    stride = _pair(stride if stride is not None else 1, "stride", one_d, 1)
    dilation = _pair(dilation if dilation is not None else 1, "dilation", one_d, 1)
    groups = int(groups if groups is not None else 1)
    weight, weight_scales = context.quantized_constant(weight_node)
    if one_d:
        weight = weight.unsqueeze(2)  # [O, I, K] → [O, I, 1, K]
    out_channels, in_per_group, kernel_h, kernel_w = weight.shape
    kernel = (kernel_h, kernel_w)
    in_channels = x.shape[1]  # a pad in front leaves the channels
    depthwise = groups > 1 and groups == in_channels and in_per_group == 1
    int16 = _check_dtype(x, pattern, groups > 1 and not depthwise)
    int4 = _int4_weights(weight_node, int16 or (groups > 1 and not depthwise))
    three_by_three = depthwise and kernel == (3, 3) and dilation == [1, 1]
    three_by_three = three_by_three and out_channels == in_channels and not (int16 or int4)
    sides = _padding(padding, kernel, dilation, one_d)
    x, sides = _fold(context, x, pattern, sides, kernel, dilation, three_by_three)
    x = as_image(context, x, fold=only_reader(pattern))
    assert _cmsis_padding(sides, kernel, dilation, three_by_three), f"PyTorch's {sides}"
    padding = _schema_padding(sides)
    q = requantization(context, pattern, x.scale, weight_scales, bias_node, out_channels)
    n, _, out_h, out_w = (*pattern.shape[:2], 1, pattern.shape[2]) if one_d else pattern.shape
    output_nhwc = (n, out_h, out_w, out_channels)
    macs = n * out_h * out_w * out_channels * kernel_h * kernel_w * in_per_group
    common = dict(stride=stride, padding=padding, dilation=dilation)
    name, function, kernel, extra, scratch_bytes = _variant(
        context, x.stored_shape, weight, depthwise, output_nhwc, common, int16, int4
    )
    out = context.call(
        name,
        x.node,
        *q.constants(context, node.name, _stored(kernel, depthwise, int4), int4),
        stride,
        padding,
        dilation,
        *extra,
        -x.zero_point,
        pattern.zero_point,
        q.act_min,
        q.act_max,
        WRAPPER,  # the path: plan.paths may choose another function for the small schedule
        scratch_bytes,
    )
    shape = (n, out_channels, out_h, out_w)
    value = QValue(out, pattern.scale, pattern.zero_point, shape, True, pattern.dtype)
    value = reshaped(context, value, pattern.shape)  # a 1-D convolution's [N, C, L], NLC
    function = noting_transposes(context, before, function)
    weights = weight_bytes(kernel, out_channels, 8 if int16 else 4, int4)
    return Lowered(value, name, function, macs, weights, int4_weights=int4)
