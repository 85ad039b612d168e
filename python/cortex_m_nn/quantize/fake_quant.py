"""Observers made fake quantizers, for quantization-aware training (``quantize.qat``): what
``CortexMQuantizer(qat=True)`` does to its annotations once every pattern is annotated."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch.fx import GraphModule
from torchao.quantization.pt2e import FakeQuantize
from torchao.quantization.pt2e.observer import (
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
)
from torchao.quantization.pt2e.quantizer import QuantizationSpec, QuantizationSpecBase

#: Weights: the current weights' range at every step (no memory of earlier steps).
WEIGHT_AVERAGING = 1.0
#: Activations: the range moves by this fraction of each batch's (torchao's default).
ACTIVATION_AVERAGING = 0.01
#: Observers' smallest scale (as for post-training quantization).
EPS = 2**-20


def fake_quantized(spec: QuantizationSpecBase) -> QuantizationSpecBase:
    """``spec`` with its observer replaced by a fake quantizer over a moving range; specs
    without an observer of their own (derived, shared, fixed) as they are."""
    if not isinstance(spec, QuantizationSpec):
        return spec
    weight = spec.quant_min is not None and spec.quant_min == -(spec.quant_max or 0)
    per_channel = spec.qscheme in (torch.per_channel_symmetric, torch.per_channel_affine)
    averaging = WEIGHT_AVERAGING if weight else ACTIVATION_AVERAGING
    if per_channel:
        observer = MovingAveragePerChannelMinMaxObserver.with_args(
            averaging_constant=averaging, ch_axis=spec.ch_axis or 0, eps=EPS
        )
    else:
        observer = MovingAverageMinMaxObserver.with_args(averaging_constant=averaging, eps=EPS)
    return replace(spec, observer_or_fake_quant_ctr=FakeQuantize.with_args(observer=observer))


def fake_quantize_annotations(model: GraphModule) -> None:
    """Every annotation of ``model`` with fake quantizers (``fake_quantized``); a spec object
    shared by several annotations stays one object, so its tensor keeps one fake quantizer."""
    made: dict[int, QuantizationSpecBase] = {}

    def convert(spec: QuantizationSpecBase) -> QuantizationSpecBase:
        if id(spec) not in made:
            made[id(spec)] = fake_quantized(spec)
        return made[id(spec)]

    for node in model.graph.nodes:
        annotation = node.meta.get("quantization_annotation")
        if annotation is None:
            continue
        annotation.input_qspec_map = {
            arg: convert(spec) for arg, spec in annotation.input_qspec_map.items()
        }
        if annotation.output_qspec is not None:
            annotation.output_qspec = convert(annotation.output_qspec)
