"""What every zoo factory shares: seeded construction and realistic random weights."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

Example = tuple[nn.Module, tuple[torch.Tensor, ...]]


def init_weights(module: nn.Module) -> None:
    """He-uniform weights, small biases and non-trivial batch-norm statistics.

    PyTorch's default initialisation shrinks activations layer after layer; a trained
    network's activations do not, and the quantizer should see realistic ranges. Batch norms
    get random running statistics and affine parameters so that folding them into the
    preceding convolution or linear layer (``prepare_pt2e`` does) changes the weights.
    """
    for layer in module.modules():
        if isinstance(layer, nn.Conv1d | nn.Conv2d | nn.ConvTranspose2d | nn.Linear):
            nn.init.kaiming_uniform_(layer.weight, nonlinearity="relu")
            if layer.bias is not None:
                nn.init.uniform_(layer.bias, -0.1, 0.1)
        elif isinstance(layer, nn.BatchNorm1d | nn.BatchNorm2d | nn.LayerNorm):
            nn.init.uniform_(layer.weight, 0.5, 1.5)
            nn.init.uniform_(layer.bias, -0.1, 0.1)
            if isinstance(layer, nn.BatchNorm1d | nn.BatchNorm2d):
                layer.running_mean.uniform_(-0.1, 0.1)
                layer.running_var.uniform_(0.5, 1.5)


def seeded(build: Callable[[], nn.Module], *shapes: tuple[int, ...], seed: int = 0) -> Example:
    """``build()`` in eval mode with seeded weights, and example inputs of ``shapes``.

    Only the seed decides the result; the caller's global RNG state is left untouched.
    """
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        module = build()
        init_weights(module)
        inputs = tuple(torch.randn(shape) for shape in shapes)
    return module.eval(), inputs


def make_divisible(value: float, divisor: int = 8) -> int:
    """Channel count rounded to a multiple of ``divisor`` (MobileNet width scaling): never
    below ``divisor`` nor more than 10 % below ``value``."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded
