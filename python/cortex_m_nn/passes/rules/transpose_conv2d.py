"""aten.conv_transpose2d → cortex_m_nn::transpose_conv2d (arm_transpose_conv_wrapper_s8)."""

from __future__ import annotations

import torch

from cortex_m_nn import scratch
from cortex_m_nn.ops.arithmetic import per_channel_parameters
from cortex_m_nn.ops.transpose_conv2d import output_size, unsupported_reason
from cortex_m_nn.passes.activation import activation_range
from cortex_m_nn.passes.graph_values import LoweringRefused, QValue
from cortex_m_nn.passes.lower import Lowered, LoweringContext, Pattern, rule
from cortex_m_nn.quantizer.quantizer import aten

#: aten.conv_transpose2d.input's arguments after input and weight, with their defaults.
_DEFAULTS = (("bias", None), ("stride", 1), ("padding", 0), ("output_padding", 0))
_MORE = (("groups", 1), ("dilation", 1))


def _pair(value: object) -> list[int]:
    values = list(value) if isinstance(value, list | tuple) else [value]
    return [int(v) for v in (values * 2 if len(values) == 1 else values)]


def _arguments(node: torch.fx.Node) -> dict[str, object]:
    names = [name for name, _ in _DEFAULTS + _MORE]
    values = dict(_DEFAULTS + _MORE)
    values.update(zip(names, node.args[2:], strict=False))
    values.update({k: v for k, v in node.kwargs.items() if k in values})
    return values


@rule(aten.conv_transpose2d.input)
def lower_transpose_conv2d(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    arguments = _arguments(node)
    x = context.input_value(node.args[0])
    if len(x.shape) != 4 or not x.nhwc:
        raise LoweringRefused("conv_transpose2d input is not a 4-D activation")
    if int(arguments["groups"]) != 1:
        raise LoweringRefused(
            f"grouped transposed convolution (groups={arguments['groups']}); CMSIS-NN has "
            "only groups=1"
        )
    if _pair(arguments["dilation"]) != [1, 1]:
        raise LoweringRefused(
            f"dilated transposed convolution (dilation={arguments['dilation']}); CMSIS-NN has "
            "only dilation 1"
        )
    stride = _pair(arguments["stride"])
    padding = _pair(arguments["padding"])
    output_padding = _pair(arguments["output_padding"])

    weight, weight_scales = context.quantized_constant(node.args[1], channel_axis=1)
    in_channels, out_channels, kernel_h, kernel_w = weight.shape
    n, _, height, width = x.shape
    reason = unsupported_reason(
        (height, width), in_channels, (kernel_h, kernel_w), stride, padding, output_padding
    )
    if reason is not None:
        raise LoweringRefused(f"CMSIS-NN's transposed convolution is not exact here: {reason}")
    if weight_scales.numel() == 1:
        weight_scales = weight_scales.expand(out_channels)
    bias_node = arguments["bias"]
    if bias_node is None:
        bias = torch.zeros(out_channels, dtype=torch.int32)
    else:
        bias = context.accumulator_bias(bias_node, x.scale, weight_scales)

    multipliers, shifts = per_channel_parameters(x.scale, weight_scales, pattern.scale)
    act_min, act_max = activation_range(pattern.activation, pattern.scale, pattern.zero_point)
    out_h = output_size(height, kernel_h, stride[0], padding[0], output_padding[0])
    out_w = output_size(width, kernel_w, stride[1], padding[1], output_padding[1])
    if pattern.shape != (n, out_channels, out_h, out_w):
        raise LoweringRefused(f"output shape {list(pattern.shape)} is not [N, Cout, OH, OW]")
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
        context.constant(kernel.to(torch.int8), f"{node.name}_weight"),
        context.constant(bias, f"{node.name}_bias"),
        context.constant(multipliers, f"{node.name}_multipliers"),
        context.constant(shifts, f"{node.name}_shifts"),
        stride,
        padding,
        output_padding,
        -x.zero_point,
        pattern.zero_point,
        act_min,
        act_max,
        buffers.reverse_conv_offset,
        buffers.total_bytes,
    )
    value = QValue(out, pattern.scale, pattern.zero_point, pattern.shape, nhwc=True)
    macs = n * height * width * in_channels * kernel_h * kernel_w * out_channels
    weight_bytes = kernel.numel() + 4 * out_channels * 3
    return Lowered(value, "transpose_conv2d", "arm_transpose_conv_wrapper_s8", macs, weight_bytes)
