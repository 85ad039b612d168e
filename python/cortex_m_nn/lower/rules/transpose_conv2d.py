"""aten.conv_transpose2d → cortex_m_nn::transpose_conv2d (arm_transpose_conv_wrapper_s8).

aten.conv_transpose1d on ``[N, C, L]`` lowers onto the same operator as a transposed
convolution of height 1, as conv1d does onto conv2d: its input stored channels-last (NLC) is the
NHWC tensor ``[N, 1, L, C]`` (``layout.as_image``), its weight ``[Cin, Cout, K]`` becomes
``[Cin, Cout, 1, K]``, stride, padding and output padding ``[1, s]``, ``[0, p]``, ``[0, op]``,
and its output stays NLC for the next 1-D op.
"""

from __future__ import annotations

import torch

from cortex_m_nn.core.families import aten
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower import scratch
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.convolution import requantization, weight_bytes
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import as_image, only_reader, reshaped
from cortex_m_nn.lower.registry import Lowered, Pattern, rule
from cortex_m_nn.ops.transpose_conv2d import output_size, unsupported_reason

#: aten.conv_transpose2d.input's arguments after input and weight, with their defaults.
_DEFAULTS = (("bias", None), ("stride", 1), ("padding", 0), ("output_padding", 0))
_MORE = (("groups", 1), ("dilation", 1))


def _pair(value: object, one_d: bool = False, fill: int = 0) -> list[int]:
    """An (h, w) argument; a 1-D one's as [fill, L]."""
    values = list(value) if isinstance(value, list | tuple) else [value]
    if one_d:
        return [fill, int(values[0])]
    return [int(v) for v in (values * 2 if len(values) == 1 else values)]


def _arguments(node: torch.fx.Node) -> dict[str, object]:
    names = [name for name, _ in _DEFAULTS + _MORE]
    values = dict(_DEFAULTS + _MORE)
    values.update(zip(names, node.args[2:], strict=False))
    values.update({k: v for k, v in node.kwargs.items() if k in values})
    return values


def _geometry(arguments: dict[str, object], one_d: bool) -> tuple[list[int], list[int], list[int]]:
    """(stride, padding, output_padding) of a transposed convolution CMSIS-NN has."""
    if int(arguments["groups"]) != 1:
        raise LoweringRefused(
            Refusal.GROUPED_TRANSPOSED_CONV,
            f"grouped transposed convolution (groups={arguments['groups']}); CMSIS-NN has "
            "only groups=1",
        )
    if _pair(arguments["dilation"], one_d, 1) != [1, 1]:
        raise LoweringRefused(
            Refusal.DILATED_TRANSPOSED_CONV,
            f"dilated transposed convolution (dilation={arguments['dilation']}); CMSIS-NN has "
            "only dilation 1",
        )
    stride = _pair(arguments["stride"], one_d, 1)
    padding = _pair(arguments["padding"], one_d, 0)
    output_padding = _pair(arguments["output_padding"], one_d, 0)
    return stride, padding, output_padding


def _image_input(context: LoweringContext, pattern: Pattern, one_d: bool) -> QValue:
    """The input as a 4-D channels-last value (a 1-D one's ``[N, C, 1, L]``, stored NLC)."""
    x = context.input_value(pattern.op.args[0])
    if len(x.shape) != (3 if one_d else 4):
        raise LoweringRefused(
            Refusal.CONV_INPUT_RANK,
            f"conv_transpose{'1' if one_d else '2'}d input of shape {list(x.shape)}",
        )
    return as_image(context, x, fold=only_reader(pattern))


@rule(aten.conv_transpose2d.input, aten.conv_transpose1d.default)
def lower_transpose_conv2d(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    one_d = node.target is aten.conv_transpose1d.default
    arguments = _arguments(node)
    x = _image_input(context, pattern, one_d)
    stride, padding, output_padding = _geometry(arguments, one_d)

    weight, weight_scales = context.quantized_constant(node.args[1], channel_axis=1)
    if one_d:
        weight = weight.unsqueeze(2)  # [Cin, Cout, K] → [Cin, Cout, 1, K]
    in_channels, out_channels, kernel_h, kernel_w = weight.shape
    n, _, height, width = x.shape
    reason = unsupported_reason(
        (height, width), in_channels, (kernel_h, kernel_w), stride, padding, output_padding
    )
    if reason is not None:
        raise LoweringRefused(
            Refusal.TRANSPOSED_CONV_NOT_EXACT,
            f"CMSIS-NN's transposed convolution is not exact here: {reason}",
        )
    bias_node = arguments["bias"]
    q = requantization(context, pattern, x.scale, weight_scales, bias_node, out_channels)
    out_h = output_size(height, kernel_h, stride[0], padding[0], output_padding[0])
    out_w = output_size(width, kernel_w, stride[1], padding[1], output_padding[1])
    expected = (n, out_channels, out_w) if one_d else (n, out_channels, out_h, out_w)
    if pattern.shape != expected:
        raise LoweringRefused(
            Refusal.CONV_OUTPUT_SHAPE,
            f"output shape {list(pattern.shape)} is not [N, Cout, OH, OW]",
        )
    kernel = weight.permute(1, 2, 3, 0)  # [Cin, Cout, KH, KW] → OHWI
    buffers = scratch.transpose_conv2d_scratch(
        context.target,
        x.stored_shape,
        tuple(kernel.shape),
        (n, out_h, out_w, out_channels),
        stride,
        padding,
    )
    out = context.call(
        "transpose_conv2d",
        x.node,
        *q.constants(context, node.name, kernel),
        stride,
        padding,
        output_padding,
        -x.zero_point,
        pattern.zero_point,
        q.act_min,
        q.act_max,
        buffers.reverse_conv_offset,
        buffers.total_bytes,
    )
    value = QValue(out, pattern.scale, pattern.zero_point, (n, out_channels, out_h, out_w), True)
    value = reshaped(context, value, pattern.shape)  # a 1-D one's [N, C, L], NLC
    macs = n * height * width * in_channels * kernel_h * kernel_w * out_channels
    function = "arm_transpose_conv_wrapper_s8"
    return Lowered(value, "transpose_conv2d", function, macs, weight_bytes(kernel, out_channels))
