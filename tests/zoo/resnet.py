"""ResNet-8: MLPerf Tiny image classification (CIFAR-10, 32×32×3 → 10 classes).

From the MLPerf Tiny training reference (``benchmark/training/image_classification``,
``resnet_v1_eembc``): a 3×3 convolution with 16 filters, three residual stacks of 16, 32 and
64 filters (two 3×3 convolutions each; stacks 2 and 3 start with stride 2 and take a strided
1×1 convolution as shortcut), an 8×8 average pool, a dense layer and softmax. About 78 k
parameters and 12.5 M multiply-accumulates.

Differences from the Keras model: Keras ``padding="same"`` with stride 2 pads only bottom and
right; ``nn.Conv2d(padding=1)`` pads all sides (same output size, windows shifted by one).
Batch norms are kept as modules; PT2E folds them into the convolutions.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import Example, seeded

INPUT_SHAPE = (1, 3, 32, 32)
CLASSES = 10


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride, padding=kernel // 2, bias=True),
        nn.BatchNorm2d(cout),
    )


class Stack(nn.Module):
    """Two 3×3 convolutions and a residual add; a strided 1×1 shortcut when downsampling."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.first = _conv_bn(cin, cout, 3, stride)
        self.second = _conv_bn(cout, cout, 3)
        self.shortcut = _conv_bn(cin, cout, 1, stride) if stride != 1 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.second(torch.relu(self.first(x)))
        return torch.relu(self.shortcut(x) + y)


class ResNet8(nn.Module):
    def __init__(self, classes: int = CLASSES) -> None:
        super().__init__()
        self.stem = _conv_bn(3, 16, 3)
        self.stacks = nn.Sequential(Stack(16, 16, 1), Stack(16, 32, 2), Stack(32, 64, 2))
        self.pool = nn.AvgPool2d(8)
        self.fc = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stacks(torch.relu(self.stem(x)))
        return torch.softmax(self.fc(torch.flatten(self.pool(x), 1)), dim=1)


def resnet8() -> Example:
    return seeded(ResNet8, INPUT_SHAPE)
