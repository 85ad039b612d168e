"""aten.linear → cortex_m_nn::linear: per-tensor weights → ``arm_fully_connected_s8``,
per-channel weights (the quantizer's choice, ``quantize/config.py``) →
``arm_fully_connected_per_channel_s8`` with int32 multipliers and shifts per output channel;
int16 activations (the float bias rounded to int64 here): per-tensor weights →
``arm_fully_connected_s16``, per-channel ones → the int16 case of ``cortex_m_nn::conv2d``
(``arm_convolve_wrapper_s16``, a 1x1 convolution); int4 weights (packed, ``ops/int4.py``):
per tensor → ``arm_fully_connected_s4``, per channel (CMSIS-NN has no per-channel s4 fully
connected) → the int4 case of ``cortex_m_nn::conv2d`` (``arm_convolve_wrapper_s4``, 1x1)."""

from __future__ import annotations

import math

import torch

from cortex_m_nn.core.cmsis_nn import WRAPPER, Case, cmsis_function
from cortex_m_nn.core.families import aten
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.core.target import Isa
from cortex_m_nn.lower import scratch
from cortex_m_nn.lower.activation import activation_range
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.convolution import packed, requantization, weight_bits
from cortex_m_nn.lower.convolution import weight_bytes as conv_weight_bytes
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.registry import Lowered, Pattern, rule
from cortex_m_nn.ops.arithmetic import per_channel_parameters, quantize_multiplier
from cortex_m_nn.ops.linear import kernel_sums
from cortex_m_nn.ops.params import int16_sums_fit


