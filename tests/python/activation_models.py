"""Small models whose element-wise functions lower to ``cortex_m_nn::lut`` tables."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F


class Function(nn.Module):
    """A plain function as a module: ``x * x``, ``x / 4.0`` as a model's ``forward`` writes it."""

    def __init__(self, function: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.function = function

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x)


#: name → a factory of the activation module, one per function the tables serve.
ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "hardswish": nn.Hardswish,
    "hardsigmoid": lambda: nn.Hardsigmoid(inplace=True),
    "sigmoid": nn.Sigmoid,
    "tanh": nn.Tanh,
    "gelu": nn.GELU,
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
    "silu": lambda: nn.SiLU(inplace=True),
    "leaky_relu": lambda: nn.LeakyReLU(0.1),
    "elu": lambda: nn.ELU(alpha=0.5, inplace=True),
    "mish": nn.Mish,
    "softplus": nn.Softplus,
    "celu": lambda: nn.CELU(0.5),
    "selu": nn.SELU,
    "log_sigmoid": nn.LogSigmoid,
    "prelu": nn.PReLU,
    "prelu_per_channel": lambda: nn.PReLU(8, init=0.1),
    "abs": lambda: Function(torch.abs),
    "neg": lambda: Function(torch.neg),
    "x_times_x": lambda: Function(lambda x: x * x),
    "pow_2": lambda: Function(lambda x: x**2),
    "one_minus": lambda: Function(lambda x: 1 - x),
}


class ConvActivation(nn.Module):
    """conv → activation → depthwise conv → activation → pointwise conv."""

    def __init__(self, activation: nn.Module) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pointwise = nn.Conv2d(8, 4, 1)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.activation(self.conv(x))
        return self.pointwise(self.activation(self.depthwise(y)))


class EveryActivation(nn.Module):
    """A conv before each activation of ``ACTIVATIONS``, then a 1x1 conv."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.activations = nn.ModuleList(make() for make in ACTIVATIONS.values())
        self.convs = nn.ModuleList(nn.Conv2d(8, 8, 1) for _ in ACTIVATIONS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        for activation, conv in zip(self.activations, self.convs, strict=True):
            y = conv(activation(y))
        return y


class InputRelu(nn.Module):
    """relu on the model input: there is no producer to fuse it into."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(torch.relu(x))


class ResidualRelu6(nn.Module):
    """relu6 of an add whose output also feeds the next add: it cannot be the add's range."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)
        self.conv2 = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x) + x
        return self.conv2(F.relu6(y)) + y


class ClampAfterPoolAndView(nn.Module):
    """hardtanh after a global pool (fuses into the pool's clamp) and clamp after flatten (shares
    its input's range: a table)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.linear = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = F.hardtanh(F.adaptive_avg_pool2d(self.conv(x), 1), -0.05, 0.05)
        return self.linear(torch.flatten(pooled, 1).clamp(min=-0.02))


class TanhThenClamp(nn.Module):
    """tanh followed by a clamp: one table computes both."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv(x)).clamp(-0.5, 0.5)


class DoubleRelu(nn.Module):
    """relu(relu(conv)): the first fuses into the conv, the second changes nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.relu(self.conv(x)))


class GeluMlp(nn.Module):
    """linear → gelu → linear → sigmoid on a [batch, tokens, features] tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 16)
        self.down = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.down(F.gelu(self.up(x))))


class ChainedTables(nn.Module):
    """sigmoid after an add and tanh right after the sigmoid: table after table."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(torch.sigmoid(self.conv(x) + x))


def seeded(module: nn.Module, *shape: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        for parameter in module.parameters():
            if parameter.dim() > 1:
                nn.init.kaiming_uniform_(parameter)
            else:
                nn.init.uniform_(parameter, -0.5, 0.5)
        example = torch.randn(*shape)
    return module.eval(), (example,)
