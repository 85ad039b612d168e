"""Bias correction (quantize/bias_correction.py): the weights it assumes are PT2E's, and the
corrected biases remove the mean output error of the weight-quantized model.

The weight-quantized models are computed here, independently: int8 symmetric weights
(scale max|w| / 127 per output channel for convolutions, per tensor for linear layers, round
half to even), run with ``F.conv2d`` / ``F.linear`` and compared with the float model.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from cortex_m_nn.core.options import QuantizationOptions, Weights
from cortex_m_nn.frontend.functional import functional_form
from cortex_m_nn.quantize import CortexMQuantizer, config
from cortex_m_nn.quantize.bias_correction import correct_biases, quantized_weight

torch.set_num_threads(1)


def _int8(weight: torch.Tensor, per_channel: bool) -> torch.Tensor:
    dims = tuple(range(1, weight.dim())) if per_channel else tuple(range(weight.dim()))
    scale = weight.abs().amax(dim=dims, keepdim=True) / 127
    return torch.clamp(torch.round(weight / scale), -127, 127) * scale


def test_quantized_weight_is_int8_symmetric_per_channel_or_per_tensor() -> None:
    generator = torch.Generator().manual_seed(0)
    conv = (
        torch.randn(6, 3, 3, 3, generator=generator) * torch.logspace(-2, 1, 6)[:, None, None, None]
    )
    linear = torch.randn(5, 7, generator=generator)
    torch.testing.assert_close(
        quantized_weight(conv, config.WEIGHT_PER_CHANNEL), _int8(conv, True), rtol=0, atol=1e-7
    )
    torch.testing.assert_close(
        quantized_weight(linear, config.WEIGHT_PER_TENSOR), _int8(linear, False), rtol=0, atol=1e-7
    )


def test_quantized_weight_is_what_pt2e_stores() -> None:
    torch.manual_seed(4)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(64, 3)).eval()
    x = (torch.randn(1, 3, 6, 6),)
    prepared = prepare_pt2e(torch.export.export(model, x).module(), CortexMQuantizer())
    prepared(*x)
    quantized = convert_pt2e(prepared)
    stored = [
        n.args[0]
        for n in quantized.graph.nodes
        if "dequantize" in str(n.target) and n.args[0].op == "get_attr" and n.args[-1] == torch.int8
    ]
    values = []
    for node in stored:  # (integer weight, its dequantize node)
        dequantize = next(iter(node.users))
        integers = getattr(quantized, node.target)
        scale = dequantize.args[1]
        scale = getattr(quantized, scale.target) if isinstance(scale, torch.fx.Node) else scale
        shape = (-1, *[1] * (integers.dim() - 1)) if integers.dim() == 4 else ()
        values.append(integers.float() * torch.as_tensor(scale).reshape(shape))
    conv = quantized_weight(model[0].weight.detach(), config.WEIGHT_PER_CHANNEL)
    linear = quantized_weight(model[3].weight.detach(), config.WEIGHT_PER_TENSOR)
    assert sorted(v.shape for v in values) == sorted([conv.shape, linear.shape])
    for value in values:
        expected = conv if value.shape == conv.shape else linear
        torch.testing.assert_close(value, expected, rtol=0, atol=0)


class Net(nn.Module):
    """conv → ReLU → conv (no bias) → ReLU → pool → linear: positive inputs after the ReLUs
    give the weight rounding a mean."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 6, 3, stride=2, padding=1, bias=False)
        self.fc = nn.Linear(6 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.b(F.relu(self.a(x))))
        return self.fc(torch.flatten(y, 1))

    def outputs(self, x: torch.Tensor, quantize: bool) -> list[torch.Tensor]:
        """Each layer's output, its weights int8 (``quantize``) or float."""
        w = {
            n: _int8(m.weight, n != "fc") if quantize else m.weight
            for n, m in self.named_children()
        }
        a = F.conv2d(x, w["a"], self.a.bias, padding=1)
        b = F.conv2d(F.relu(a), w["b"], self.b.bias, stride=2, padding=1)
        return [a, b, F.linear(torch.flatten(F.relu(b), 1), w["fc"], self.fc.bias)]


def _correct(
    model: nn.Module, samples: list[torch.Tensor], options: QuantizationOptions | None = None
) -> tuple[torch.fx.GraphModule, dict[str, torch.Tensor]]:
    """``model``'s exported graph (functional form) with the biases bias correction chooses on
    ``samples`` for the weights ``options`` give, and the corrections by layer."""
    graph = torch.export.export(model, (samples[0],)).module()
    functional_form(graph)
    return graph, correct_biases(graph, [(x,) for x in samples], options)


def _corrected(model: Net, samples: list[torch.Tensor]) -> tuple[Net, dict[str, torch.Tensor]]:
    """``model`` with the biases bias correction chooses on ``samples`` (read back from the
    corrected graph), and the corrections."""
    graph, corrections = _correct(model, samples)
    corrected = copy.deepcopy(model)
    with torch.no_grad():
        corrected.a.bias.copy_(graph.get_parameter("a.bias"))
        corrected.fc.bias.copy_(graph.get_parameter("fc.bias"))
        biases = [n for n in graph.graph.nodes if n.op == "get_attr" and "bias" in n.target]
        assert len(biases) == 3  # b had none: it got one
        added = next(n for n in biases if n.target not in ("a.bias", "fc.bias"))
        corrected.b.bias = nn.Parameter(getattr(graph, added.target).clone())
    return corrected, corrections


