"""A transformer keyword-spotting model on MFCC frames ``[N, T=49, F=10]``, written with
``torch.nn``'s own layers as users write it (KWT-style, Berg et al. 2021, "Keyword
Transformer", made small for a microcontroller).

The frames are projected to 32 features, a learned position embedding is added, two
``nn.TransformerEncoderLayer`` (4 heads, a 64-wide GELU feed-forward network, pre-norm, in an
``nn.TransformerEncoder``) run over the 49 tokens, and the mean over time goes through a final
layer norm into 12 classes and softmax. Attention reaches ``scaled_dot_product_attention``.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import Example

INPUT_SHAPE = (1, 49, 10)
DIM, HEADS, FEED_FORWARD, LAYERS, CLASSES = 32, 4, 64, 2, 12


class KwsTransformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(INPUT_SHAPE[2], DIM)
        self.position = nn.Parameter(torch.randn(1, INPUT_SHAPE[1], DIM) * 0.1)
        layer = nn.TransformerEncoderLayer(
            DIM, HEADS, FEED_FORWARD, dropout=0.0, activation="gelu", batch_first=True,
            norm_first=True,
        )  # fmt: skip
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.encoder(self.embed(x) + self.position)
        return torch.softmax(self.head(self.norm(tokens.mean(1))), dim=-1)


def kws_transformer() -> Example:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = KwsTransformer().eval()
        example = torch.randn(*INPUT_SHAPE)
    return module, (example,)
