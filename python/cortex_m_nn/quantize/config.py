"""Quantization specs of CMSIS-NN's s8 kernels (8-bit weights and activations) and s16 kernels
(8-bit weights, 16-bit activations).

Weights: int8 symmetric in [-127, 127] (per output channel for convolutions; per tensor or
per channel for linear). Activations: int8 asymmetric in [-128, 127], or int16 symmetric in
[-32768, 32767] with zero point 0 (:data:`ACTIVATION_INT16`). Biases of int8 ops: int32 with
scale ``input_scale * weight_scale`` so the kernel adds them to its accumulator unchanged; an
int16 op's bias is left float here (PT2E has no int64 quantization) and the lowering rounds it
to the int64 its kernel takes, at the same scale.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch.fx import Node
from torchao.quantization.pt2e import ObserverOrFakeQuantize
from torchao.quantization.pt2e.observer import (
    MinMaxObserver,
    PerChannelMinMaxObserver,
)
from torchao.quantization.pt2e.quantizer import (
    DerivedQuantizationSpec,
    FixedQParamsQuantizationSpec,
    QuantizationSpec,
)

from cortex_m_nn.core.integers import (
    INT4_MAX,
    INT8_MAX,
    INT8_MIN,
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    SOFTMAX_OUTPUT_SCALE,
    SOFTMAX_OUTPUT_ZERO_POINT,
)
from cortex_m_nn.core.options import Int4Ranges, LinearWeights, RangeMethod
from cortex_m_nn.quantize.observers import (
    Int4MsePerChannelObserver,
    Int4MsePerTensorObserver,
    MseObserver,
    PercentileObserver,
)

#: Observers' smallest scale: a constant tensor still gets a usable one.
EPS = 2**-20


#: The observer each range method uses for activations.
ACTIVATION_OBSERVERS = {
    RangeMethod.MINMAX: MinMaxObserver,
    RangeMethod.MSE: MseObserver,
    RangeMethod.PERCENTILE: PercentileObserver,
}


def activation_spec(method: RangeMethod = RangeMethod.MINMAX) -> QuantizationSpec:
    """int8 asymmetric activations whose range ``method`` chooses from the calibration values."""
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=INT8_MIN,
        quant_max=INT8_MAX,
        qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=ACTIVATION_OBSERVERS[method].with_args(eps=EPS),
    )


def activation_through(node: Node) -> QuantizationSpec:
    """int8 asymmetric activations with MSE ranges measured after ``node``'s element-wise
    function (an aten op whose arguments after the input are constants), the one function
    every consumer of the tensor applies (``observers.MseObserver``'s ``through``)."""
    target = node.target
    packet = target._overloadpacket  # type: ignore[union-attr]
    name = f"{target.namespace}.{packet.__name__}.{target._overloadname}"  # type: ignore[union-attr]
    observer = MseObserver.with_args(
        eps=EPS,
        through=name,
        arguments=tuple(node.args[1:]),
        keywords=tuple(sorted(node.kwargs.items())),
    )
    return replace(activation_spec(RangeMethod.MSE), observer_or_fake_quant_ctr=observer)


#: Min/max activations (the quantizer builds its own spec from its options).
ACTIVATION = activation_spec(RangeMethod.MINMAX)


def symmetric_activation(dtype: torch.dtype) -> QuantizationSpec:
    """Activations of zero point 0 over the whole of ``dtype``, the observed min/max."""
    info = torch.iinfo(dtype)
    return QuantizationSpec(
        dtype=dtype,
        quant_min=info.min,
        quant_max=info.max,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=EPS),
    )


#: int8 activations of zero point 0 (a streaming GRU's output and kept state: the program's
#: state buffer starts as zero bytes, which is then zero).
ACTIVATION_SYMMETRIC = symmetric_activation(torch.int8)
#: int16 activations: symmetric, zero point 0, the observed min/max (65,536 levels leave
#: rounding error far below what clipping outliers would cost, so no range search).
ACTIVATION_INT16 = symmetric_activation(torch.int16)


def weight_spec(channel_axis: int | None, bits: int = 8) -> QuantizationSpec:
    """Symmetric weights in [-127, 127] (``bits`` 4: [-7, 7], CMSIS-NN's s4 kernels, packed by
    the lowering): per channel along ``channel_axis`` (the output channels), or per tensor when
    it is None."""
    if channel_axis is None:
        qscheme, observer = torch.per_tensor_symmetric, MinMaxObserver.with_args(eps=EPS)
    else:
        qscheme = torch.per_channel_symmetric
        observer = PerChannelMinMaxObserver.with_args(ch_axis=channel_axis, eps=EPS)
    largest = INT8_MAX if bits == 8 else INT4_MAX
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-largest,
        quant_max=largest,
        qscheme=qscheme,
        ch_axis=channel_axis,
        observer_or_fake_quant_ctr=observer,
    )


WEIGHT_PER_CHANNEL = weight_spec(0)
#: int4 weights per output channel, and per tensor (a linear layer with --linear-weights
#: per-tensor: arm_fully_connected_s4)
WEIGHT_INT4_PER_CHANNEL = weight_spec(0, bits=4)
WEIGHT_INT4_PER_TENSOR = weight_spec(None, bits=4)

