"""GhostNet (Han et al. 2020, "GhostNet: More Features from Cheap Operations") at half width.

A ghost module makes half its channels with a 1×1 convolution and the other half from them
with a cheap 3×3 depthwise convolution, concatenates both and keeps the first ``out``
channels (``out[:, :self.out_chs]``, a full-range slice for even widths). Ghost bottlenecks:
ghost module (ReLU), a stride-2 depthwise convolution where downsampling, squeeze-and-
excitation with the hard sigmoid ``relu6(x + 3) / 6``, ghost module (linear), shortcut added
in place. The first eight rows of the paper's Table 1, then 1×1 conv, global pool, 1×1 conv
head with ReLU and functional dropout.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from .common import conv_bn, divisible


def hard_sigmoid(x: torch.Tensor) -> torch.Tensor:
    return F.relu6(x + 3.0) / 6.0


class GhostModule(nn.Module):
    def __init__(self, cin: int, out_chs: int, relu: bool = True) -> None:
        super().__init__()
        self.out_chs = out_chs
        primary = math.ceil(out_chs / 2)
        act = (lambda: nn.ReLU(inplace=True)) if relu else None
        self.primary_conv = conv_bn(cin, primary, 1, act=act)
        self.cheap_operation = conv_bn(primary, primary, 3, 1, primary, act=act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.primary_conv(x)
        x2 = self.cheap_operation(x1)
        out = torch.cat([x1, x2], dim=1)
        return out[:, : self.out_chs, :, :]


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        reduced = divisible(channels / 4, 4)
        self.conv_reduce = nn.Conv2d(channels, reduced, 1)
        self.act = nn.ReLU(inplace=True)
        self.conv_expand = nn.Conv2d(reduced, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        se = F.adaptive_avg_pool2d(x, 1)
        se = self.conv_expand(self.act(self.conv_reduce(se)))
        return x * hard_sigmoid(se)


class GhostBottleneck(nn.Module):
    def __init__(self, cin, hidden, cout, kernel, stride, se: bool) -> None:
        super().__init__()
        self.ghost1 = GhostModule(cin, hidden, relu=True)
        self.conv_dw = (
            conv_bn(hidden, hidden, kernel, stride, hidden, act=None) if stride > 1 else None
        )
        self.se = SqueezeExcite(hidden) if se else None
        self.ghost2 = GhostModule(hidden, cout, relu=False)
        self.shortcut = nn.Sequential()
        if cin != cout or stride > 1:
            self.shortcut = nn.Sequential(
                conv_bn(cin, cin, kernel, stride, cin, act=None), conv_bn(cin, cout, 1, act=None)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = x
        x = self.ghost1(x)
        if self.conv_dw is not None:
            x = self.conv_dw(x)
        if self.se is not None:
            x = self.se(x)
        x = self.ghost2(x)
        x += self.shortcut(residual)
        return x


#: (kernel, hidden, out, SE, stride): the paper's Table 1, first eight rows.
GHOST_CFG = [
    (3, 16, 16, False, 1),
    (3, 48, 24, False, 2),
    (3, 72, 24, False, 1),
    (5, 72, 40, True, 2),
    (5, 120, 40, True, 1),
    (3, 240, 80, False, 2),
    (3, 200, 80, False, 1),
    (3, 184, 80, False, 1),
]


class GhostNet(nn.Module):
    def __init__(self, width: float = 0.5, classes: int = 10, dropout: float = 0.2) -> None:
        super().__init__()
        self.dropout = dropout
        cin = divisible(16 * width, 4)
        self.conv_stem = conv_bn(3, cin, 3, 2)
        blocks = []
        for kernel, hidden, c, se, stride in GHOST_CFG:
            cout = divisible(c * width, 4)
            blocks.append(
                GhostBottleneck(cin, divisible(hidden * width, 4), cout, kernel, stride, se)
            )
            cin = cout
        blocks.append(conv_bn(cin, 6 * cin, 1))
        self.blocks = nn.Sequential(*blocks)
        self.conv_head = nn.Conv2d(6 * cin, 256, 1)
        self.act2 = nn.ReLU(inplace=True)
        self.classifier = nn.Linear(256, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.conv_stem(x))
        x = self.act2(self.conv_head(F.adaptive_avg_pool2d(x, (1, 1))))
        x = x.view(x.size(0), -1)
        x = F.dropout(x, p=self.dropout, training=self.training)
        return self.classifier(x)
