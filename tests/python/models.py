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


class WithRmsNorm(nn.Module):
    """An RMS norm, which no kernel computes: lowered only with --allow-fallback."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.norm = nn.RMSNorm(6)

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


def with_rms_norm() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(WithRmsNorm, 1, 3, 8, 8)


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


class Products(nn.Module):
    """mul: activation × activation (relu fused), × per-channel mean [1, C, 1, 1], × a
    spatial map [1, 1, H, W], × a scalar tensor [1, 1, 1, 1], × a learned [C, 1, 1] scale,
    × a number."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_a = nn.Conv2d(3, 8, 3, padding=1)
        self.conv_b = nn.Conv2d(3, 8, 3, padding=1)
        self.gate = nn.Conv2d(8, 1, 1)
        self.scale = nn.Parameter(torch.rand(8, 1, 1) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.conv_a(x), self.conv_b(x)
        y = torch.relu(a * b)
        y = y * a.mean((2, 3), keepdim=True)
        y = self.gate(b) * y
        y = y * nn.functional.adaptive_avg_pool2d(self.gate(a), 1)
        return (y * self.scale) * 0.5


class Differences(nn.Module):
    """sub: activation − activation (relu fused), − per-channel mean, per-channel − tensor,
    − a learned [C, H, W] constant (channels-first, permuted at compile time), − a number."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_a = nn.Conv2d(3, 8, 3, padding=1)
        self.conv_b = nn.Conv2d(3, 8, 3, padding=1)
        self.offset = nn.Parameter(torch.randn(8, 6, 6) * 0.1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = self.conv_a(x), self.conv_b(x)
        y = torch.relu(a - b)
        y = y - y.mean((2, 3), keepdim=True)
        z = b.mean((2, 3), keepdim=True) - a
        return y - self.offset, z - 0.25


class Extremes(nn.Module):
    """maximum / minimum: same shape, against a per-channel mean and a scalar tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_a = nn.Conv2d(3, 8, 3, padding=1)
        self.conv_b = nn.Conv2d(3, 8, 3, padding=1)
        self.gate = nn.Conv2d(8, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.conv_a(x), self.conv_b(x)
        y = torch.maximum(a, b)
        y = torch.minimum(y, a.mean((2, 3), keepdim=True))
        y = torch.maximum(nn.functional.adaptive_avg_pool2d(self.gate(b), 1), y)
        return torch.minimum(y, b)


class Sums(nn.Module):
    """add with broadcasting: per-channel, scalar tensor, spatial map, number; relu fused."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gate = nn.Conv2d(8, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.conv(x)
        y = torch.relu(a + a.mean((2, 3), keepdim=True))
        y = nn.functional.adaptive_avg_pool2d(self.gate(a), 1) + y
        y = y + self.gate(a)
        return y + 1.5


class Vectors(nn.Module):
    """2-D (linear) operands: mul, sub, add, maximum, minimum and a [F] constant."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(10, 16)
        self.second = nn.Linear(10, 16)
        self.bias = nn.Parameter(torch.randn(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, g = self.first(x), self.second(x)
        y = torch.minimum(torch.maximum(h, g), h)
        return (h * g - y) + self.bias


def products() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(Products, 1, 3, 6, 6)


def differences() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(Differences, 1, 3, 6, 6)


def extremes() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(Extremes, 1, 3, 6, 6)


def sums() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(Sums, 1, 3, 6, 6)


def vectors() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(Vectors, 2, 10)


def lone_vectors() -> tuple[nn.Module, tuple[torch.Tensor]]:
    """Vectors on one input of no batch dimension: every operand 1-D."""
    return seeded(Vectors, 10)


class ProbabilityFloor(nn.Module):
    """maximum of a softmax (fixed output quantization) and a linear: the shared quantization
    needs a requantization of the softmax output."""

    def __init__(self) -> None:
        super().__init__()
        self.logits = nn.Linear(10, 8)
        self.floor = nn.Linear(10, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.softmax(self.logits(x), -1), self.floor(x))


def probability_floor() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(ProbabilityFloor, 1, 10)


class GroupedConv(nn.Module):
    """A grouped transposed convolution (groups=2): no CMSIS-NN kernel, a fallback."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.grouped = nn.ConvTranspose2d(8, 8, 3, padding=1, groups=2)
        self.linear = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        y = self.grouped(y)  # the unsupported operator
        return self.linear(y.mean((2, 3)))


def grouped_conv() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(GroupedConv, 1, 3, 8, 8)


class Recurrent(nn.Module):
    """conv → a plain RNN over the width → linear: the RNN stays fp32 (with
    --allow-fallback)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 6, (1, 3), padding=(0, 1))
        self.rnn = nn.RNN(6, 5, batch_first=True)
        self.linear = nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x).squeeze(2).transpose(1, 2)  # [N, W, C]: W time steps of C features
        out, _ = self.rnn(y)
        return self.linear(out)


def recurrent() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(Recurrent, 1, 2, 1, 7)


class Split(nn.Module):
    """unsafe_split: a float op with two outputs (one ``alloc`` of two tensors)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = self.conv(x).unsafe_split(4, dim=1)  # torch.split itself is lowered (slices)
        return a * 2.0, b


def split() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(Split, 1, 3, 4, 4)


class PreparedMix(nn.Module):
    """One call of each operator with a prepared form (cortex_m_nn.embed.prepared), of known
    geometry:
    conv 3→8 3x3 stride 2 pad 1, depthwise 3x3 pad 1, a residual add of 8x8x8, 2x2 average
    pool, linear 128→5, softmax over the 5."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pool = nn.AvgPool2d(2)
        self.linear = nn.Linear(128, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv(x))
        x = self.pool(x + torch.relu(self.depthwise(x)))
        return torch.softmax(self.linear(x.permute(0, 2, 3, 1).flatten(1)), dim=-1)


def prepared_mix() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(PreparedMix, 1, 3, 16, 16)


class Excite(nn.Module):
    """conv → hardswish → squeeze-excitation (mean, 1×1 conv, relu, 1×1 conv, hardsigmoid,
    multiply) → conv feeding both a gelu and an add: tensors read through one function, and
    one read two ways."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.reduce = nn.Conv2d(8, 4, 1)
        self.expand = nn.Conv2d(4, 8, 1)
        self.last = nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.hardswish(self.conv(x) * 3)
        scale = y.mean((2, 3), keepdim=True)
        scale = nn.functional.hardsigmoid(self.expand(torch.relu(self.reduce(scale))) * 4)
        z = self.last(y * scale)
        return nn.functional.gelu(z, approximate="tanh") + z


def excite() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(Excite, 1, 3, 8, 8)