#: int4 weights whose scale per channel (or tensor) has the least squared error of the weights
#: over clipping ratios of max |w| (``observers.Int4MsePerChannelObserver``)
WEIGHT_INT4_MSE_PER_CHANNEL = replace(
    WEIGHT_INT4_PER_CHANNEL,
    observer_or_fake_quant_ctr=Int4MsePerChannelObserver.with_args(ch_axis=0, eps=EPS),
)
WEIGHT_INT4_MSE_PER_TENSOR = replace(
    WEIGHT_INT4_PER_TENSOR, observer_or_fake_quant_ctr=Int4MsePerTensorObserver.with_args(eps=EPS)
)


def with_int4_ranges(spec: QuantizationSpec, ranges: Int4Ranges) -> QuantizationSpec:
    """``spec`` (an int4 weight spec, per channel along axis 0 or per tensor) with the scales
    ``ranges`` chooses."""
    if ranges is Int4Ranges.MAX:
        return spec
    per_channel = spec.qscheme == torch.per_channel_symmetric
    return WEIGHT_INT4_MSE_PER_CHANNEL if per_channel else WEIGHT_INT4_MSE_PER_TENSOR


#: Per-channel linear weights when they cut the weights' rounding noise by this factor (3 dB):
#: less than that is not worth a multiplier and shift per output channel.
PER_CHANNEL_GAIN = 2.0


def rounding_noise(weight: torch.Tensor, per_channel: bool, largest: int = INT8_MAX) -> float:
    """Energy of ``weight``'s error after symmetric rounding in [-largest, largest] (int8: 127,
    int4: 7), one scale (max |w| / largest) per tensor or per row."""
    w = weight.detach().to(torch.float64)
    peak = w.abs().amax(dim=1, keepdim=True) if per_channel else w.abs().max()
    scale = torch.where(peak > 0, peak / largest, torch.ones_like(peak))
    return float(((w - torch.round(w / scale).clamp(-largest, largest) * scale) ** 2).sum())


def linear_weight_spec(
    weight: torch.Tensor | None, choice: LinearWeights, bits: int = 8
) -> QuantizationSpec:
    """A linear layer's weight spec (``bits`` 8 or 4): as ``choice`` says; for AUTO, per output
    channel when that divides the rounding noise energy by at least :data:`PER_CHANNEL_GAIN`
    (``weight`` None, not a constant: per tensor)."""
    per_tensor_spec = WEIGHT_PER_TENSOR if bits == 8 else WEIGHT_INT4_PER_TENSOR
    per_channel_spec = WEIGHT_PER_CHANNEL if bits == 8 else WEIGHT_INT4_PER_CHANNEL
    if choice is LinearWeights.AUTO:
        if weight is None or weight.dim() != 2:
            return per_tensor_spec
        largest = INT8_MAX if bits == 8 else INT4_MAX
        tensor = rounding_noise(weight, False, largest)
        channel = rounding_noise(weight, True, largest)
        per_channel = tensor >= PER_CHANNEL_GAIN * channel and tensor > 0
        return per_channel_spec if per_channel else per_tensor_spec
    return per_channel_spec if choice is LinearWeights.PER_CHANNEL else per_tensor_spec


#: Transposed-convolution weights ``[Cin, Cout, KH, KW]``: per output channel is axis 1.
WEIGHT_PER_CHANNEL_TRANSPOSED = weight_spec(1)
WEIGHT_PER_TENSOR = weight_spec(None)

SOFTMAX_OUTPUT = FixedQParamsQuantizationSpec(
    dtype=torch.int8,
    scale=SOFTMAX_OUTPUT_SCALE,
    zero_point=SOFTMAX_OUTPUT_ZERO_POINT,
    quant_min=INT8_MIN,
    quant_max=INT8_MAX,
    qscheme=torch.per_tensor_affine,
)


#: arm_softmax_s16's output: scale 1/32768, zero point 0 (TFLite Micro's int16 softmax).
SOFTMAX_OUTPUT_INT16 = FixedQParamsQuantizationSpec(
    dtype=torch.int16,
    scale=1.0 / 32768.0,
    zero_point=0,
    quant_min=INT16_MIN,
    quant_max=INT16_MAX,
    qscheme=torch.per_tensor_symmetric,
)


def cell_state_spec(power: int) -> FixedQParamsQuantizationSpec:
    """An LSTM's initial cell state: int16 at its cell scale 2^power, zero point 0."""
    return FixedQParamsQuantizationSpec(
        dtype=torch.int16,
        scale=2.0**power,
        zero_point=0,
        quant_min=INT16_MIN,
        quant_max=INT16_MAX,
        qscheme=torch.per_tensor_symmetric,
    )


def _bias_qparams(
    observers: list[ObserverOrFakeQuantize],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bias scale = input scale × weight scale(s); zero point 0."""
    activation, weight = observers
    activation_scale, _ = activation.calculate_qparams()
    weight_scale, _ = weight.calculate_qparams()
    scale = (activation_scale * weight_scale).to(torch.float32)
    return scale, torch.zeros_like(scale, dtype=torch.int32)


def bias_spec(input_edge: tuple[Node, Node], weight_edge: tuple[Node, Node], per_channel: bool):
    """int32 bias whose quantization parameters derive from the input and weight observers."""
    return DerivedQuantizationSpec(
        derived_from=[input_edge, weight_edge],
        derive_qparams_fn=_bias_qparams,
        dtype=torch.int32,
        quant_min=INT32_MIN,
        quant_max=INT32_MAX,
        qscheme=torch.per_channel_symmetric if per_channel else torch.per_tensor_symmetric,
        ch_axis=0 if per_channel else None,
    )
