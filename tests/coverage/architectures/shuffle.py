"""Channel-mixing networks: ShuffleNetV2 and SqueezeNet 1.1.

* **ShuffleNetV2 0.5×** (Ma et al. 2018): units that split the channels in two
  (``chunk``), transform one half (1×1, 3×3 depthwise, 1×1), concatenate and shuffle the
  channels (``view`` → ``transpose`` → ``contiguous`` → ``view``); downsampling units run both
  halves on the whole input. Two units per stage instead of 4/8/4, a 256-channel last conv.
* **SqueezeNet 1.1** (Iandola et al. 2016; the 1.1 layout of the reference repository): fire
  modules (1×1 squeeze, 1×1 and 3×3 expands concatenated), ceil-mode max pools, in-place
  ReLUs, a dropout → 1×1 conv → ReLU → global pool classifier; half width.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import conv_bn


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    batch, channels, height, width = x.size()
    x = x.view(batch, groups, channels // groups, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(batch, -1, height, width)


class ShuffleUnit(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        half = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                conv_bn(cin, cin, 3, stride, cin, act=None), conv_bn(cin, half, 1)
            )
        branch_in = cin if stride > 1 else half
        self.branch2 = nn.Sequential(
            conv_bn(branch_in, half, 1),
            conv_bn(half, half, 3, stride, half, act=None),
            conv_bn(half, half, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(self, widths=(24, 48, 96, 192, 256), classes: int = 10) -> None:
        super().__init__()
        self.conv1 = conv_bn(3, widths[0], 3, 2)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, cin = [], widths[0]
        for cout in widths[1:4]:
            stages += [ShuffleUnit(cin, cout, 2), ShuffleUnit(cout, cout, 1)]
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.conv5 = conv_bn(cin, widths[4], 1)
        self.fc = nn.Linear(widths[4], classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv5(self.stages(self.maxpool(self.conv1(x))))
        return self.fc(x.mean([2, 3]))


class Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, expand1x1: int, expand3x3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze, expand1x1, 1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze, expand3x3, 3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat(
            [
                self.expand1x1_activation(self.expand1x1(x)),
                self.expand3x3_activation(self.expand3x3(x)),
            ],
            1,
        )


class SqueezeNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, 2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(32, 8, 32, 32),
            Fire(64, 8, 32, 32),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(0.5),
            nn.Conv2d(128, classes, 1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((1, 1)),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.classifier(self.features(x)), 1)
