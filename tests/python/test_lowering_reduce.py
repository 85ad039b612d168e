"""Reductions (sum, mean, amax, amin over any dims, keepdim or not) lower to
``cortex_m_nn::reduce`` and batch norms no convolution absorbed to a depthwise 1×1
convolution: NCHW models compile with no fallback and verify against PT2E (≤ 1 LSB)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.target import Target

from .activation_models import Function, seeded

#: name → (the reduction of a conv's [1, 8, 6, 6] output, reduces that are not average pools)
REDUCTIONS = {
    "sum_channels": (lambda x: x.sum(1), 1),
    "sum_keepdim": (lambda x: x.sum((1, 3), keepdim=True), 1),
    "sum_all": (lambda x: x.sum(), 1),
    "mean_channels_keepdim": (lambda x: x.mean(1, keepdim=True), 1),
    "mean_width": (lambda x: x.mean(-1), 1),
    "mean_all": (lambda x: x.mean(), 1),
    "mean_hw": (lambda x: x.mean((2, 3)), 0),  # the average-pool fast path
    "amax_channels": (lambda x: x.amax(1), 1),
    "amax_hw_keepdim": (lambda x: x.amax((2, 3), keepdim=True), 1),
    "amin_height": (lambda x: torch.amin(x, -2), 1),
}


class ConvThen(nn.Module):
    def __init__(self, function) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.function = function

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(self.conv(x))


def _no_fallbacks(compiled) -> None:
    assert not [r for r in compiled.records if not r.lowered]


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_each_reduction_lowers(name: str) -> None:
    function, reduces = REDUCTIONS[name]
    module, inputs = seeded(ConvThen(function), 1, 3, 6, 6)
    compiled, verification = check_dialect(
        module, inputs, after={"cortex_m_nn.reduce": reduces, "cortex_m_nn.conv2d": 1}
    )
    _no_fallbacks(compiled)
    assert verification.passed
    with torch.no_grad():
        (output,) = compiled.lowered(*inputs)
        assert output.shape == function(module.conv(inputs[0])).shape


def test_reductions_of_2d_and_3d_tensors() -> None:
    class Tokens(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(6, 8)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            y = self.linear(x)  # [2, 5, 8]
            return y.mean(1), y.sum(-1, keepdim=True), y.amax(0)

    module, inputs = seeded(Tokens(), 2, 5, 6)
    compiled, _ = check_dialect(module, inputs, after={"cortex_m_nn.reduce": 3})
    _no_fallbacks(compiled)


class BatchNorms(nn.Module):
    """BatchNorm2d on the input, after an add and after a pool: none follows a conv."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.BatchNorm2d(3)
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.after_add = nn.BatchNorm2d(3)
        self.after_pool = nn.BatchNorm2d(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.first(x)
        y = self.after_add(self.conv(x) + x)
        return self.after_pool(nn.functional.max_pool2d(y, 2))


def _statistics(module: nn.Module) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        for norm in module.modules():
            if isinstance(norm, nn.BatchNorm1d | nn.BatchNorm2d):
                norm.running_mean.uniform_(-1, 1)
                norm.running_var.uniform_(0.25, 4)
                norm.weight.data.uniform_(-2, 2)
                norm.bias.data.uniform_(-1, 1)
    return module.eval()


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m33"])
def test_unfoldable_batch_norm2d_is_a_depthwise_convolution(target: str) -> None:
    module, inputs = seeded(BatchNorms(), 1, 3, 8, 8)
    compiled, verification = check_dialect(
        _statistics(module),
        inputs,
        target=Target.parse(target),
        before={"aten.batch_norm": 0, "aten.conv2d": 4},
        after={"cortex_m_nn.depthwise_conv2d": 3, "cortex_m_nn.conv2d": 1},
    )
    _no_fallbacks(compiled)
    assert verification.passed


@pytest.mark.parametrize(
    ("factory", "shape"),
    [
        (lambda: nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.BatchNorm1d(5)), (4, 6)),
        (lambda: nn.Sequential(nn.Conv1d(3, 4, 3), nn.ReLU(), nn.BatchNorm1d(4)), (2, 3, 10)),
    ],
    ids=["after-linear", "after-conv1d-relu"],
)
def test_unfoldable_batch_norm1d_is_a_depthwise_convolution(factory, shape) -> None:
    module, inputs = seeded(Function(lambda x: x), *shape)  # the seeded input
    compiled, _ = check_dialect(
        _statistics(factory()),
        inputs,
        before={"aten.batch_norm": 0},
        after={"cortex_m_nn.depthwise_conv2d": 1},
    )
    _no_fallbacks(compiled)


def test_batch_norm_after_a_conv_still_folds() -> None:
    module = _statistics(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)))
    _, inputs = seeded(Function(lambda x: x), 1, 3, 6, 6)
    check_dialect(
        module, inputs, before={"aten.conv2d": 1}, after={"cortex_m_nn.depthwise_conv2d": 0}
    )
