"""Bias correction on the exported float graph, before PT2E (Nagel et al. 2019, §4.2).

Quantizing a layer's weights ``W`` to ``W_q`` shifts its output by ``(W_q - W) x``; over the
data that error has a mean, per output channel, that rounding does not average away (with few
weights per channel, or when the inputs are all positive, after a ReLU). The calibration
samples measure it: the float graph runs each sample, and at every convolution and linear
layer the error of its quantized weights on the layer's actual input, ``layer(x, W_q - W)``
with the layer's own stride, padding and groups (so zero padding at the borders counts), is
averaged per output channel over the samples and positions. That mean is subtracted from the
layer's bias; a layer without a bias gets one (ATen's convolution and linear take a bias
argument, and the quantizer gives it an int32 bias like any other). The inputs are the float
model's own, measured once before any bias changes.

``W_q`` is the weight PT2E will quantize, computed the same way: the quantizer's weight
observer (``config``: int8 symmetric in [-127, 127], per output channel for convolutions, per
tensor for linear layers; a layer the options give int4 weights, the quantizer's own int4
spec) gives the scale, and the quantize/dequantize operators PT2E's
convert inserts round the weight. Transposed convolutions are not corrected.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.fx import GraphModule, Interpreter, Node
from torchao.quantization.pt2e.quantizer import QuantizationSpec

from cortex_m_nn.core.families import CONVOLUTIONS
from cortex_m_nn.core.graph import argument
from cortex_m_nn.core.options import QuantizationOptions
from cortex_m_nn.quantize import config
from cortex_m_nn.quantize.equalize import attribute_tensor, is_layer, set_bias
from cortex_m_nn.quantize.quantizer import CortexMQuantizer

quantized_decomposed = torch.ops.quantized_decomposed


def weight_spec(layer: Node) -> QuantizationSpec:
    """The quantizer's spec for ``layer``'s weight."""
    return config.WEIGHT_PER_CHANNEL if layer.target in CONVOLUTIONS else config.WEIGHT_PER_TENSOR


def quantized_weight(weight: torch.Tensor, spec: QuantizationSpec) -> torch.Tensor:
    """``weight`` quantized to int8 and back as PT2E does it with ``spec`` (whose fields
    PT2E hands the observer)."""
    fields = {"dtype": spec.dtype, "qscheme": spec.qscheme}
    fields |= {"quant_min": spec.quant_min, "quant_max": spec.quant_max}
    if spec.ch_axis is not None:
        fields["ch_axis"] = spec.ch_axis
    observer = spec.observer_or_fake_quant_ctr(**fields)
    observer(weight)
    scale, zero_point = observer.calculate_qparams()
    bounds = (spec.quant_min, spec.quant_max, spec.dtype)
    if spec.qscheme == torch.per_channel_symmetric:
        axis = spec.ch_axis
        q = quantized_decomposed.quantize_per_channel(weight, scale, zero_point, axis, *bounds)
        return quantized_decomposed.dequantize_per_channel(q, scale, zero_point, axis, *bounds)
    scale, zero_point = float(scale), int(zero_point)
    q = quantized_decomposed.quantize_per_tensor(weight, scale, zero_point, *bounds)
    return quantized_decomposed.dequantize_per_tensor(q, scale, zero_point, *bounds)


class _ErrorMeter(Interpreter):
    """Runs the float graph and sums, per layer and output channel, the output error its
    quantized weights would add on the input it receives."""

    def __init__(self, model: GraphModule, deltas: dict[Node, torch.Tensor]) -> None:
        super().__init__(model)
        self.deltas = deltas
        self.sums: dict[Node, torch.Tensor] = {}
        self.counts: dict[Node, int] = {}

    def run_node(self, node: Node) -> object:
        result = super().run_node(node)
        if node in self.deltas:
            args, kwargs = self.fetch_args_kwargs_from_env(node)
            kwargs = {k: v for k, v in kwargs.items() if k != "bias"}
            error = node.target(args[0], self.deltas[node], None, *args[3:], **kwargs)
            channel = 1 if node.target in CONVOLUTIONS else error.dim() - 1
            dims = [d for d in range(error.dim()) if d != channel]
            total = error.double().sum(dim=dims)
            self.sums[node] = self.sums.get(node, 0) + total
            self.counts[node] = self.counts.get(node, 0) + error.numel() // error.shape[channel]
        return result


def weight_errors(
    model: GraphModule, options: QuantizationOptions | None = None
) -> dict[Node, torch.Tensor]:
    """``W_q - W`` of every convolution and linear layer with constant weights (int4 where
    ``options`` give the layer int4 weights)."""
    quantizer = CortexMQuantizer(options or QuantizationOptions())
    deltas = {}
    for node in model.graph.nodes:
        if is_layer(node):
            weight = attribute_tensor(model, node.args[1])
            spec = quantizer.int4_weight_spec(model, node) or weight_spec(node)
            deltas[node] = quantized_weight(weight, spec) - weight
    return deltas


def output_errors(
    model: GraphModule,
    samples: Iterable[tuple[torch.Tensor, ...]],
    options: QuantizationOptions | None = None,
) -> dict[Node, torch.Tensor]:
    """Per layer, the mean output error per output channel its quantized weights cause on
    ``samples`` (``E[(W_q - W) x]``)."""
    meter = _ErrorMeter(model, weight_errors(model, options))
    with torch.no_grad():
        for sample in samples:
            meter.run(*sample)
    return {node: total / meter.counts[node] for node, total in meter.sums.items()}


def correct_biases(
    model: GraphModule,
    samples: Iterable[tuple[torch.Tensor, ...]],
    options: QuantizationOptions | None = None,
) -> dict[str, torch.Tensor]:
    """Subtract each layer's mean weight-quantization error on ``samples`` from its bias
    (weights quantized as ``options`` say); returns the corrections (what was subtracted) by
    layer name."""
    corrections = output_errors(model, samples, options)
    for node, correction in corrections.items():
        bias = attribute_tensor(model, argument(node, 2, "bias", None))
        dtype = torch.float32 if bias is None else bias.dtype
        bias = torch.zeros(correction.shape, dtype=torch.float64) if bias is None else bias
        set_bias(model, node, (bias.double() - correction).to(dtype))
    model.graph.lint()
    model.recompile()
    return {node.name: correction.float() for node, correction in corrections.items()}
