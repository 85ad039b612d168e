"""A streaming keyword-spotting model of SVDF layers on MFCC-like frames ``[1, 40]``.

In the style of TensorFlow's speech-commands ``low_latency_svdf`` model (Nakkiran et al.
2015, "Compressing Deep Neural Networks using a Rank-Constrained Topology"): each call is one
40-coefficient frame; two SVDF layers remember the last 8 and 16 frames in their states, a
dense layer scores 12 classes (logits). The first layer keeps an int16 state (TFLite's
default), the second an int8 one (rank 2), so the model runs both CMSIS-NN SVDF functions.
"""

from __future__ import annotations

import torch
from torch import nn

from cortex_m_nn.nn import SVDF

from .common import Example, seeded

FRAME = (1, 40)
CLASSES = 12


class SvdfKws(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = SVDF(FRAME[1], 64, memory_size=8, rank=1)
        self.second = SVDF(64, 32, memory_size=16, rank=2, state_bits=8)
        self.fc = nn.Linear(32, CLASSES)

    def forward(self, frame: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.second(torch.relu(self.first(frame))))
        return self.fc(x)  # the class scores (logits)


def svdf_kws() -> Example:
    return seeded(SvdfKws, FRAME)
