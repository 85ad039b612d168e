"""An LSTM keyword-spotting model on MFCC frames ``[N, T=49, F=10]`` (batch first), and its
streaming form: one frame per inference, the LSTM's hidden and cell states kept between them.

In the style of the LSTM models of Zhang et al. 2017, "Hello Edge: Keyword Spotting on
Microcontrollers": 49 frames of 10 MFCC coefficients (a 1 s clip, 40 ms windows, 20 ms
stride) into one LSTM layer of 64 cells, the last step's hidden state into a dense layer of
12 classes (10 keywords, silence, unknown) and softmax. PyTorch's default LSTM
initialisation (uniform in ±1/√64) is what a trained small LSTM's weights look like in range.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import Example

INPUT_SHAPE = (1, 49, 10)
CLASSES = 12


class KwsLstm(nn.Module):
    def __init__(self, features: int = INPUT_SHAPE[2], cells: int = 64) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, cells, batch_first=True)
        self.fc = nn.Linear(cells, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.lstm(x)
        return torch.softmax(self.fc(h[-1]), dim=1)


def kws_lstm() -> Example:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = KwsLstm().eval()
        example = torch.randn(*INPUT_SHAPE)
    return module, (example,)


def kws_lstm_streaming() -> Example:
    """The keyword spotter one frame per inference: two LSTM layers whose hidden and cell
    states are kept (``kws_gru.streaming_kws``)."""
    from .kws_gru import streaming_kws

    return streaming_kws(nn.LSTM)
