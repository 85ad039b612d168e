"""aten.conv2d → cortex_m_nn::conv2d or cortex_m_nn::depthwise_conv2d.

groups == in channels with one input channel per group (any channel multiplier ``out / in``)
is depthwise (``arm_depthwise_conv_wrapper_s8``, ``ch_mult``); every other ``groups`` is
cortex_m_nn::conv2d with the OHWI weight ``[Cout, KH, KW, Cin / groups]`` as PyTorch stores
it, which CMSIS-NN reads as ``groups = Cin / weight channels`` (``arm_convolve_s8``, on MVE,
DSP and scalar). Weights stay per output channel. Dilation is passed through to both.

Padding: numbers, ``'valid'`` (none) or ``'same'`` (``aten.conv2d.padding``; PyTorch allows it
at stride 1 only). CMSIS-NN pads the same on both sides: it takes the top/left pad and reads
past the bottom/right edge only as far as the output dims make it, and its fast paths (1x1,
MVE's 1xN, depthwise 3x3) assume their own bottom/right pads. So an asymmetric pad is never
folded into the convolution: ``'same'`` with an even ``dilation * (kernel - 1)`` is symmetric;
with an odd one (an even kernel) PyTorch pads one more at the end, and that one extra row or
column is a cortex_m_nn::pad (``arm_pad_s8``, with the input zero point) in front of a
convolution padded ``(k - 1) // 2`` on both sides. Likewise an explicit ``F.pad`` (e.g.
``(0, 1, 0, 1)`` in front of a stride-2 convolution, TF-SAME style) stays its own
cortex_m_nn::pad: one copy of the padded input, exact on every path.

aten.conv1d on ``[N, C, L]`` lowers onto the same operators as a convolution of height 1:
its input stored channels-last (NLC) is the NHWC tensor ``[N, 1, L, C]`` (``layout.as_image``),
its weight ``[O, I, K]`` becomes ``[O, I, 1, K]`` and its output stays NLC for the next one.
"""

from __future__ import annotations

import torch

from cortex_m_nn import scratch
from cortex_m_nn.passes.context import LoweringContext
from cortex_m_nn.passes.convolution import requantization, weight_bytes
from cortex_m_nn.passes.graph_values import QValue
from cortex_m_nn.passes.layout import (
    as_image,
    census,
    noting_transposes,
    only_reader,
    reshaped,
)
from cortex_m_nn.passes.refusals import LoweringRefused, Refusal
from cortex_m_nn.passes.registry import Lowered, Pattern, rule
from cortex_m_nn.quantizer.quantizer import aten

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
) -> tuple[str, str, torch.Tensor, list[int], int]:
    """(operator, CMSIS-NN function, kernel in its layout, extra arguments, scratch bytes)."""
    out_channels, in_channels = weight.shape[0], input_nhwc[3]
    if depthwise:
        kernel = weight.permute(1, 2, 3, 0)  # [1, KH, KW, C_out]
        scratch_bytes = scratch.depthwise_conv2d_scratch_bytes(
            context.target,
            input_nhwc,
            tuple(kernel.shape),
            output_nhwc,
            **common,
            depth_multiplier=out_channels // in_channels,
        )
        extra = [out_channels // in_channels]
        return "depthwise_conv2d", "arm_depthwise_conv_wrapper_s8", kernel, extra, scratch_bytes
    kernel = weight.permute(0, 2, 3, 1)  # OHWI
    scratch_bytes = scratch.conv2d_scratch_bytes(
        context.target, input_nhwc, tuple(kernel.shape), output_nhwc, **common
    )
    return "conv2d", "arm_convolve_wrapper_s8", kernel, [], scratch_bytes


def _padding(
    value: object, kernel: tuple[int, int], dilation: list[int], one_d: bool
) -> tuple[list[int], list[int]]:
    """(padding on both sides, the extra padding at the bottom/right) as [H, W]."""
    if value is None or value == "valid":
        return [0, 0], [0, 0]
    if value != "same":
        if isinstance(value, str):
            raise LoweringRefused(Refusal.STRING_PADDING, f"padding={value!r}")
        return _pair(value, "padding", one_d, 0), [0, 0]
    total = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
    return [t // 2 for t in total], [t % 2 for t in total]


def _pad_end(context: LoweringContext, x: QValue, extra: list[int]) -> QValue:
    """``x`` (NHWC) with ``extra`` [H, W] rows/columns of its zero point at the bottom/right."""
    n, c, h, w = x.shape
    node = context.call("pad", x.node, [0, 0, 0, 0], [0, *extra, 0], x.zero_point)
    return QValue(node, x.scale, x.zero_point, (n, c, h + extra[0], w + extra[1]), True)


@rule(aten.conv2d.default, aten.conv1d.default, aten.conv2d.padding, aten.conv1d.padding)
def lower_conv2d(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    one_d = node.target in _ONE_D
    args = list(node.args) + [None] * (7 - len(node.args))
    source, weight_node, bias_node, stride, padding, dilation, groups = args[:7]
    x = context.input_value(source)
    if len(x.shape) != (3 if one_d else 4):
        raise LoweringRefused(
            Refusal.CONV_INPUT_RANK,
            f"{'conv1d' if one_d else 'conv2d'} input of shape {list(x.shape)}",
        )
    before = census(context)
    x = as_image(context, x, fold=only_reader(pattern))
    stride = _pair(stride if stride is not None else 1, "stride", one_d, 1)
    dilation = _pair(dilation if dilation is not None else 1, "dilation", one_d, 1)
    groups = int(groups if groups is not None else 1)

    weight, weight_scales = context.quantized_constant(weight_node)
    if one_d:
        weight = weight.unsqueeze(2)  # [O, I, K] → [O, I, 1, K]
    out_channels, in_per_group, kernel_h, kernel_w = weight.shape
    padding, pad_end = _padding(padding, (kernel_h, kernel_w), dilation, one_d)
    if any(pad_end):
        x = _pad_end(context, x, pad_end)
    in_channels = x.shape[1]
    depthwise = groups > 1 and groups == in_channels and in_per_group == 1
    q = requantization(context, pattern, x.scale, weight_scales, bias_node, out_channels)
    n, _, out_h, out_w = (*pattern.shape[:2], 1, pattern.shape[2]) if one_d else pattern.shape
    output_nhwc = (n, out_h, out_w, out_channels)
    macs = n * out_h * out_w * out_channels * kernel_h * kernel_w * in_per_group
    common = dict(stride=stride, padding=padding, dilation=dilation)
    name, function, kernel, extra, scratch_bytes = _variant(
        context, x.stored_shape, weight, depthwise, output_nhwc, common
    )
    out = context.call(
        name,
        x.node,
        *q.constants(context, node.name, kernel),
        stride,
        padding,
        dilation,
        *extra,
        -x.zero_point,
        pattern.zero_point,
        q.act_min,
        q.act_max,
        scratch_bytes,
    )
    value = QValue(out, pattern.scale, pattern.zero_point, (n, out_channels, out_h, out_w), True)
    value = reshaped(context, value, pattern.shape)  # a 1-D convolution's [N, C, L], NLC
    function = noting_transposes(context, before, function)
    if any(pad_end):
        function = f"arm_pad_s8 then {function}"
    return Lowered(value, name, function, macs, weight_bytes(kernel, out_channels))