def _bias_or_sums(
    context: LoweringContext,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    batches: int,
    input_offset: int,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(bias, kernel sums): CMSIS-NN's MVE path wants the kernel sums (which include the
    bias) in its buffer, computed here rather than at run time; the others take the bias."""
    out_features, in_features = weight.shape
    buffer_bytes = scratch.linear_scratch_bytes(
        context.target, (batches, in_features), tuple(weight.shape)
    )
    if context.target.isa is Isa.MVE:
        if buffer_bytes != 4 * out_features:
            raise LoweringRefused(
                Refusal.LINEAR_SCRATCH, f"CMSIS-NN asks {buffer_bytes} B for MVE linear kernel sums"
            )
        return None, kernel_sums(weight, bias, input_offset)
    if buffer_bytes:
        raise LoweringRefused(
            Refusal.LINEAR_SCRATCH,
            f"CMSIS-NN asks {buffer_bytes} B of scratch for a non-MVE linear",
        )
    return bias, None


#: The per-channel vectors' constant names.
_NAMES = ("multipliers", "shifts")


@rule(aten.linear.default)
def lower_linear(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    source, weight_node = node.args[:2]
    bias_node = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
    x = context.input_value(source, int16=True)
    if x.dtype is torch.int16 or pattern.dtype is torch.int16:
        return _lower_s16(context, pattern, x, weight_node, bias_node)
    if not x.layout_free:
        raise LoweringRefused(
            Refusal.LINEAR_OVER_WIDTH, "linear over the width of a channels-last 4-D tensor"
        )
    weight, weight_scales = context.quantized_constant(weight_node)
    out_features, in_features = weight.shape
    per_channel = weight_scales.numel() > 1
    int4 = weight_bits(weight_node) == 4
    if int4 and per_channel:
        return _as_convolution(context, pattern, x, weight, weight_scales, bias_node)
    bias = None
    if bias_node is not None:
        bias = context.accumulator_bias(bias_node, x.scale, weight_scales.reshape(-1))
    channels, multiplier, shift = _requantization(context, pattern, x.scale, weight_scales)
    act_min, act_max = activation_range(pattern.activation, pattern.scale, pattern.zero_point)
    source_node = x.node
    if x.nhwc:  # layout-free here, so the logical shape is the same bytes
        source_node = context.view(x.node, x.shape)
    batches = math.prod(x.shape[:-1])
    sums = None  # arm_fully_connected_s4 sums its weights itself on MVE
    if not int4:
        bias, sums = _bias_or_sums(context, weight, bias, batches, -x.zero_point)
    stored = packed(weight.to(torch.int8)) if int4 else weight.to(torch.int8)
    out = context.call(
        "linear",
        source_node,
        context.constant(stored, f"{node.name}_weight"),
        None if bias is None else context.constant(bias, f"{node.name}_bias"),
        None if sums is None else context.constant(sums, f"{node.name}_kernel_sums"),
        *channels,
        -x.zero_point,
        pattern.zero_point,
        multiplier,
        shift,
        act_min,
        act_max,
        WRAPPER,  # the path: CMSIS-NN's (plan.paths may give it ours)
    )
    value = QValue(out, pattern.scale, pattern.zero_point, pattern.shape)
    weight_bytes = stored.numel() + (0 if bias is None and sums is None else 4 * out_features)
    weight_bytes += 8 * out_features if per_channel else 0
    case = Case.S4 if int4 else Case.S8
    return Lowered(
        value,
        "linear",
        cmsis_function("linear", case, 1 if per_channel and not int4 else 0),
        batches * in_features * out_features,
        weight_bytes,
        int4_weights=int4,
    )


def _requantization(
    context: LoweringContext, pattern: Pattern, input_scale: float, weight_scales: torch.Tensor
) -> tuple[list[object], int, int]:
    """(per-channel multipliers and shifts as constants, or two Nones; the per-tensor
    multiplier and shift, or 0, 0)."""
    if weight_scales.numel() > 1:
        vectors = per_channel_parameters(input_scale, weight_scales, pattern.scale)
        name = pattern.op.name
        channels = [
            context.constant(v, f"{name}_{k}") for v, k in zip(vectors, _NAMES, strict=True)
        ]
        return channels, 0, 0
    multiplier, shift = quantize_multiplier(input_scale * float(weight_scales) / pattern.scale)
    return [None, None], multiplier, shift


def _lower_s16(
    context: LoweringContext, pattern: Pattern, x: QValue, weight_node: object, bias_node: object
) -> Lowered:
    """The int16 case: per-tensor weights → ``arm_fully_connected_s16`` (int64 bias, zero
    points 0, no kernel sums on any ISA); per-channel weights, which CMSIS-NN's s16 fully
    connected kernel does not take → :func:`_as_convolution`."""
    node = pattern.op
    if (x.dtype, pattern.dtype) != (torch.int16, torch.int16):
        raise LoweringRefused(Refusal.NOT_INT8, "int16 linear takes and gives int16")
    if not x.layout_free:
        raise LoweringRefused(
            Refusal.LINEAR_OVER_WIDTH, "linear over the width of a channels-last 4-D tensor"
        )
    weight, weight_scales = context.quantized_constant(weight_node)
    if weight_scales.numel() != 1:
        return _as_convolution(context, pattern, x, weight, weight_scales, bias_node)
    out_features, in_features = weight.shape
    accumulator_scale = x.scale * float(weight_scales)
    multiplier, shift = quantize_multiplier(accumulator_scale / pattern.scale)
    if shift > 14:
        raise LoweringRefused(
            Refusal.INT16_REQUANTIZATION, f"int16 linear's shift {shift} exceeds 14"
        )
    bias = None
    if bias_node is not None:
        bias = context.int64_bias(bias_node, accumulator_scale)
    act_min, act_max = activation_range(pattern.activation, pattern.scale, 0, torch.int16)
    batches = math.prod(x.shape[:-1])
    source_node = context.view(x.node, x.shape) if x.nhwc else x.node
    out = context.call(
        "linear",
        source_node,
        context.constant(weight.to(torch.int8), f"{node.name}_weight"),
        None if bias is None else context.constant(bias, f"{node.name}_bias"),
        None,
        None,
        None,
        0,
        0,
        multiplier,
        shift,
        act_min,
        act_max,
        WRAPPER,
    )
    value = QValue(out, pattern.scale, 0, pattern.shape, dtype=torch.int16)
    weight_bytes = weight.numel() + (0 if bias is None else 8 * out_features)
    macs = batches * in_features * out_features
    return Lowered(value, "linear", cmsis_function("linear", Case.S16), macs, weight_bytes)


def _as_convolution(
    context: LoweringContext,
    pattern: Pattern,
    x: QValue,
    weight: torch.Tensor,
    weight_scales: torch.Tensor,
    bias_node: object,
) -> Lowered:
    """A linear layer with per-channel weights as a 1x1 ``cortex_m_nn::conv2d``, what CMSIS-NN
    offers per channel for int16 activations (``arm_convolve_wrapper_s16``) and for int4
    weights (``arm_convolve_wrapper_s4``): each batch row is one image of 1x1 pixel,
    ``[batches, 1, 1, in]``, the weight ``[out, 1, 1, in]``. One pixel per image keeps the
    int16 case off the DSP kernel's defective two-pixel path."""
    node = pattern.op
    int16 = x.dtype is torch.int16
    out_features, in_features = weight.shape
    batches = math.prod(x.shape[:-1])
    q = requantization(context, pattern, x.scale, weight_scales, bias_node, out_features)
    kernel = weight.reshape(out_features, 1, 1, in_features)
    if int16 and not int16_sums_fit(kernel):
        raise LoweringRefused(
            Refusal.INT16_REQUANTIZATION, "int16 linear whose per-channel sums could wrap int32"
        )
    image = (batches, 1, 1, in_features)
    common = dict(stride=[1, 1], padding=[0, 0], dilation=[1, 1])
    scratch_bytes = scratch.conv2d_scratch_bytes(
        context.target,
        image,
        tuple(kernel.shape),
        (batches, 1, 1, out_features),
        **common,
        int16=int16,
        int4=not int16,
    )
    source_node = context.view(x.node, image)
    out = context.call(
        "conv2d",
        source_node,
        *q.constants(context, node.name, kernel if int16 else kernel.flatten(2), int4=not int16),
        [1, 1],
        [0, 0],
        [1, 1],
        -x.zero_point,
        pattern.zero_point,
        q.act_min,
        q.act_max,
        WRAPPER,
        scratch_bytes,
    )
    out = context.view(out, pattern.shape)
    value = QValue(out, pattern.scale, pattern.zero_point, pattern.shape, dtype=x.dtype)
    macs = batches * in_features * out_features
    weights = conv_weight_bytes(kernel, out_features, 8 if int16 else 4, int4=not int16)
    call = cmsis_function("conv2d", Case.S16 if int16 else Case.S4)
    return Lowered(value, "conv2d", call, macs, weights, int4_weights=not int16)
