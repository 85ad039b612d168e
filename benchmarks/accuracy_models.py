"""The seven networks ``accuracy.py`` trains on scikit-learn's digits (10 classes).

Four written for this benchmark after the published layouts (1 input channel), narrowed so
each trains in about a minute on two cores:

* ``small_cnn`` (16×16): a convolution, a depthwise-separable block with a residual add, two
  strided depthwise-separable blocks, a linear layer on the flattened 4×4 features;
* ``mobilenet_v2_035`` (32×32): MobileNetV2 (Sandler et al. 2018) at width 0.35, inverted
  residual blocks (1×1 expansion, 3×3 depthwise, linear 1×1 projection, residual add where the
  shapes allow), ReLU6, a final 1×1 convolution to 128 channels;
* ``lcnet_050`` (32×32): PP-LCNet (Cui et al. 2021) at width 0.5, depthwise-separable blocks
  with hardswish, 5×5 depthwise kernels and squeeze-and-excitation (hardsigmoid) in the last
  blocks, a 1×1 convolution after the global pool;
* ``resnet_narrow`` (32×32): ResNet-18's layout (He et al. 2016: four stages of two basic
  blocks, 1×1 strided projections) at widths 8/16/32/64.

and three as torchvision defines them (``torchvision_models.py``, 3 input channels, the grey
digits repeated): ``tv_mobilenet_v2_035``, ``tv_mobilenet_v3_small`` and ``tv_resnet18_025``,
so that a detail of a definition users bring (ReLU6 and adds in place, a 1,280-channel last
convolution, dropout, 7×7 stem and max pool) cannot hide a gap.

Batch norms are modules; PT2E folds them into the convolutions.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import torchvision_models  # noqa: E402

# the zoo's building blocks: the same layers, one definition
from tests.zoo.common import make_divisible  # noqa: E402
from tests.zoo.mobilenet import InvertedResidual  # noqa: E402
from tests.zoo.mobilenet import _conv_bn as conv_bn  # noqa: E402

CLASSES = 10


class Head(nn.Module):
    """Global average pool and a linear classifier."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.fc = nn.Linear(channels, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.mean((2, 3)))


# --- small CNN ------------------------------------------------------------------------------


