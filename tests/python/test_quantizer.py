"""CortexMQuantizer: the quantization parameters PT2E derives from its annotations.

Each check reads the ``convert_pt2e`` graph (quantize/dequantize nodes and their constant
arguments) and compares it with what CMSIS-NN's s8 kernels need, computed independently from
the float model and the calibration data.
"""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from cortex_m_nn.core.options import QuantizationOptions, RangeMethod
from cortex_m_nn.quantize import CortexMQuantizer

from .models import with_rms_norm

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed
QUANTIZE = qd.quantize_per_tensor.default
DEQUANTIZE = qd.dequantize_per_tensor.default
DEQUANTIZE_PER_CHANNEL = qd.dequantize_per_channel.default


class ConvNet(nn.Module):
    """conv → relu → avg pool → flatten → view → linear → softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.linear = nn.Linear(6 * 2 * 2, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.avg_pool2d(torch.relu(self.conv(x)), 4)
        y = torch.flatten(y, 1).view(1, -1)
        return torch.softmax(self.linear(y), dim=-1)


def _samples(shape: tuple[int, ...], count: int = 8) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return [torch.randn(shape, generator=generator) for _ in range(count)]


def _quantize(module: nn.Module, samples: list[torch.Tensor]) -> GraphModule:
    exported = torch.export.export(module, (samples[0],)).module()
    # min/max ranges: these tests check the ranges calibration saw (test_ranges.py: the others)
    prepared = prepare_pt2e(exported, CortexMQuantizer(QuantizationOptions(RangeMethod.MINMAX)))
    with torch.no_grad():
        for sample in samples:
            prepared(sample)
    return convert_pt2e(prepared)


@pytest.fixture(scope="module")
def conv_net() -> tuple[nn.Module, list[torch.Tensor], GraphModule]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(2)
        module = ConvNet().eval()
        # Channels of very different magnitudes: one per-tensor scale would not fit them all.
        with torch.no_grad():
            module.conv.weight.mul_(torch.logspace(-2, 1, 6).view(6, 1, 1, 1))
    samples = _samples((1, 3, 8, 8))
    return module, samples, _quantize(module, samples)


def _constant(graph_module: GraphModule, value: object) -> torch.Tensor:
    if isinstance(value, Node):
        assert value.op == "get_attr", value.format_node()
        return functools.reduce(getattr, value.target.split("."), graph_module)
    return torch.tensor(value)


def _only(graph_module: GraphModule, target: object) -> Node:
    (node,) = [n for n in graph_module.graph.nodes if n.target == target]
    return node


def _qparams(graph_module: GraphModule, dequantize: Node) -> tuple[torch.Tensor, ...]:
    """(int values, scale, zero point, quant_min, quant_max, dtype) of a dequantize node."""
    assert dequantize.target in (DEQUANTIZE, DEQUANTIZE_PER_CHANNEL), dequantize.format_node()
    values = _constant(graph_module, dequantize.args[0])
    scale = _constant(graph_module, dequantize.args[1]).double()
    zero_point = _constant(graph_module, dequantize.args[2])
    low, high, dtype = dequantize.args[-3:]
    return values, scale, zero_point, low, high, dtype


def _input_scale(op: Node) -> float:
    source = op.args[0]
    assert source.target == DEQUANTIZE, source.format_node()
    return float(source.args[1])


def _output_quantize(node: Node) -> Node:
    (user,) = node.users
    assert user.target == QUANTIZE, user.format_node()
    return user


def test_conv_weights_are_per_channel_symmetric_int8(conv_net) -> None:
    module, _, quantized = conv_net
    conv = _only(quantized, aten.conv2d.default)
    weight = conv.args[1]
    assert weight.target == DEQUANTIZE_PER_CHANNEL
    assert weight.args[3] == 0  # axis: output channels
    values, scale, zero_point, low, high, dtype = _qparams(quantized, weight)
    assert (dtype, low, high) == (torch.int8, -127, 127)
    assert values.dtype == torch.int8 and int(values.min()) >= -127
    assert torch.equal(zero_point, torch.zeros_like(zero_point))
    float_weight = module.conv.weight.detach().double()
    expected = float_weight.abs().amax((1, 2, 3)) / 127
    torch.testing.assert_close(scale, expected, rtol=1e-6, atol=0)
    # Symmetric per channel: every channel reaches ±127, and the values are the weights.
    assert values.abs().amax((1, 2, 3)).tolist() == [127] * len(scale)
    dequantized = values.double() * scale.view(-1, 1, 1, 1)
    assert (dequantized - float_weight).abs().le(scale.view(-1, 1, 1, 1) / 2 + 1e-9).all()


def test_conv_bias_is_int32_at_input_times_weight_scale(conv_net) -> None:
    module, _, quantized = conv_net
    conv = _only(quantized, aten.conv2d.default)
    _, weight_scale, *_ = _qparams(quantized, conv.args[1])
    bias = conv.args[2]
    assert bias.target == DEQUANTIZE_PER_CHANNEL and bias.args[3] == 0
    values, scale, zero_point, low, high, dtype = _qparams(quantized, bias)
    assert (dtype, low, high) == (torch.int32, -(2**31), 2**31 - 1)
    assert values.dtype == torch.int32
    assert torch.equal(zero_point, torch.zeros_like(zero_point))
    torch.testing.assert_close(scale, _input_scale(conv) * weight_scale, rtol=1e-6, atol=0)
    float_bias = module.conv.bias.detach().double()
    assert (values.double() * scale - float_bias).abs().le(scale / 2 + 1e-12).all()


def test_linear_weight_per_tensor_symmetric_and_bias(conv_net) -> None:
    module, _, quantized = conv_net
    linear = _only(quantized, aten.linear.default)
    values, scale, zero_point, low, high, dtype = _qparams(quantized, linear.args[1])
    assert linear.args[1].target == DEQUANTIZE
    assert (dtype, low, high, int(zero_point)) == (torch.int8, -127, 127, 0)
    float_weight = module.linear.weight.detach().double()
    torch.testing.assert_close(scale, float_weight.abs().max() / 127, rtol=1e-6, atol=0)
    assert int(values.abs().max()) == 127
    bias = linear.args[2]
    assert bias.target == DEQUANTIZE
    bias_values, bias_scale, bias_zero, *_, bias_dtype = _qparams(quantized, bias)
    assert bias_dtype == torch.int32 and bias_values.dtype == torch.int32
    assert int(bias_zero) == 0
    torch.testing.assert_close(bias_scale, _input_scale(linear) * scale, rtol=1e-6, atol=0)


def test_activations_are_int8_full_range(conv_net) -> None:
    _, samples, quantized = conv_net
    quantizes = [n for n in quantized.graph.nodes if n.target == QUANTIZE]
    assert len(quantizes) >= 5  # input, relu, pool, flatten/view, linear, softmax
    for node in quantizes:
        assert tuple(node.args[3:6]) == (-128, 127, torch.int8), node.format_node()
        assert -128 <= int(node.args[2]) <= 127
        assert float(node.args[1]) > 0
    # The input's parameters span the calibration data's whole range (asymmetric).
    (first,) = [n for n in quantizes if n.args[0].op == "placeholder"]
    low = min(float(s.min()) for s in samples)
    high = max(float(s.max()) for s in samples)
    torch.testing.assert_close(float(first.args[1]), (high - low) / 255, rtol=1e-5, atol=0)
    assert int(first.args[2]) == round(-128 - low / ((high - low) / 255))


def test_relu_fuses_into_the_conv_output_range(conv_net) -> None:
    module, samples, quantized = conv_net
    conv = _only(quantized, aten.conv2d.default)
    (relu,) = conv.users  # no quantize/dequantize pair between conv and relu
    assert relu.target == aten.relu.default
    output = _output_quantize(relu)
    with torch.no_grad():
        high = max(float(torch.relu(module.conv(s)).max()) for s in samples)
    torch.testing.assert_close(float(output.args[1]), high / 255, rtol=1e-5, atol=0)
    assert int(output.args[2]) == -128  # [0, max] uses all 256 codes


@pytest.mark.parametrize(
    "target", [aten.avg_pool2d.default, aten.flatten.using_ints, aten.view.default]
)
def test_shape_and_pool_ops_share_their_input_qparams(conv_net, target) -> None:
    _, _, quantized = conv_net
    node = _only(quantized, target)
    source = node.args[0]
    assert source.target == DEQUANTIZE
    output = _output_quantize(node)
    assert output.args[1:6] == source.args[1:6]


@pytest.mark.parametrize(
    "target", [aten.avg_pool2d.default, aten.flatten.using_ints, aten.view.default]
)
def test_shape_and_pool_ops_share_one_observer(conv_net, target) -> None:
    """Sharing, not coincidence: a view's own observer would see the same values."""
    module, samples, _ = conv_net
    prepared = prepare_pt2e(torch.export.export(module, (samples[0],)).module(), CortexMQuantizer())
    node = _only(prepared, target)
    (observer,) = node.users
    assert observer.op == "call_module" and node.args[0].op == "call_module"
    assert prepared.get_submodule(observer.target) is prepared.get_submodule(node.args[0].target)


