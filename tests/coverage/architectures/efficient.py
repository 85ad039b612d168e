"""Mobile NAS networks: MnasNet-B1 and an EfficientNet-B0 stage.

* **MnasNet-B1** (Tan et al. 2019, "MnasNet: Platform-Aware Neural Architecture Search"):
  a 3×3 stem, a depthwise-separable block, then inverted residuals with 3×3 and 5×5
  depthwise kernels and ReLU; depth multiplier 0.35 (channels rounded to multiples of 8),
  the first four stages with at most two repeats.
* **EfficientNet-B0** (Tan & Le 2019): MBConv blocks (1×1 expansion, depthwise, squeeze-and-
  excitation with SiLU and a sigmoid gate on a quarter of the block's input channels, linear
  1×1 projection), SiLU throughout, in-place residuals and an ``nn.Dropout(inplace=True)``
  head; the stem, MBConv1 and the 24- and 40-channel stages at half width.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import conv_bn, divisible


class MnasBlock(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expansion: int) -> None:
        super().__init__()
        hidden = cin * expansion
        self.layers = nn.Sequential(
            conv_bn(cin, hidden, 1),
            conv_bn(hidden, hidden, kernel, stride, hidden),
            conv_bn(hidden, cout, 1, act=None),
        )
        self.apply_residual = cin == cout and stride == 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.apply_residual:
            return self.layers(x) + x
        return self.layers(x)


#: (kernel, expansion, channels, repeats, stride)
MNAS_STAGES = [(3, 3, 24, 2, 2), (5, 3, 40, 2, 2), (5, 6, 80, 2, 2), (3, 6, 96, 1, 1)]


class MnasNet(nn.Module):
    def __init__(self, alpha: float = 0.35, classes: int = 10) -> None:
        super().__init__()
        c32, c16 = divisible(32 * alpha), divisible(16 * alpha)
        layers: list[nn.Module] = [
            conv_bn(3, c32, 3, 2),
            conv_bn(c32, c32, 3, 1, c32),
            conv_bn(c32, c16, 1, act=None),
        ]
        cin = c16
        for kernel, expansion, c, n, s in MNAS_STAGES:
            cout = divisible(c * alpha)
            for i in range(n):
                layers.append(MnasBlock(cin, cout, kernel, s if i == 0 else 1, expansion))
                cin = cout
        layers.append(conv_bn(cin, 160, 1))
        self.layers = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2, inplace=True), nn.Linear(160, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(x).mean([2, 3])
        return self.classifier(x)


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int) -> None:
        super().__init__()
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.act = nn.SiLU(inplace=True)
        self.expand = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.mean((2, 3), keepdim=True)
        scale = self.expand(self.act(self.reduce(scale)))
        return x * scale.sigmoid()


def silu() -> nn.Module:
    return nn.SiLU(inplace=True)


class MBConv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expansion: int) -> None:
        super().__init__()
        hidden = cin * expansion
        layers: list[nn.Module] = []
        if expansion != 1:
            layers.append(conv_bn(cin, hidden, 1, act=silu))
        layers += [
            conv_bn(hidden, hidden, kernel, stride, hidden, silu),
            SqueezeExcite(hidden, max(1, cin // 4)),
            conv_bn(hidden, cout, 1, act=None),
        ]
        self.block = nn.Sequential(*layers)
        self.has_skip = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        x = self.block(x)
        if self.has_skip:
            x += shortcut
        return x


class EfficientNetB0Stage(nn.Module):
    def __init__(self, width: float = 0.5, classes: int = 10) -> None:
        super().__init__()
        stem, c16, c24, c40 = (divisible(c * width) for c in (32, 16, 24, 40))
        self.stem = conv_bn(3, stem, 3, 2, act=silu)
        self.blocks = nn.Sequential(
            MBConv(stem, c16, 3, 1, 1),
            MBConv(c16, c24, 3, 2, 6),
            MBConv(c24, c24, 3, 1, 6),
            MBConv(c24, c40, 5, 2, 6),
            MBConv(c40, c40, 5, 1, 6),
        )
        self.head = conv_bn(c40, 4 * c40, 1, act=silu)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.2, inplace=True)
        self.fc = nn.Linear(4 * c40, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.blocks(self.stem(x)))
        x = self.pool(x).flatten(1)
        return self.fc(self.dropout(x))
