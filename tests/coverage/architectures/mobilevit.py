"""A MobileViT-style network (Mehta & Rastegari 2022, "MobileViT"), XXS-like widths.

The MobileViT block: local representation (3×3 conv, SiLU; 1×1 conv to the transformer
width), unfolding into 2×2 patches (``reshape``/``transpose`` to (patch pixels, patches,
width)), two pre-norm transformer layers (``nn.LayerNorm``, multi-head self-attention
written out with ``q @ k.transpose`` and softmax, an MLP with SiLU and dropout, residuals
added), folding back, a 1×1 conv to the block's channels, concatenation with the block
input and a 3×3 fusion conv. Around it: a 3×3 stride-2 stem, two MobileNetV2 blocks,
global pool and a linear classifier.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import conv_bn
from .mobilenet import InvertedResidual


def silu() -> nn.Module:
    return nn.SiLU()


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(batch, tokens, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        attention = torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1)
        out = (attention @ v).transpose(1, 2).reshape(batch, tokens, dim)
        return self.proj(out)


class TransformerLayer(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, mlp), nn.SiLU(), nn.Dropout(dropout), nn.Linear(mlp, dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class MobileViTBlock(nn.Module):
    def __init__(self, channels: int, dim: int, depth: int = 2, patch: int = 2) -> None:
        super().__init__()
        self.patch = patch
        self.local = nn.Sequential(
            conv_bn(channels, channels, 3, act=silu), nn.Conv2d(channels, dim, 1, bias=False)
        )
        self.transformer = nn.Sequential(*(TransformerLayer(dim, 2, 2 * dim) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.project = conv_bn(dim, channels, 1, act=silu)
        self.fusion = conv_bn(2 * channels, channels, 3, act=silu)

    def unfold(self, x: torch.Tensor) -> torch.Tensor:
        """(B, D, H, W) → (B·p·p, patches, D)."""
        b, d, h, w = x.shape
        p, nh, nw = self.patch, h // self.patch, w // self.patch
        x = x.reshape(b * d * nh, p, nw, p).transpose(1, 2)
        x = x.reshape(b, d, nh * nw, p * p).transpose(1, 3)
        return x.reshape(b * p * p, nh * nw, d)

    def fold(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        """The inverse of ``unfold``."""
        p, nh, nw = self.patch, h // self.patch, w // self.patch
        d = x.shape[-1]
        x = x.reshape(-1, p * p, nh * nw, d).transpose(1, 3)
        x = x.reshape(-1, nw, p, p).transpose(1, 2)
        return x.reshape(-1, d, nh * p, nw * p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = x
        y = self.local(x)
        h, w = y.shape[-2:]
        y = self.norm(self.transformer(self.unfold(y)))
        y = self.project(self.fold(y, h, w))
        return self.fusion(torch.cat((residual, y), dim=1))


class MobileViT(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = conv_bn(3, 16, 3, 2, act=silu)
        self.mv2 = nn.Sequential(InvertedResidual(16, 16, 1, 2), InvertedResidual(16, 24, 2, 2))
        self.vit = MobileViTBlock(24, 32)
        self.head = conv_bn(24, 64, 1, act=silu)
        self.fc = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.vit(self.mv2(self.stem(x))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))
