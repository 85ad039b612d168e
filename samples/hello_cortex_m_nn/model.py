"""The model of hello_cortex_m_nn: a convolution, a mean over the image and a linear layer.

Compiled by the build (CONFIG_CORTEX_M_NN_MODEL_SOURCE="model.py:hello"); the weights are
seeded, so every build embeds the same program.
"""

import torch


class Hello(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(1, 8, kernel_size=3, padding=1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return self.fc(features)


def hello() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    return Hello().eval(), (torch.randn(1, 1, 8, 8),)
