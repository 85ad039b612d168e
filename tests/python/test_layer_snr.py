"""Where the error enters: per-layer SNR of the quantized graph against the float model,
checked against SNRs the test computes itself from the float module and the PT2E graph."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from cortex_m_nn.check.layer_snr import layer_snr
from cortex_m_nn.core.target import Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.pipeline import compile_quantized, quantize
from cortex_m_nn.report import compile_report as report


def snr_db(real: torch.Tensor, approx: torch.Tensor) -> float:
    real, approx = real.double(), approx.double()
    return 10 * math.log10(float(real.pow(2).sum()) / float((real - approx).pow(2).sum()))


class ConvBatchNormLinear(nn.Module):
    """A batch norm PT2E folds into the convolution, with a large affine part so that the
    value before it is far from the value after it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.norm = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 6 * 6, 5)
        with torch.no_grad():
            self.norm.weight.fill_(6.0)
            self.norm.bias.fill_(4.0)
            self.norm.running_mean.uniform_(-1, 1)
            self.norm.running_var.uniform_(0.5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.norm(self.conv(x))).flatten(1))


@pytest.fixture(scope="module")
def quantized():
    torch.manual_seed(0)
    module = ConvBatchNormLinear().eval()
    source = ModelSource("conv_bn_linear", module, (torch.randn(1, 3, 6, 6),))
    calibration = synthetic(source.example_inputs, count=6)
    graphs = quantize(source, calibration, progress=False)
    return module, source, calibration, graphs


def test_model_output_snr_is_the_end_to_end_snr(quantized) -> None:
    module, _, calibration, (float_graph, pt2e) = quantized
    rows = layer_snr(float_graph, pt2e, calibration.samples)
    with torch.no_grad():
        real = torch.cat([module(*s) for s in calibration.samples])
        ours = torch.cat([pt2e(*s) for s in calibration.samples])
    assert rows[-1].op == "linear"
    # the float graph is equalized (exact in float, up to float rounding)
    assert rows[-1].snr_db == pytest.approx(snr_db(real, ours), abs=1e-3)


def test_input_snr_is_its_quantization_noise(quantized) -> None:
    _, _, calibration, (float_graph, pt2e) = quantized
    first = layer_snr(float_graph, pt2e, calibration.samples)[0]
    quantize_per_tensor = torch.ops.quantized_decomposed.quantize_per_tensor.default
    quantize_input = next(
        n
        for n in pt2e.graph.nodes
        if n.target == quantize_per_tensor and n.args[0].op == "placeholder"
    )
    scale, zero_point = quantize_input.args[1:3]
    real = torch.cat([s[0] for s in calibration.samples])
    fake = torch.fake_quantize_per_tensor_affine(real, scale, zero_point, -128, 127)
    assert (first.op, first.input_snr_db, first.drop_db) == ("placeholder", None, None)
    assert first.snr_db == pytest.approx(snr_db(real, fake), abs=1e-6)


def test_a_folded_batch_norm_is_compared_after_the_norm(quantized) -> None:
    module, _, calibration, (float_graph, pt2e) = quantized
    rows = {row.op: row for row in layer_snr(float_graph, pt2e, calibration.samples)}
    layer = rows["conv2d+relu"]
    assert layer.module == "conv (Conv2d)"
    with torch.no_grad():
        after = torch.cat([torch.relu(module.norm(module.conv(*s))) for s in calibration.samples])
        before = torch.cat([torch.relu(module.conv(*s)) for s in calibration.samples])
    assert snr_db(after, before) < 5  # comparing with the value before the norm would show it
    assert layer.snr_db > 25
    assert layer.drop_db == pytest.approx(layer.input_snr_db - layer.snr_db)


def test_report_names_the_layers_that_lose_most(quantized) -> None:
    _, source, calibration, graphs = quantized
    compiled = compile_quantized(source, Target.parse("cortex-m55"), calibration, graphs)
    rows = layer_snr(*graphs, calibration.samples)
    document = report.as_dict(compiled, None, rows)
    assert [r["node"] for r in document["layers"]] == [r.name for r in rows]
    text = report.to_text(document)
    assert "where the error enters" in text
    worst = max(rows, key=lambda r: r.drop_db or 0.0)
    marked = [line for line in text.splitlines() if line.endswith("<- most lost")]
    assert any(worst.module in line for line in marked)
    assert report.to_json(document)


def test_an_in_place_activation_is_named_with_the_layer_it_is_fused_onto() -> None:
    """A graph exported from in-place modules (torchvision's ``ReLU6(inplace=True)``) holds
    ``hardtanh_``: its row is the convolution's, as ``conv2d+hardtanh``, like the functional
    form's."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from cortex_m_nn.quantize.quantizer import CortexMQuantizer

    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU6(inplace=True), nn.Flatten()).eval()
    example = (torch.randn(1, 3, 6, 6),)
    exported = torch.export.export(module, example).module()
    targets = {str(n.target) for n in exported.graph.nodes}
    assert "aten.hardtanh_.default" in targets  # the in-place op survives export
    prepared = prepare_pt2e(exported, CortexMQuantizer())
    samples = [(torch.randn(1, 3, 6, 6),) for _ in range(4)]
    for sample in samples:
        prepared(*sample)
    rows = layer_snr(torch.export.export(module, example).module(), convert_pt2e(prepared), samples)
    fused = [r for r in rows if r.op.startswith("conv2d")]
    assert [r.op for r in fused] == ["conv2d+hardtanh"]
    assert fused[0].module.startswith("0 (Conv2d)")
