"""Inverted-residual networks: MobileNetV2 and MobileNetV3-Small.

* **MobileNetV2** (Sandler et al. 2018): 1×1 expansion, 3×3 depthwise, linear 1×1 projection
  (ReLU6 after the first two), a residual where stride is 1 and widths match; width 0.25 and
  the first five rows of the paper's table with at most two repeats.
* **MobileNetV3-Small** (Howard et al. 2019): hardswish and ReLU, squeeze-and-excitation
  (average pool, 1×1 reduce, ReLU, 1×1 expand, hardsigmoid, scale) and 5×5 depthwise
  convolutions; width 0.5 and the first seven rows of the paper's table. The residual is
  added in place and the classifier ends in ``nn.Dropout(inplace=True)``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .common import conv_bn, divisible, relu


def relu6() -> nn.Module:
    return nn.ReLU6(inplace=True)


def hardswish() -> nn.Module:
    return nn.Hardswish(inplace=True)


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expansion: int) -> None:
        super().__init__()
        hidden = round(cin * expansion)
        layers: list[nn.Module] = []
        if expansion != 1:
            layers.append(conv_bn(cin, hidden, 1, act=relu6))
        layers += [
            conv_bn(hidden, hidden, 3, stride, hidden, relu6),
            conv_bn(hidden, cout, act=None),
        ]
        self.conv = nn.Sequential(*layers)
        self.use_residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_residual:
            return x + self.conv(x)
        return self.conv(x)


#: (expansion t, channels c, repeats n, stride s): the first rows of the paper's Table 2.
V2_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 2, 2), (6, 64, 2, 2), (6, 96, 1, 1)]


class MobileNetV2(nn.Module):
    def __init__(self, width: float = 0.25, classes: int = 10) -> None:
        super().__init__()
        cin = divisible(32 * width)
        layers: list[nn.Module] = [conv_bn(3, cin, 3, 2, act=relu6)]
        for t, c, n, s in V2_SETTINGS:
            cout = divisible(c * width)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        last = divisible(320 * width)
        layers.append(conv_bn(cin, last, 1, act=relu6))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


class SqueezeExcitation(nn.Module):
    def __init__(self, channels: int, squeezed: int) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Conv2d(squeezed, channels, 1)
        self.gate = nn.Hardsigmoid(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.gate(self.fc2(self.relu(self.fc1(self.avgpool(x)))))
        return scale * x


class BottleneckV3(nn.Module):
    def __init__(self, cin, kernel, hidden, cout, se: bool, act, stride: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if hidden != cin:
            layers.append(conv_bn(cin, hidden, 1, act=act))
        layers.append(conv_bn(hidden, hidden, kernel, stride, hidden, act))
        if se:
            layers.append(SqueezeExcitation(hidden, divisible(hidden // 4)))
        layers.append(conv_bn(hidden, cout, 1, act=None))
        self.block = nn.Sequential(*layers)
        self.use_residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        if self.use_residual:
            out += x
        return out


#: (kernel, expansion size, channels, SE, activation, stride): the paper's Table 2, first rows.
V3_SMALL = [
    (3, 16, 16, True, relu, 2),
    (3, 72, 24, False, relu, 2),
    (3, 88, 24, False, relu, 1),
    (5, 96, 40, True, hardswish, 2),
    (5, 240, 40, True, hardswish, 1),
    (5, 120, 48, True, hardswish, 1),
    (5, 144, 48, True, hardswish, 1),
]


class MobileNetV3Small(nn.Module):
    def __init__(self, width: float = 0.5, classes: int = 10) -> None:
        super().__init__()
        cin = divisible(16 * width)
        layers: list[nn.Module] = [conv_bn(3, cin, 3, 2, act=hardswish)]
        for kernel, hidden, c, se, act, stride in V3_SMALL:
            cout = divisible(c * width)
            layers.append(
                BottleneckV3(cin, kernel, divisible(hidden * width), cout, se, act, stride)
            )
            cin = cout
        last = 6 * cin
        layers.append(conv_bn(cin, last, 1, act=hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(last, 128),
            nn.Hardswish(inplace=True),
            nn.Dropout(0.2, inplace=True),
            nn.Linear(128, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(self.avgpool(self.features(x)), 1)
        return self.classifier(x)
