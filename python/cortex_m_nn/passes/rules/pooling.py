"""Pooling on int8 NHWC tensors; output quantization shared with the input, activation fused.

* avg_pool2d, adaptive_avg_pool2d (uniform windows) and mean over H and W (a global average
  pool: the window is the whole H×W; this CMSIS-NN has no separate mean kernel)
  → cortex_m_nn::avg_pool2d (arm_avgpool_s8)
* max_pool2d (dilation 1, floor or ceil mode) → cortex_m_nn::max_pool2d (arm_max_pool_s8)
"""

from __future__ import annotations

from torch.fx import Node

from cortex_m_nn import scratch
from cortex_m_nn.ops.max_pool2d import pool_output_size
from cortex_m_nn.passes.activation import activation_range
from cortex_m_nn.passes.graph_values import LoweringRefused, QValue
from cortex_m_nn.passes.layout import relayout
from cortex_m_nn.passes.lower import Lowered, LoweringContext, Pattern, rule
from cortex_m_nn.quantizer.quantizer import aten


def _pair(value: object) -> list[int]:
    values = list(value) if isinstance(value, list | tuple) else [value]
    return [int(v) for v in (values * 2 if len(values) == 1 else values)]


def _argument(node: Node, index: int, name: str, default: object) -> object:
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _pooled_input(context: LoweringContext, pattern: Pattern, what: str) -> QValue:
    """The pool's input, channels-last, with the output's quantization."""
    x = context.input_value(pattern.op.args[0])
    if len(x.shape) != 4:
        raise LoweringRefused(f"{what} input is not a 4-D activation")
    if (x.scale, x.zero_point) != (pattern.scale, pattern.zero_point):
        raise LoweringRefused(f"{what} would need requantization (output qparams differ)")
    return relayout(context, x, nhwc=True)


def _pool(
    context: LoweringContext,
    pattern: Pattern,
    kernel: list[int],
    stride: list[int],
    padding: list[int],
) -> Lowered:
    x = _pooled_input(context, pattern, "average pool")
    act_min, act_max = activation_range(pattern.activation, pattern.scale, pattern.zero_point)
    n, channels = x.shape[0], x.shape[1]
    out_h = (x.shape[2] + 2 * padding[0] - kernel[0]) // stride[0] + 1
    out_w = (x.shape[3] + 2 * padding[1] - kernel[1]) // stride[1] + 1
    output_nhwc = (n, out_h, out_w, channels)
    scratch_bytes = scratch.avg_pool2d_scratch_bytes(context.target, x.stored_shape, output_nhwc)
    out = context.call(
        "avg_pool2d", x.node, kernel, stride, padding, act_min, act_max, scratch_bytes
    )
    logical = (n, channels, out_h, out_w)
    if logical != pattern.shape:  # mean without keepdim: drop the 1x1 spatial dims
        if (out_h, out_w) != (1, 1):
            raise LoweringRefused(f"pool output {list(logical)} vs {list(pattern.shape)}")
        out = context.view(out, pattern.shape)
        value = QValue(out, x.scale, x.zero_point, pattern.shape)
    else:
        value = QValue(out, x.scale, x.zero_point, logical, nhwc=True)
    return Lowered(value, "avg_pool2d", "arm_avgpool_s8")


@rule(aten.avg_pool2d.default)
def lower_avg_pool2d(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    kernel = _pair(_argument(node, 1, "kernel_size", None))
    stride = _pair(_argument(node, 2, "stride", None) or kernel)
    padding = _pair(_argument(node, 3, "padding", 0))
    if _argument(node, 4, "ceil_mode", False):
        raise LoweringRefused("avg_pool2d with ceil_mode=True")
    count_include_pad = _argument(node, 5, "count_include_pad", True)
    if any(padding) and count_include_pad:
        raise LoweringRefused(
            "avg_pool2d with padding counts the padding; CMSIS-NN divides by the valid "
            "elements: use count_include_pad=False"
        )
    if _argument(node, 6, "divisor_override", None) is not None:
        raise LoweringRefused("avg_pool2d with divisor_override")
    return _pool(context, pattern, kernel, stride, padding)


@rule(aten.adaptive_avg_pool2d.default)
def lower_adaptive_avg_pool2d(context: LoweringContext, pattern: Pattern) -> Lowered:
    height, width = context.input_value(pattern.op.args[0]).shape[2:]
    out_h, out_w = _pair(pattern.op.args[1])
    if height % out_h or width % out_w:
        raise LoweringRefused(f"adaptive pool {height}x{width} → {out_h}x{out_w} is not uniform")
    kernel = [height // out_h, width // out_w]
    return _pool(context, pattern, kernel, kernel, [0, 0])


@rule(aten.mean.dim)
def lower_mean(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = context.input_value(pattern.op.args[0])
    dims = pattern.op.args[1]
    if len(x.shape) != 4 or sorted(d % 4 for d in dims) != [2, 3]:
        raise LoweringRefused(f"mean over dims {list(dims)} (only H and W of a 4-D tensor)")
    kernel = list(x.shape[2:])
    return _pool(context, pattern, kernel, kernel, [0, 0])


@rule(aten.max_pool2d.default)
def lower_max_pool2d(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    kernel = _pair(_argument(node, 1, "kernel_size", None))
    stride = _pair(_argument(node, 2, "stride", None) or kernel)
    padding = _pair(_argument(node, 3, "padding", 0))
    dilation = _pair(_argument(node, 4, "dilation", 1))
    ceil_mode = bool(_argument(node, 5, "ceil_mode", False))
    if dilation != [1, 1]:
        raise LoweringRefused(
            f"max_pool2d with dilation {dilation}: arm_max_pool_s8 has none; use dilation=1"
        )
    x = _pooled_input(context, pattern, "max pool")
    act_min, act_max = activation_range(pattern.activation, pattern.scale, pattern.zero_point)
    n, channels, height, width = x.shape
    out_h = pool_output_size(height, kernel[0], stride[0], padding[0], ceil_mode)
    out_w = pool_output_size(width, kernel[1], stride[1], padding[1], ceil_mode)
    if (n, channels, out_h, out_w) != pattern.shape:
        raise LoweringRefused(f"max pool output {[n, channels, out_h, out_w]} vs {pattern.shape}")
    out = context.call("max_pool2d", x.node, kernel, stride, padding, ceil_mode, act_min, act_max)
    value = QValue(out, x.scale, x.zero_point, pattern.shape, nhwc=True)
    return Lowered(value, "max_pool2d", "arm_max_pool_s8")