def _mean_errors(model: Net, reference: Net, samples: list[torch.Tensor]) -> list[torch.Tensor]:
    """Per layer, |mean error| per output channel of ``model`` with int8 weights against the
    float ``reference``."""
    with torch.no_grad():
        x = torch.cat(samples)
        quantized, exact = model.outputs(x, True), reference.outputs(x, False)
    errors = []
    for q, f in zip(quantized, exact, strict=True):
        dims = [d for d in range(q.dim()) if d != 1]
        errors.append((q - f).mean(dim=dims).abs())
    return errors


def test_correction_removes_the_mean_error_of_the_quantized_weights() -> None:
    torch.manual_seed(0)
    model = Net().eval()
    generator = torch.Generator().manual_seed(1)
    calibration = [torch.rand(4, 3, 8, 8, generator=generator) for _ in range(8)]
    held_out = [torch.rand(4, 3, 8, 8, generator=generator) for _ in range(8)]
    corrected, _ = _corrected(model, calibration)
    # every layer's output in the chain of int8-weight layers (errors propagate): the mean
    # error per channel at least a quarter smaller on average, on the calibration samples
    # and on others from the same distribution; the first layer's vanishes on calibration
    for samples in (calibration, held_out):
        before = _mean_errors(model, model, samples)
        after = _mean_errors(corrected, model, samples)
        for layer, (b, a) in enumerate(zip(before, after, strict=True)):
            assert float(a.mean()) < 0.75 * float(b.mean()), (layer, b.mean(), a.mean())
    first = _mean_errors(corrected, model, calibration)[0]
    assert float(first.max()) < 1e-3 * float(_mean_errors(model, model, calibration)[0].max())


def _one_layer(
    options: QuantizationOptions | None = None,
) -> tuple[nn.Conv2d, torch.Tensor, torch.fx.GraphModule, torch.Tensor]:
    """A single convolution, its calibration inputs (one batch), its graph with the bias
    corrected for the weights ``options`` give, and the correction."""
    torch.manual_seed(3)
    conv = nn.Conv2d(4, 6, 3, padding=1).eval()
    generator = torch.Generator().manual_seed(2)
    samples = [torch.rand(2, 4, 5, 5, generator=generator) + 0.5 for _ in range(4)]
    graph, corrections = _correct(conv, samples, options)
    return conv, torch.cat(samples), graph, next(iter(corrections.values()))


def _mean_weight_error(
    conv: nn.Conv2d, x: torch.Tensor, reference: Callable[[torch.Tensor, bool], torch.Tensor]
) -> torch.Tensor:
    """The mean output error per channel on ``x`` of ``conv`` with its weights as ``reference``
    quantizes them (per channel)."""
    with torch.no_grad():
        delta = reference(conv.weight, True) - conv.weight
        return F.conv2d(x, delta, padding=1).mean(dim=(0, 2, 3))


def test_correction_of_one_layer_is_its_mean_error_and_is_bounded() -> None:
    """A single convolution: the correction is exactly the mean weight-quantization error on
    the calibration inputs, and no larger than half a weight step times the input mass."""
    conv, x, graph, correction = _one_layer()
    expected = _mean_weight_error(conv, x, _int8)
    with torch.no_grad():
        torch.testing.assert_close(correction, expected, rtol=1e-4, atol=1e-7)
        torch.testing.assert_close(
            graph.get_parameter("bias"), conv.bias - expected, rtol=1e-5, atol=1e-6
        )
        step = conv.weight.abs().amax(dim=(1, 2, 3)) / 127
        bound = step / 2 * conv.weight[0].numel() * float(x.abs().max())
        assert bool((correction.abs() <= bound).all())
        assert float(correction.abs().max()) > 0


def _int4(weight: torch.Tensor, per_channel: bool) -> torch.Tensor:
    """int4 symmetric weights, scale max|w| / 7 per output channel (``--weights int4``)."""
    assert per_channel
    scale = weight.abs().amax(dim=tuple(range(1, weight.dim())), keepdim=True) / 7
    return torch.clamp(torch.round(weight / scale), -7, 7) * scale


@pytest.mark.parametrize(
    ("options", "reference"),
    [
        (QuantizationOptions(), _int8),
        (QuantizationOptions(weights=Weights.INT4), _int4),
        (QuantizationOptions(int4_layers=("conv2d",)), _int4),  # --weights auto's choice
        (QuantizationOptions(int4_layers=("another",)), _int8),
    ],
    ids=["int8", "int4", "int4-layers", "int4-elsewhere"],
)
def test_the_correction_uses_the_layers_weight_precision(options, reference) -> None:
    """The mean error corrected is that of the weights the options give the layer."""
    conv, x, _, correction = _one_layer(options)
    expected = _mean_weight_error(conv, x, reference)
    torch.testing.assert_close(correction, expected, rtol=1e-4, atol=1e-7)
