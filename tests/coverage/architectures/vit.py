"""A small Vision Transformer (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words") as
current model libraries write one: the pieces their attention code paths are made of.

A patch embedding (an 8×8 stride-8 convolution: 64 tokens of 64 features at 64×64), a class
token concatenated in front (a parameter ``expand``ed to the batch), a learned position
embedding added, four pre-norm blocks and a final norm, the class token into the classifier.
Each block: attention from one ``qkv`` linear (``reshape`` to (3, heads, tokens, head
features) by ``permute``, ``unbind``), ``F.scaled_dot_product_attention``, heads joined by
``transpose``/``reshape``, an output projection, a layer scale (a parameter per feature, as
CaiT added it), a GELU MLP with its own layer scale, residual adds.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

DIM, HEADS, DEPTH, PATCH, MLP = 64, 4, 4, 8, 128


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        qkv = self.qkv(x).reshape(batch, tokens, 3, self.heads, dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(batch, tokens, dim))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
        self.gamma1 = nn.Parameter(torch.full((dim,), 0.5))
        self.gamma2 = nn.Parameter(torch.full((dim,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.gamma1 * self.attn(self.norm1(x))
        return x + self.gamma2 * self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    def __init__(self, classes: int = 10, resolution: int = 64) -> None:
        super().__init__()
        tokens = (resolution // PATCH) ** 2
        self.patch = nn.Conv2d(3, DIM, PATCH, PATCH)
        self.cls_token = nn.Parameter(torch.randn(1, 1, DIM) * 0.02)
        self.position = nn.Parameter(torch.randn(1, tokens + 1, DIM) * 0.02)
        self.blocks = nn.Sequential(*(Block(DIM, HEADS, MLP) for _ in range(DEPTH)))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.position
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])
