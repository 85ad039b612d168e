"""Cross-layer equalization (quantize/equalize.py): the float function is unchanged, the
per-channel weight ranges of each pair become equal, and only pairs whose intermediate ops
commute with a positive per-channel scale are rescaled.

References are computed here: the float modules themselves, weight ranges read from their
parameters, and per-channel int8 weight quantization written out in this file.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from cortex_m_nn.frontend.functional import functional_form
from cortex_m_nn.quantize.equalize import equalize, find_pairs, fold_batch_norms

torch.set_num_threads(1)


def _bn(channels: int) -> nn.BatchNorm2d:
    """A batch norm with non-trivial statistics and affine parameters (seeded by the caller)."""
    norm = nn.BatchNorm2d(channels)
    norm.running_mean = torch.randn(channels) * 0.5
    norm.running_var = torch.rand(channels) * 2 + 0.1
    norm.weight.data = torch.randn(channels)
    norm.bias.data = torch.randn(channels) * 0.1
    return norm


class Residual(nn.Module):
    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.a, self.na = nn.Conv2d(channels, channels, 3, padding=1, bias=False), _bn(channels)
        self.b, self.nb = nn.Conv2d(channels, channels, 3, padding=1, bias=False), _bn(channels)
        self.head = nn.Linear(channels, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x + self.nb(self.b(torch.relu(self.na(self.a(x))))))
        return self.head(y.mean(dim=(2, 3)))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: expand (ReLU6), depthwise (ReLU6), linear projection, residual."""

    def __init__(self, channels: int = 8, hidden: int = 24) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(channels, hidden, 1, bias=False),
            _bn(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
            _bn(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, channels, 1, bias=False),
            _bn(channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


def conv_relu_conv() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3), _bn(8), nn.ReLU(), nn.Conv2d(8, 6, 3))


def depthwise_separable() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False),
        _bn(8),
        nn.ReLU(),
        nn.Conv2d(8, 16, 1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 5),
    )


def mobilenet_v2_style() -> nn.Module:
    """A stem, two inverted residual blocks (the second without residual), pool, classifier:
    ReLU6 everywhere, so only the projection → next expansion pairs can be rescaled."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False),
        _bn(8),
        nn.ReLU(),
        InvertedResidual(8, 24),
        nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), _bn(16), nn.ReLU(), nn.Conv2d(16, 12, 1)),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(12 * 4 * 4, 10),
    )


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 16), nn.LeakyReLU(0.1), nn.Linear(16, 7), nn.ReLU())


#: name → (factory, input shape, pairs equalization must find)
MODELS = {
    "conv_relu_conv": (conv_relu_conv, (2, 3, 9, 9), 1),
    "depthwise_separable": (depthwise_separable, (2, 3, 12, 12), 3),
    # a → b (its output also feeds nothing else); b's output feeds the add: no pair
    "residual": (Residual, (2, 8, 6, 6), 1),
    # stem → expand through ReLU (x also feeds the residual add: no), 1×1 → 1×1 through ReLU,
    # 1×1 → linear through max pool and flatten
    "mobilenet_v2_style": (mobilenet_v2_style, (2, 3, 16, 16), 2),
    "mlp": (mlp, (4, 10), 1),
}


def exported(model: nn.Module, shape: tuple[int, ...]) -> torch.fx.GraphModule:
    graph = torch.export.export(model, (torch.randn(shape),)).module()
    functional_form(graph)
    return graph


@pytest.mark.parametrize("calibrated", [False, True], ids=["data-free", "calibrated"])
@pytest.mark.parametrize("name", MODELS)
def test_equalization_keeps_the_float_function(name: str, calibrated: bool) -> None:
    factory, shape, expected_pairs = MODELS[name]
    torch.manual_seed(0)
    model = factory().eval()
    original = copy.deepcopy(model.state_dict())
    graph = exported(model, shape)
    fold_batch_norms(graph)
    samples = [(torch.randn(shape) * 3,) for _ in range(2)] if calibrated else None
    pairs = equalize(graph, samples)
    assert len(pairs) == expected_pairs, [(p.first.name, p.second.name) for p in pairs]
    with torch.no_grad():
        for seed in range(3):
            x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
            reference, result = model(x), graph(x)
            tolerance = 1e-5 * float(reference.abs().max()) + 1e-6
            torch.testing.assert_close(result, reference, rtol=0, atol=tolerance)
    # the source model shares its parameters with the export: it must not have changed
    for key, value in model.state_dict().items():
        assert torch.equal(value, original[key]), key


def test_batch_norms_fold_into_the_layer_before() -> None:
    torch.manual_seed(1)
    model = mobilenet_v2_style().eval()
    graph = exported(model, (1, 3, 16, 16))
    assert fold_batch_norms(graph) == 5
    assert not [n for n in graph.graph.nodes if "batch_norm" in str(n.target)]
    x = torch.randn(1, 3, 16, 16)
    with torch.no_grad():
        torch.testing.assert_close(graph(x), model(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "activation",
    [nn.ReLU6(), nn.Hardtanh(-1.0, 1.0), nn.Hardswish(), nn.Sigmoid(), nn.Tanh()],
    ids=lambda a: type(a).__name__,
)
def test_no_pair_through_an_op_that_is_not_positive_homogeneous(activation: nn.Module) -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 1), activation, nn.Conv2d(4, 4, 1)).eval()
    assert find_pairs(exported(model, (1, 3, 4, 4))) == []


def test_no_pair_when_the_intermediate_value_has_another_reader() -> None:
    class TwoReaders(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c = nn.Conv2d(3, 4, 1), nn.Conv2d(4, 4, 1), nn.Conv2d(4, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.a(x))
            return self.b(y) + self.c(y)

    assert find_pairs(exported(TwoReaders().eval(), (1, 3, 4, 4))) == []


def _imbalanced_pair(groups: int) -> nn.Module:
    """conv → ReLU → conv whose first layer's channels span four orders of magnitude, the
    second compensating (the float function of a well-scaled pair)."""
    torch.manual_seed(2)
    first, second = nn.Conv2d(4, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1, groups=groups)
    factors = torch.logspace(-2, 2, 8)
    with torch.no_grad():
        first.weight *= factors.reshape(-1, 1, 1, 1)
        first.bias *= factors
        # input channel i: column i of a pointwise weight, filter i of a depthwise one
        second.weight /= (
            factors.reshape(1, -1, 1, 1) if groups == 1 else factors.reshape(-1, 1, 1, 1)
        )
    return nn.Sequential(first, nn.ReLU(), second).eval()


@pytest.mark.parametrize("groups", [1, 8], ids=["pointwise", "depthwise"])
def test_ranges_of_a_pair_become_the_geometric_mean(groups: int) -> None:
    """Known optimum: each channel's range becomes sqrt(r1 * r2) in both layers."""
    model = _imbalanced_pair(groups)
    w1, w2 = model[0].weight.detach(), model[2].weight.detach()
    r1 = w1.abs().amax(dim=(1, 2, 3))
    # input channel i of the second layer: column i (pointwise) or filter i (depthwise)
    r2 = w2.abs().amax(dim=(0, 2, 3)) if groups == 1 else w2.abs().amax(dim=(1, 2, 3))
    graph = exported(model, (1, 4, 6, 6))
    equalize(graph)
    e1, e2 = graph.get_parameter("0.weight"), graph.get_parameter("2.weight")
    q1 = e1.abs().amax(dim=(1, 2, 3))
    q2 = e2.abs().amax(dim=(0, 2, 3)) if groups == 1 else e2.abs().amax(dim=(1, 2, 3))
    expected = torch.sqrt(r1 * r2)
    torch.testing.assert_close(q1, expected, rtol=1e-5, atol=0)
    torch.testing.assert_close(q2, expected, rtol=1e-5, atol=0)
    spread = (r1.max() / r1.min(), q1.max() / q1.min())
    assert spread[1] < spread[0] / 100, spread


