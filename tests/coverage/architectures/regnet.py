"""RegNetX (Radosavovic et al. 2020, "Designing Network Design Spaces"), 200MF-like.

X blocks: 1×1 conv, 3×3 *grouped* conv (group width 8, so 3, 6 and 12 groups here) carrying
the stride, 1×1 conv, each with batch norm, ReLU after the first two and after the residual
sum; a 1×1 stride-s projection on the shortcut where the shape changes. A 3×3 stride-2 stem
(24 channels), three stages of widths 24, 48 and 96 with depths 1, 2 and 2, global average
pool and a linear classifier.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import conv_bn


class XBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, group_width: int) -> None:
        super().__init__()
        groups = cout // group_width
        self.f = nn.Sequential(
            conv_bn(cin, cout, 1),
            conv_bn(cout, cout, 3, stride, groups),
            conv_bn(cout, cout, 1, act=None),
        )
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = conv_bn(cin, cout, 1, stride, act=None)
        self.activation = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.proj is None else self.proj(x)
        return self.activation(shortcut + self.f(x))


class RegNetX(nn.Module):
    def __init__(self, widths=(24, 48, 96), depths=(1, 2, 2), group_width: int = 8) -> None:
        super().__init__()
        self.stem = conv_bn(3, 24, 3, 2)
        blocks, cin = [], 24
        for width, depth in zip(widths, depths, strict=True):
            for i in range(depth):
                blocks.append(XBlock(cin, width, 2 if i == 0 else 1, group_width))
                cin = width
        self.trunk = nn.Sequential(*blocks)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.trunk(self.stem(x)))
        return self.fc(x.flatten(start_dim=1))
