"""MobileNets at 96×96: V1-0.25 (MLPerf Tiny visual wake words), V2-0.35 and V3-small-0.5.

* **MobileNetV1, width 0.25** (MLPerf Tiny ``visual_wake_words``, ``vww_model.py``): a 3×3
  stride-2 convolution with 8 filters, 13 depthwise-separable blocks (3×3 depthwise and 1×1
  pointwise, batch norm and ReLU after each) up to 256 channels at 3×3, a global average
  pool, a dense layer to 2 classes and softmax. About 7.5 M multiply-accumulates.
* **MobileNetV2, width 0.35** (Sandler et al. 2018; the Keras ``MobileNetV2(alpha=0.35)``
  layout): inverted residual blocks (1×1 expansion ×6, 3×3 depthwise, 1×1 linear
  projection, residual add where shapes allow), ReLU6, a final 1×1 convolution to 1280
  channels, global average pool and a classifier.
* **MobileNetV3-small, width 0.5** (Howard et al. 2019; torchvision's block table): hardswish
  activations, squeeze-and-excitation blocks (average pool, 1×1 convolution, ReLU, 1×1
  convolution, hardsigmoid, multiply) and 5×5 depthwise convolutions.

Channel counts are scaled with :func:`~.common.make_divisible` as in the reference
implementations. Batch norms are modules; PT2E folds them into the convolutions.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import nn

from .common import Example, make_divisible, seeded

INPUT_SHAPE = (1, 3, 96, 96)


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [
        nn.Conv2d(cin, cout, kernel, stride, padding=kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]


# --- V1 -------------------------------------------------------------------------------------

#: (output channels at width 1.0, stride) of the 13 depthwise-separable blocks.
V1_BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)]
V1_BLOCKS += [(512, 1)] * 5 + [(1024, 2), (1024, 1)]


class MobileNetV1(nn.Module):
    def __init__(self, width: float = 0.25, classes: int = 2) -> None:
        super().__init__()
        channels = int(32 * width)
        layers = [*_conv_bn(3, channels, 3, 2), nn.ReLU()]
        for base, stride in V1_BLOCKS:
            out = int(base * width)
            layers += [*_conv_bn(channels, channels, 3, stride, groups=channels), nn.ReLU()]
            layers += [*_conv_bn(channels, out, 1), nn.ReLU()]
            channels = out
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return torch.softmax(self.fc(torch.flatten(x, 1)), dim=1)


# --- V2 -------------------------------------------------------------------------------------

#: (expansion t, output channels c at width 1.0, repeats n, first stride s).
V2_BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1)]
V2_BLOCKS += [(6, 160, 3, 2), (6, 320, 1, 1)]


class _Residual(nn.Module):
    """The inverted-residual block of V2 and V3: a 1×1 expansion (left out when ``hidden`` is
    ``cin``), a ``kernel``×``kernel`` depthwise convolution, optionally squeeze-and-excitation,
    a linear 1×1 projection, and the input added back where the shapes allow."""

    def __init__(
        self,
        cin: int,
        hidden: int,
        cout: int,
        kernel: int,
        stride: int,
        activation: Callable[[], nn.Module],
        squeeze_excite: bool = False,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if hidden != cin:
            layers += [*_conv_bn(cin, hidden, 1), activation()]
        layers += [*_conv_bn(hidden, hidden, kernel, stride, groups=hidden), activation()]
        if squeeze_excite:
            layers.append(SqueezeExcite(hidden))
        layers += _conv_bn(hidden, cout, 1)
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.residual else y


class InvertedResidual(_Residual):
    def __init__(self, cin: int, cout: int, stride: int, expansion: int) -> None:
        super().__init__(cin, cin * expansion, cout, 3, stride, nn.ReLU6)


class MobileNetV2(nn.Module):
    def __init__(self, width: float = 0.35, classes: int = 10) -> None:
        super().__init__()
        channels = make_divisible(32 * width)
        layers = [*_conv_bn(3, channels, 3, 2), nn.ReLU6()]
        for expansion, base, repeats, stride in V2_BLOCKS:
            out = make_divisible(base * width)
            for index in range(repeats):
                layers.append(
                    InvertedResidual(channels, out, stride if index == 0 else 1, expansion)
                )
                channels = out
        last = 1280  # Keras keeps 1280 for widths ≤ 1
        layers += [*_conv_bn(channels, last, 1), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(last, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x).mean((2, 3))
        return self.fc(x)


# --- V3-small -------------------------------------------------------------------------------

#: (kernel, expanded, output, squeeze-excite, activation, stride) at width 1.0 (torchvision).
V3_SMALL_BLOCKS = [
    (3, 16, 16, True, "RE", 2),
    (3, 72, 24, False, "RE", 2),
    (3, 88, 24, False, "RE", 1),
    (5, 96, 40, True, "HS", 2),
    (5, 240, 40, True, "HS", 1),
    (5, 240, 40, True, "HS", 1),
    (5, 120, 48, True, "HS", 1),
    (5, 144, 48, True, "HS", 1),
    (5, 288, 96, True, "HS", 2),
    (5, 576, 96, True, "HS", 1),
    (5, 576, 96, True, "HS", 1),
]


def _activation(name: str) -> nn.Module:
    return nn.ReLU() if name == "RE" else nn.Hardswish()


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        squeezed = make_divisible(channels // 4)
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.expand = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = nn.functional.adaptive_avg_pool2d(x, 1)
        scale = nn.functional.hardsigmoid(self.expand(torch.relu(self.reduce(scale))))
        return x * scale


class Bottleneck(_Residual):
    def __init__(
        self, cin: int, kernel: int, hidden: int, cout: int, se: bool, act: str, stride: int
    ) -> None:
        super().__init__(cin, hidden, cout, kernel, stride, partial(_activation, act), se)


class MobileNetV3Small(nn.Module):
    def __init__(self, width: float = 0.5, classes: int = 10) -> None:
        super().__init__()
        channels = make_divisible(16 * width)
        layers = [*_conv_bn(3, channels, 3, 2), nn.Hardswish()]
        for kernel, expanded, out, se, act, stride in V3_SMALL_BLOCKS:
            hidden, out = make_divisible(expanded * width), make_divisible(out * width)
            layers.append(Bottleneck(channels, kernel, hidden, out, se, act, stride))
            channels = out
        last = 6 * channels
        layers += [*_conv_bn(channels, last, 1), nn.Hardswish()]
        self.features = nn.Sequential(*layers)
        head = make_divisible(1024 * width)
        self.classifier = nn.Sequential(
            nn.Linear(last, head), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(head, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v1() -> Example:
    return seeded(MobileNetV1, INPUT_SHAPE)


def mobilenet_v2() -> Example:
    return seeded(MobileNetV2, INPUT_SHAPE)


def mobilenet_v3_small() -> Example:
    return seeded(MobileNetV3Small, INPUT_SHAPE)