def _quantized_per_channel(weight: torch.Tensor) -> torch.Tensor:
    """int8 symmetric per output channel: scale max|w| / 127, round half to even."""
    scale = weight.abs().amax(dim=tuple(range(1, weight.dim())), keepdim=True) / 127
    return torch.clamp(torch.round(weight / scale), -127, 127) * scale


def test_equalization_reduces_the_weight_quantization_error() -> None:
    """On the imbalanced pointwise pair, with both layers' weights int8 per output channel,
    the output error against float drops (the second layer no longer spends its range on
    the large columns)."""
    model = _imbalanced_pair(1)
    graph = exported(model, (1, 4, 6, 6))
    equalize(graph)
    x = torch.randn(16, 4, 6, 6, generator=torch.Generator().manual_seed(5))

    def error(w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor) -> float:
        y = F.conv2d(
            F.relu(F.conv2d(x, _quantized_per_channel(w1), b1, padding=1)),
            _quantized_per_channel(w2),
            model[2].bias,
            padding=1,
        )
        return float((y - model(x)).pow(2).mean())

    with torch.no_grad():
        before = error(model[0].weight, model[0].bias, model[2].weight)
        after = error(
            graph.get_parameter("0.weight"),
            graph.get_parameter("0.bias"),
            graph.get_parameter("2.weight"),
        )
    assert after < before / 10, (before, after)


def test_calibrated_ranges_balance_the_activation_against_the_second_layer() -> None:
    """Known optimum with calibration samples: each channel's largest activation between the
    layers and the second layer's range for it both become sqrt(a * r2), a and r2 measured
    here on the original model."""
    model = _imbalanced_pair(1)
    generator = torch.Generator().manual_seed(7)
    samples = [(torch.randn(2, 4, 6, 6, generator=generator),) for _ in range(3)]

    def activation(first: nn.Module | None = None) -> torch.Tensor:
        conv = first or model[0]
        with torch.no_grad():
            values = torch.cat([F.relu(conv(x)) for (x,) in samples])
        return values.abs().amax(dim=(0, 2, 3))

    a, r2 = activation(), model[2].weight.detach().abs().amax(dim=(0, 2, 3))
    graph = exported(model, (2, 4, 6, 6))
    equalize(graph, samples)
    first = copy.deepcopy(model[0])
    first.weight.data, first.bias.data = (
        graph.get_parameter("0.weight"),
        graph.get_parameter("0.bias"),
    )
    expected = torch.sqrt(a * r2)
    torch.testing.assert_close(activation(first), expected, rtol=1e-5, atol=0)
    q2 = graph.get_parameter("2.weight").abs().amax(dim=(0, 2, 3))
    torch.testing.assert_close(q2, expected, rtol=1e-5, atol=0)
