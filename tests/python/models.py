"""Small models for pipeline tests, each exercising a group of lowering rules."""

from __future__ import annotations

import torch
from torch import nn


class ConvStack(nn.Module):
    """conv (relu) → depthwise (relu6) + pointwise residual add → pools → linear → softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.depthwise = nn.Conv2d(8, 16, 3, padding=1, groups=8)
        self.pointwise = nn.Conv2d(8, 16, 1)
        self.linear = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        z = nn.functional.relu6(self.depthwise(y)) + self.pointwise(y)
        z = nn.functional.avg_pool2d(z, 2)
        pooled = z.mean((2, 3))
        return torch.softmax(self.linear(pooled).clamp(-2.0, 2.0), dim=-1)


class Pools(nn.Module):
    """adaptive average pool, mean with keepdim, flatten, squeeze, hardtanh."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, padding=1, dilation=1)
        self.linear = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = nn.functional.hardtanh(self.conv(x), -1.0, 1.0)
        a = nn.functional.adaptive_avg_pool2d(y, 1)
        b = y.mean((2, 3), keepdim=True)
        return self.linear(torch.flatten(a + b, 1)), b.squeeze()


class WithLayerNorm(nn.Module):
    """A layer norm, which has no CMSIS-NN kernel: lowered only with --allow-fallback."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.norm = nn.LayerNorm(6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(x))


def seeded(factory: type[nn.Module], *shape: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        module = factory().eval()
        example = torch.randn(*shape)
    return module, (example,)


def conv_stack() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(ConvStack, 1, 3, 12, 12)


def pools() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(Pools, 1, 4, 6, 6)


def with_layer_norm() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(WithLayerNorm, 1, 3, 8, 8)


class SharedConv(nn.Module):
    """One convolution applied to two inputs: PT2E gives its bias a single scale."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        with torch.no_grad():
            self.conv.bias.copy_(torch.tensor([2.0, -2.0, 1.5, -1.0]))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.conv(x), self.conv(y)


class ConvOutput(nn.Module):
    """A 4-D graph output: leaves through a channels-last → NCHW dequantize."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)
