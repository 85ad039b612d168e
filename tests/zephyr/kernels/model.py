"""The model of the on-target kernel suite: every cortex_m_nn operator at least once.

Compiled by the build (CONFIG_CORTEX_M_NN_MODEL_SOURCE="model.py:kernels") with a test vector:
the suite requires the outputs on the target to equal the compiler's bit-exact references.
Each output exposes a different part of the graph, so a wrong kernel shows up in one of them.
"""

import torch
import torch.nn.functional as F


class Kernels(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.depthwise = torch.nn.Conv2d(8, 8, kernel_size=3, padding=1, groups=8)
        self.up = torch.nn.ConvTranspose2d(8, 4, kernel_size=2, stride=2)
        self.fc = torch.nn.Linear(16, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = torch.relu(self.conv(x))  # conv2d
        b = torch.clamp(self.depthwise(a), -1.0, 1.0)  # depthwise_conv2d
        total = a + b  # add
        product = a * b  # mul
        high = torch.maximum(total, product)  # maximum
        low = torch.minimum(total, product)  # minimum
        pooled = torch.cat([F.max_pool2d(high, 2), F.avg_pool2d(low, 2)], dim=1)  # concat
        padded = torch.sigmoid(F.pad(pooled, (1, 1, 1, 1)))  # pad, lut
        up = self.up(b)  # transpose_conv2d
        tokens = pooled.flatten(2).transpose(1, 2)  # [1, 16 positions, 16 channels]
        scores = torch.softmax(self.fc(tokens), dim=-1)  # linear, softmax
        attention = torch.matmul(tokens, tokens.transpose(1, 2))  # batch_matmul
        return padded, up, scores, attention


def kernels() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    return Kernels().eval(), (torch.randn(1, 3, 8, 8),)