def test_shared_qparams_are_not_what_the_op_alone_would_get(conv_net) -> None:
    """The pool's output range is narrower than its input's: sharing is a choice, not luck."""
    module, samples, quantized = conv_net
    pool = _only(quantized, aten.avg_pool2d.default)
    with torch.no_grad():
        pooled = max(
            float(nn.functional.avg_pool2d(torch.relu(module.conv(s)), 4).max()) for s in samples
        )
    assert float(_output_quantize(pool).args[1]) > 1.05 * pooled / 255


def test_softmax_output_is_fixed_at_one_over_256(conv_net) -> None:
    _, _, quantized = conv_net
    softmax = _only(quantized, aten.softmax.int)
    assert softmax.args[0].target == DEQUANTIZE  # its input is int8 too
    output = _output_quantize(softmax)
    assert float(output.args[1]) == 1.0 / 256 and int(output.args[2]) == -128


def test_unsupported_op_is_left_unannotated() -> None:
    module, (example,) = with_rms_norm()
    exported = torch.export.export(module, (example,)).module()
    annotated = CortexMQuantizer().annotate(exported)
    norm = _only(annotated, aten.rms_norm.default)
    assert "quantization_annotation" not in norm.meta
    conv = _only(annotated, aten.conv2d.default)
    assert conv.meta["quantization_annotation"].output_qspec is not None

    quantized = _quantize(module, _samples(tuple(example.shape)))
    norm = _only(quantized, aten.rms_norm.default)
    assert norm.args[0].target == DEQUANTIZE  # the conv before it is quantized
    assert all(user.target not in (QUANTIZE, DEQUANTIZE) for user in norm.users), [
        user.format_node() for user in norm.users
    ]
    assert [user.op for user in norm.users] == ["output"]


def test_nonfinite_calibration_is_refused_before_calibrating() -> None:
    # The compile API refuses what the CLI refuses: an observer cannot range NaN or ±Inf.
    import math

    from cortex_m_nn.core.errors import CompileError
    from cortex_m_nn.frontend.calibration import Calibration
    from cortex_m_nn.frontend.model_source import ModelSource
    from cortex_m_nn.pipeline import quantize

    module = torch.nn.Sequential(torch.nn.Linear(4, 2)).eval()
    clean = torch.ones(1, 4)
    samples = [(clean,), (clean,), (torch.tensor([[1.0, math.inf, 0.0, 0.0]]),), (clean,)]
    calibration = Calibration(samples, "hand-made", synthetic=False)
    with pytest.raises(CompileError, match=r"input 0 of sample 2 holds NaN or ±Inf \(1 of 4"):
        quantize(ModelSource("linear", module, (clean,)), calibration, progress=False)
