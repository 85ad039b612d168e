"""Pooling on int8 (or int16: the ``_s16`` kernels) NHWC tensors; output quantization shared
with the input, activation fused.

* avg_pool2d, adaptive_avg_pool2d (uniform windows) and mean over H and W (a global average
  pool: the window is the whole H×W; this CMSIS-NN has no separate mean kernel)
  → cortex_m_nn::avg_pool2d (arm_avgpool_s8); a mean over other dims → cortex_m_nn::reduce
* max_pool2d (dilation 1, floor or ceil mode) → cortex_m_nn::max_pool2d (arm_max_pool_s8)
* the 1-D forms on ``[N, C, L]`` (avg_pool1d, adaptive_avg_pool1d, max_pool1d, mean over L)
  → the same operators on ``[N, C, 1, L]`` (stored NLC: see ``layout.as_image``)
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch.fx import Node

from cortex_m_nn.core.cmsis_nn import Case, cmsis_function
from cortex_m_nn.core.families import aten
from cortex_m_nn.core.graph import argument
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower import scratch
from cortex_m_nn.lower.activation import activation_range
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import as_image, reshaped
from cortex_m_nn.lower.registry import Lowered, Pattern, rule
from cortex_m_nn.lower.rules.reduce import lower_reduction
from cortex_m_nn.ops.params import pool_output_size


def _spatial(value: object, one_d: bool, fill: int) -> list[int]:
    """A kernel/stride/padding/dilation argument as [H, W]; a 1-D op's is [fill, L]."""
    values = [int(v) for v in (value if isinstance(value, list | tuple) else [value])]
    if one_d:
        if len(values) != 1:
            raise LoweringRefused(Refusal.POOL_ARGUMENT, f"1-D pool argument {values}")
        return [fill, values[0]]
    return values * 2 if len(values) == 1 else values


def _given(values: list[int], one_d: bool) -> list[int]:
    """A [H, W] argument as the op was given it (the stride defaults to the kernel)."""
    return values[1:] if one_d else values


def _window(node: Node, one_d: bool) -> tuple[list[int], list[int], list[int]]:
    """A pool's kernel, stride (the kernel by default) and padding, each as [H, W]."""
    kernel = _spatial(argument(node, 1, "kernel_size", None), one_d, 1)
    stride = _spatial(argument(node, 2, "stride", None) or _given(kernel, one_d), one_d, 1)
    padding = _spatial(argument(node, 3, "padding", 0), one_d, 0)
    return kernel, stride, padding


def _pooled_input(context: LoweringContext, pattern: Pattern, what: str) -> QValue:
    """The pool's input, channels-last 4-D (a 3-D one with height 1), with the output's
    quantization."""
    x = context.input_value(pattern.op.args[0], int16=True)
    if len(x.shape) not in (3, 4):
        raise LoweringRefused(
            Refusal.POOL_INPUT_RANK, f"{what} input is not a 3-D or 4-D activation"
        )
    if (x.scale, x.zero_point, x.dtype) != (pattern.scale, pattern.zero_point, pattern.dtype):
        raise LoweringRefused(
            Refusal.QPARAMS_CHANGE, f"{what} would need requantization (output qparams differ)"
        )
    return as_image(context, x)


def _pool(
    context: LoweringContext,
    pattern: Pattern,
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    ceil_mode: bool = False,
) -> Lowered:
    x = _pooled_input(context, pattern, "average pool")
    act_min, act_max = _range(pattern)
    n, channels = x.shape[0], x.shape[1]
    out_h = pool_output_size(x.shape[2], kernel[0], stride[0], padding[0], ceil_mode)
    out_w = pool_output_size(x.shape[3], kernel[1], stride[1], padding[1], ceil_mode)
    output_nhwc = (n, out_h, out_w, channels)
    int16 = x.dtype is torch.int16
    if int16 and kernel[0] * kernel[1] >= 65536:
        raise LoweringRefused(Refusal.POOL_ARGUMENT, "an int16 pool of 65,536 elements or more")
    scratch_bytes = scratch.avg_pool2d_scratch_bytes(
        context.target, x.stored_shape, output_nhwc, int16
    )
    out = context.call(
        "avg_pool2d", x.node, kernel, stride, padding, ceil_mode, act_min, act_max, scratch_bytes
    )
    value = replace(x, node=out, shape=(n, channels, out_h, out_w), nhwc=True)
    call = cmsis_function("avg_pool2d", Case.S16 if int16 else Case.S8)
    return Lowered(_result(context, value, pattern), "avg_pool2d", call)


