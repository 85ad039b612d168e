"""A GRU keyword-spotting model on MFCC frames ``[N, T=49, F=10]`` (batch first), and its
streaming form: one frame per inference, the GRU's state kept between them.

The GRU counterpart of ``kws_lstm`` (Zhang et al. 2017, "Hello Edge", list GRU models beside
their LSTMs): 49 frames of 10 MFCC coefficients into one GRU layer of 64 units, the last
step's hidden state into a dense layer of 12 classes and softmax. PyTorch's default GRU
initialisation (uniform in ±1/√64).
"""

from __future__ import annotations

import torch
from torch import nn

from cortex_m_nn.nn import Streaming

from .common import Example

INPUT_SHAPE = (1, 49, 10)
CLASSES = 12


class KwsGru(nn.Module):
    def __init__(self, features: int = INPUT_SHAPE[2], units: int = 64) -> None:
        super().__init__()
        self.gru = nn.GRU(features, units, batch_first=True)
        self.fc = nn.Linear(units, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h = self.gru(x)
        return torch.softmax(self.fc(h[-1]), dim=1)


def kws_gru() -> Example:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = KwsGru().eval()
        example = torch.randn(*INPUT_SHAPE)
    return module, (example,)


class StreamingKws(nn.Module):
    """A keyword spotter run one 10-coefficient frame per inference: two recurrent layers
    (``layer``: nn.GRU or nn.LSTM, 10 features in, ``units`` out) whose state
    (``cortex_m_nn.nn.Streaming``) carries the clip from frame to frame, the last layer's
    output into the classes."""

    def __init__(self, layer: type[nn.GRU] | type[nn.LSTM], units: int = 32) -> None:
        super().__init__()
        self.rnn = Streaming(layer(INPUT_SHAPE[2], units, num_layers=2, batch_first=True))
        self.fc = nn.Linear(units, CLASSES)

    def forward(self, frame: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc(self.rnn(frame)[:, -1]), dim=-1)


def streaming_kws(layer: type[nn.GRU] | type[nn.LSTM]) -> Example:
    """The streaming keyword spotter on ``layer``, seeded, and one frame."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = StreamingKws(layer).eval()
        example = torch.randn(1, 1, INPUT_SHAPE[2])
    return module, (example,)


def kws_gru_streaming() -> Example:
    return streaming_kws(nn.GRU)
