"""Models trained with quantization in the loop (``cortex_m_nn.prepare_qat``), for the tests:
a small CNN with batch norms, trained a few seeded steps on a synthetic task (is the brightest
quadrant top-left, top-right, bottom-left or bottom-right), so its weights and ranges are what
training left, not what calibration would choose."""

from __future__ import annotations

import torch
from torch import nn
from torchao.quantization.pt2e import move_exported_model_to_eval, move_exported_model_to_train

import cortex_m_nn

SIZE = 12


class QuadrantNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        )  # fmt: skip
        self.classifier = nn.Linear(64, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def quadrant_data(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Images with one quadrant brighter than the rest, and that quadrant's index."""
    gen = torch.Generator().manual_seed(seed)
    images = torch.randn(count, 1, SIZE, SIZE, generator=gen) * 0.5
    labels = torch.randint(0, 4, (count,), generator=gen)
    half = SIZE // 2
    for index, label in enumerate(labels.tolist()):
        row, column = divmod(label, 2)
        images[index, 0, row * half : (row + 1) * half, column * half : (column + 1) * half] += 1
    return images, labels


def train(model: torch.nn.Module, steps: int, seed: int, batch: int = 16) -> float:
    """``steps`` of SGD on quadrant data (``model`` a prepared graph or a module); the last
    loss."""
    images, labels = quadrant_data(512, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss = torch.tensor(0.0)
    for _ in range(steps):
        chosen = torch.randint(0, len(images), (batch,), generator=gen)
        loss = nn.functional.cross_entropy(model(images[chosen]), labels[chosen])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return float(loss.detach())


def qat_cnn(**options: object) -> tuple[torch.fx.GraphModule, tuple[torch.Tensor]]:
    """QuadrantNet trained in float, then prepared with ``options`` and fine-tuned with fake
    quantization: (the trained graph, example inputs)."""
    torch.manual_seed(0)
    model = QuadrantNet()
    train(model.train(), steps=60, seed=1)
    example = (quadrant_data(1, seed=2)[0],)
    prepared = cortex_m_nn.prepare_qat(model.eval(), example, **options)
    move_exported_model_to_train(prepared)
    train(prepared, steps=30, seed=3)
    return move_exported_model_to_eval(prepared), example
