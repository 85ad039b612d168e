"""Building blocks the re-implemented architectures share."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

Activation = Callable[[], nn.Module]
#: Input resolution of every architecture (batch 1, RGB).
RESOLUTION = 64


def relu() -> nn.Module:
    return nn.ReLU(inplace=True)


def conv_bn(
    cin: int,
    cout: int,
    kernel: int = 1,
    stride: int = 1,
    groups: int = 1,
    act: Activation | None = relu,
) -> nn.Sequential:
    """Convolution ("same" padding for odd kernels, no bias), batch norm, activation."""
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def divisible(value: float, divisor: int = 8) -> int:
    """``value`` rounded to a multiple of ``divisor``, never more than 10 % below it."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded
