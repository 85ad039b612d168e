"""Deep autoencoder: MLPerf Tiny anomaly detection (ToyADMOS machine sounds).

From the MLPerf Tiny training reference (``benchmark/training/anomaly_detection``,
``keras_model.py``): 640 inputs (5 frames × 128 log-mel bins), four dense layers of 128
with batch norm and ReLU, an 8-unit bottleneck (dense, batch norm, ReLU), four more of 128
and a dense output of 640. About 270 k parameters and as many multiply-accumulates. Batch
norms are modules; PT2E folds them into the dense layers.
"""

from __future__ import annotations

from itertools import pairwise

import torch
from torch import nn

from .common import Example, seeded

INPUT_SHAPE = (1, 640)
HIDDEN = 128
BOTTLENECK = 8


def _dense(cin: int, cout: int) -> list[nn.Module]:
    return [nn.Linear(cin, cout), nn.BatchNorm1d(cout), nn.ReLU()]


class DeepAutoencoder(nn.Module):
    def __init__(self, features: int = INPUT_SHAPE[1]) -> None:
        super().__init__()
        sizes = [features, *[HIDDEN] * 4, BOTTLENECK, *[HIDDEN] * 4]
        layers = [m for cin, cout in pairwise(sizes) for m in _dense(cin, cout)]
        self.layers = nn.Sequential(*layers, nn.Linear(HIDDEN, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def autoencoder() -> Example:
    return seeded(DeepAutoencoder, INPUT_SHAPE)