class SeparableResidual(nn.Module):
    """3×3 depthwise, ReLU, 1×1 pointwise, added to the input, ReLU."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.block = nn.Sequential(
            *conv_bn(channels, channels, 3, groups=channels),
            nn.ReLU(),
            *conv_bn(channels, channels, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.block(x))


class SmallCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            *conv_bn(1, 16, 3),
            nn.ReLU(),
            SeparableResidual(16),
            *conv_bn(16, 16, 3, 2, groups=16),
            nn.ReLU(),
            *conv_bn(16, 32, 1),
            nn.ReLU(),
            *conv_bn(32, 32, 3, 2, groups=32),
            nn.ReLU(),
            *conv_bn(32, 32, 1),
            nn.ReLU(),
        )
        self.fc = nn.Linear(32 * 4 * 4, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))


# --- MobileNetV2-0.35 -----------------------------------------------------------------------

#: (expansion, output channels at width 1.0, repeats, first stride), cut to 32×32 inputs.
V2_BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 2, 2), (6, 96, 1, 1)]


class MobileNetV2(nn.Module):
    def __init__(self, width: float = 0.35, last: int = 128) -> None:
        super().__init__()
        channels = make_divisible(32 * width)
        layers: list[nn.Module] = [*conv_bn(1, channels, 3, 2), nn.ReLU6()]
        for expansion, base, repeats, stride in V2_BLOCKS:
            out = make_divisible(base * width)
            for index in range(repeats):
                block = InvertedResidual(channels, out, stride if index == 0 else 1, expansion)
                layers.append(block)
                channels = out
        layers += [*conv_bn(channels, last, 1), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.head = Head(last)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


# --- LCNet-0.5 ------------------------------------------------------------------------------

#: (kernel, output channels at width 1.0, stride, squeeze-excite), cut to 32×32 inputs.
LCNET_BLOCKS = [
    (3, 32, 1, False),
    (3, 64, 2, False),
    (3, 64, 1, False),
    (3, 128, 2, False),
    (3, 128, 1, False),
    (5, 256, 2, False),
    (5, 256, 1, False),
    (5, 512, 2, True),
    (5, 512, 1, True),
]


class SqueezeExcite(nn.Module):
    """Average pool, 1×1 reduce, ReLU, 1×1 expand, hardsigmoid, multiply."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.reduce = nn.Conv2d(channels, channels // 4, 1)
        self.expand = nn.Conv2d(channels // 4, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.mean((2, 3), keepdim=True)
        scale = nn.functional.hardsigmoid(self.expand(torch.relu(self.reduce(scale))))
        return x * scale


class LcNet(nn.Module):
    def __init__(self, width: float = 0.5, last: int = 256) -> None:
        super().__init__()
        channels = make_divisible(16 * width)
        layers: list[nn.Module] = [*conv_bn(1, channels, 3, 2), nn.Hardswish()]
        for kernel, base, stride, excite in LCNET_BLOCKS:
            out = make_divisible(base * width)
            layers += [*conv_bn(channels, channels, kernel, stride, groups=channels)]
            layers += [nn.Hardswish(), *([SqueezeExcite(channels)] if excite else [])]
            layers += [*conv_bn(channels, out, 1), nn.Hardswish()]
            channels = out
        self.features = nn.Sequential(*layers)
        self.last = nn.Conv2d(channels, last, 1)
        self.fc = nn.Linear(last, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x).mean((2, 3), keepdim=True)
        x = nn.functional.hardswish(self.last(x))
        return self.fc(torch.flatten(x, 1))


# --- ResNet (narrow ResNet-18 layout) -------------------------------------------------------


class BasicBlock(nn.Module):
    """Two 3×3 convolutions and a residual (a strided 1×1 projection where shapes change)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.block = nn.Sequential(
            *conv_bn(cin, cout, 3, stride), nn.ReLU(), *conv_bn(cout, cout, 3)
        )
        changes = stride != 1 or cin != cout
        self.shortcut = nn.Sequential(*conv_bn(cin, cout, 1, stride)) if changes else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.block(x) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, widths: tuple[int, ...] = (8, 16, 32, 64), blocks: int = 2) -> None:
        super().__init__()
        layers: list[nn.Module] = [*conv_bn(1, widths[0], 3), nn.ReLU()]
        channels = widths[0]
        for stage, width in enumerate(widths):
            for index in range(blocks):
                stride = 2 if stage > 0 and index == 0 else 1
                layers.append(BasicBlock(channels, width, stride))
                channels = width
        self.features = nn.Sequential(*layers)
        self.head = Head(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class Architecture(NamedTuple):
    build: Callable[[], nn.Module]
    #: input side in pixels
    side: int
    epochs: int
    #: input channels: the torchvision-defined networks take 3, the grey digits repeated
    channels: int = 1


ARCHITECTURES: dict[str, Architecture] = {
    "small_cnn": Architecture(SmallCnn, 16, 6),
    "mobilenet_v2_035": Architecture(MobileNetV2, 32, 6),
    "lcnet_050": Architecture(LcNet, 32, 6),
    "resnet_narrow": Architecture(ResNet, 32, 5),
    # torchvision's definitions (torchvision_models.py)
    "tv_mobilenet_v2_035": Architecture(torchvision_models.MobileNetV2, 32, 12, 3),
    "tv_mobilenet_v3_small": Architecture(torchvision_models.MobileNetV3Small, 32, 20, 3),
    "tv_resnet18_025": Architecture(torchvision_models.ResNet18, 32, 6, 3),
}
