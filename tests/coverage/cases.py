"""How a per-layer case is built: one ``forward`` body around a tiny, seeded stem.

A case is a factory returning ``(module in eval mode, example inputs)``. Most cases put a
small layer in front of the operator under test (``stem``), as real code does: the operator
then reads a quantized activation rather than the model input (an in-place operator on the
model input is its own case). Weights come from :func:`tests.zoo.common.seeded` (seeded,
He-uniform).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tests.zoo.common import Example, init_weights
from torch import nn

Factory = Callable[[], Example]
Body = Callable[..., Any]

#: Input shapes: an image (N, C, H, W), a sequence (N, L, D) and a vector (N, D).
IMAGE = (1, 4, 8, 8)
SEQUENCE = (1, 6, 16)
VECTOR = (1, 16)
#: Channels a conv stem produces.
CHANNELS = 8


def seeded(build: Callable[[], nn.Module], *shapes: tuple[int, ...], seed: int = 0) -> Example:
    """``build()`` in eval mode with the zoo's seeded weights (leaf by leaf, layers without
    affine parameters skipped) and inputs of ``shapes``; the global RNG is left untouched."""
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        module = build()
        for part in module.modules():
            if not any(part.children()) and getattr(part, "weight", True) is not None:
                init_weights(part)
        inputs = tuple(torch.randn(shape) for shape in shapes)
    return module.eval(), inputs


def _stem(kind: str | None, shape: tuple[int, ...]) -> dict[str, nn.Module]:
    if kind is None:
        return {}
    if kind in ("conv", "two"):
        make = lambda: nn.Conv2d(shape[1], CHANNELS, 3, padding=1)  # noqa: E731
    else:  # "linear": over the last dimension
        make = lambda: nn.Linear(shape[-1], shape[-1])  # noqa: E731
    return {"stem": make(), **({"stem_b": make()} if kind == "two" else {})}


class Case(nn.Module):
    """``body(self, *activations)`` after the stem: one activation, two (``"two"``: two
    parallel stems on the one input) or the raw inputs (no stem)."""

    def __init__(self, body: Body, stem: str | None, layers: dict[str, nn.Module]) -> None:
        super().__init__()
        self.body = body
        for name, layer in layers.items():
            self.add_module(name, layer)
        self.kind = stem

    def forward(self, *inputs: torch.Tensor) -> Any:
        if self.kind is None:
            return self.body(self, *inputs)
        if self.kind == "two":
            return self.body(self, self.stem(inputs[0]), self.stem_b(inputs[0]))
        return self.body(self, self.stem(inputs[0]), *inputs[1:])


def case(
    body: Body,
    stem: str | None = "conv",
    shapes: tuple[tuple[int, ...], ...] = (IMAGE,),
    layers: Callable[[], dict[str, nn.Module]] | None = None,
    seed: int = 0,
) -> Factory:
    """A factory for ``Case(body)``; ``layers`` builds the case's own modules (seeded)."""

    def build() -> nn.Module:
        own = layers() if layers is not None else {}
        return Case(body, stem, {**_stem(stem, shapes[0]), **own})

    return lambda: seeded(build, *shapes, seed=seed)


def layer(make: Callable[[], nn.Module], stem: str | None = "conv", shape=IMAGE) -> Factory:
    """A factory for ``make()`` applied after the stem."""
    return case(lambda m, x: m.layer(x), stem, (shape,), lambda: {"layer": make()})