def _range(pattern: Pattern) -> tuple[int, int]:
    """The fused activation's range in the output's dtype."""
    return activation_range(pattern.activation, pattern.scale, pattern.zero_point, pattern.dtype)


def _result(context: LoweringContext, value: QValue, pattern: Pattern) -> QValue:
    """The pool's 4-D output as the op's: itself, ``[N, C, L]`` of a 1-D pool, or ``[N, C]``
    (``[N, C, 1]``) of a mean without (with) keepdim."""
    n, channels, out_h, out_w = value.shape
    expected = {(n, channels, out_h, out_w), (n, channels, out_w)}
    if out_h == out_w == 1:
        expected |= {(n, channels), (n, channels, 1)}
    if pattern.shape not in expected:
        raise LoweringRefused(
            Refusal.POOL_OUTPUT_SHAPE, f"pool output {list(value.shape)} vs {list(pattern.shape)}"
        )
    return reshaped(context, value, pattern.shape)


@rule(aten.avg_pool2d.default, aten.avg_pool1d.default)
def lower_avg_pool2d(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    one_d = node.target is aten.avg_pool1d.default
    kernel, stride, padding = _window(node, one_d)
    ceil_mode = bool(argument(node, 4, "ceil_mode", False))
    count_include_pad = argument(node, 5, "count_include_pad", True)
    if any(padding) and count_include_pad:  # (frontend/equivalents pads such a pool first)
        raise LoweringRefused(
            Refusal.COUNT_INCLUDE_PAD,
            "average pool with padding counts the padding; CMSIS-NN divides by the valid "
            "elements: use count_include_pad=False",
        )
    if not one_d and argument(node, 6, "divisor_override", None) is not None:
        raise LoweringRefused(Refusal.DIVISOR_OVERRIDE, "avg_pool2d with divisor_override")
    return _pool(context, pattern, kernel, stride, padding, ceil_mode)


@rule(aten.adaptive_avg_pool2d.default, aten.adaptive_avg_pool1d.default)
def lower_adaptive_avg_pool2d(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = context.input_value(pattern.op.args[0], int16=True)
    one_d = pattern.op.target is aten.adaptive_avg_pool1d.default
    height, width = (1, x.shape[-1]) if one_d else x.shape[2:]
    out_h, out_w = _spatial(pattern.op.args[1], one_d, 1)
    if height % out_h or width % out_w:
        raise LoweringRefused(
            Refusal.ADAPTIVE_NOT_UNIFORM,
            f"adaptive pool {height}x{width} → {out_h}x{out_w} is not uniform",
        )
    kernel = [height // out_h, width // out_w]
    return _pool(context, pattern, kernel, kernel, [0, 0])


@rule(aten.mean.dim)
def lower_mean(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = context.input_value(pattern.op.args[0], int16=True)
    rank = len(x.shape)
    dims = sorted(int(d) % rank for d in pattern.op.args[1]) if rank else []
    if (rank, dims) not in ((4, [2, 3]), (3, [2])):
        return lower_reduction(context, pattern)  # any other dims: cortex_m_nn::reduce
    kernel = [1, x.shape[2]] if rank == 3 else list(x.shape[2:])
    return _pool(context, pattern, kernel, kernel, [0, 0])


@rule(aten.max_pool2d.default, aten.max_pool1d.default)
def lower_max_pool2d(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    one_d = node.target is aten.max_pool1d.default
    kernel, stride, padding = _window(node, one_d)
    dilation = _spatial(argument(node, 4, "dilation", 1), one_d, 1)
    ceil_mode = bool(argument(node, 5, "ceil_mode", False))
    if dilation != [1, 1]:
        raise LoweringRefused(
            Refusal.POOL_DILATION,
            f"max pool with dilation {dilation}: arm_max_pool_s8 has none; use dilation=1",
        )
    x = _pooled_input(context, pattern, "max pool")
    act_min, act_max = _range(pattern)
    n, channels, height, width = x.shape
    out_h = pool_output_size(height, kernel[0], stride[0], padding[0], ceil_mode)
    out_w = pool_output_size(width, kernel[1], stride[1], padding[1], ceil_mode)
    out = context.call("max_pool2d", x.node, kernel, stride, padding, ceil_mode, act_min, act_max)
    value = replace(x, node=out, shape=(n, channels, out_h, out_w), nhwc=True)
    call = cmsis_function("max_pool2d", Case.S16 if x.dtype is torch.int16 else Case.S8)
    return Lowered(_result(context, value, pattern), "max_pool2d", call)
