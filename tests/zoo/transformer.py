"""A small transformer encoder block: multi-head self-attention and a feed-forward network.

Post-norm (as ``nn.TransformerEncoderLayer`` by default) on a sequence of 16 tokens of 32
features with 4 heads of 8: query, key and value projections, ``softmax(q kᵀ / √d) v`` per
head with batched matrix products, an output projection, a residual add and layer norm, then
a 64-wide GELU feed-forward network, residual add and layer norm. The attention is written
out with ``matmul`` (not ``scaled_dot_product_attention``) as on-device models do.

Layer norm has no CMSIS-NN kernel: it runs on our integer kernel (``cortex_m_nn::layer_norm``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .common import Example, seeded

SEQUENCE, DIM, HEADS, FEED_FORWARD = 16, 32, 4, 64
INPUT_SHAPE = (1, SEQUENCE, DIM)


class EncoderBlock(nn.Module):
    def __init__(self, dim: int = DIM, heads: int = HEADS, hidden: int = FEED_FORWARD) -> None:
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(dim, dim) for _ in range(3))
        self.out = nn.Linear(dim, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.ff1, self.ff2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        self.norm2 = nn.LayerNorm(dim)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        n, length, dim = x.shape
        return x.view(n, length, self.heads, dim // self.heads).transpose(1, 2)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        n, length, dim = x.shape
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dim // self.heads))
        context = torch.softmax(scores, dim=-1) @ v
        return self.out(context.transpose(1, 2).reshape(n, length, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.ff2(nn.functional.gelu(self.ff1(x))))


def transformer() -> Example:
    return seeded(EncoderBlock, INPUT_SHAPE)
