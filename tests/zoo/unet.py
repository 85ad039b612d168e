"""A small U-Net (Ronneberger et al. 2015) for 2-class segmentation of 32×32 RGB images.

Two encoder levels (two 3×3 convolutions with batch norm and ReLU, then a 2×2 max pool) with
8 and 16 channels, a 32-channel bottleneck, and two decoder levels: a 2×2 stride-2
transposed convolution, concatenation with the encoder's feature map of the same size (the
skip connection) and two 3×3 convolutions; a 1×1 convolution gives per-pixel logits.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import Example, seeded

INPUT_SHAPE = (1, 3, 32, 32)
CLASSES = 2


def _double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(),
    )


class UNet(nn.Module):
    def __init__(self, channels: int = 3, classes: int = CLASSES, base: int = 8) -> None:
        super().__init__()
        self.enc1, self.enc2 = _double_conv(channels, base), _double_conv(base, 2 * base)
        self.bottleneck = _double_conv(2 * base, 4 * base)
        self.up2 = nn.ConvTranspose2d(4 * base, 2 * base, 2, stride=2)
        self.dec2 = _double_conv(4 * base, 2 * base)
        self.up1 = nn.ConvTranspose2d(2 * base, base, 2, stride=2)
        self.dec1 = _double_conv(2 * base, base)
        self.head = nn.Conv2d(base, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip1 = self.enc1(x)
        skip2 = self.enc2(nn.functional.max_pool2d(skip1, 2))
        x = self.bottleneck(nn.functional.max_pool2d(skip2, 2))
        x = self.dec2(torch.cat([self.up2(x), skip2], dim=1))
        x = self.dec1(torch.cat([self.up1(x), skip1], dim=1))
        return self.head(x)


def unet() -> Example:
    return seeded(UNet, INPUT_SHAPE)
