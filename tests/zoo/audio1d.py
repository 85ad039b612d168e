"""A 1-D convolutional keyword-spotting model on MFCC frames ``[N, C=40, L=101]``.

In the style of TC-ResNet8 (Choi et al. 2019, "Temporal Convolution for Real-time Keyword
Spotting on Mobile Devices"): the 40 MFCC coefficients are the channels and the 101 frames
the length. A 3-tap convolution with 16 filters, two residual blocks of 9-tap convolutions
(stride 2, with a strided 1-tap convolution as shortcut) to 24 and 32 channels, a
depthwise-separable block (9-tap depthwise, 1-tap pointwise to 48 channels), a max pool of
2, an average over time, a dense layer to 12 classes and softmax. Batch norms are modules;
PT2E folds them into the convolutions.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import Example, seeded

INPUT_SHAPE = (1, 40, 101)
CLASSES = 12


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv1d(cin, cout, kernel, stride, padding=kernel // 2, groups=groups, bias=False),
        nn.BatchNorm1d(cout),
    )


class TemporalBlock(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.first = _conv_bn(cin, cout, 9, stride=2)
        self.second = _conv_bn(cout, cout, 9)
        self.shortcut = _conv_bn(cin, cout, 1, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.second(torch.relu(self.first(x)))
        return torch.relu(self.shortcut(x) + y)


class Audio1D(nn.Module):
    def __init__(self, features: int = INPUT_SHAPE[1], classes: int = CLASSES) -> None:
        super().__init__()
        self.stem = _conv_bn(features, 16, 3)
        self.blocks = nn.Sequential(TemporalBlock(16, 24), TemporalBlock(24, 32))
        self.depthwise = _conv_bn(32, 32, 9, groups=32)
        self.pointwise = _conv_bn(32, 48, 1)
        self.fc = nn.Linear(48, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(torch.relu(self.stem(x)))
        x = torch.relu(self.pointwise(torch.relu(self.depthwise(x))))
        x = nn.functional.max_pool1d(x, 2)
        return torch.softmax(self.fc(x.mean(dim=2)), dim=1)


def audio1d() -> Example:
    return seeded(Audio1D, INPUT_SHAPE)
