"""Model factories written the way users write them, each unusual in one way (inputs, outputs,
mode, factory result): ``test_unusual_input.py`` compiles each through the command line."""

from __future__ import annotations

import torch
from torch import nn


def _conv():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU()).eval()


def int_input():
    class M(nn.Module):
        def forward(self, x):
            return x.float() * 2

    return M(), (torch.ones(1, 4, dtype=torch.int32),)


def bool_input():
    class M(nn.Module):
        def forward(self, x):
            return x.float() + 1

    return M(), (torch.ones(1, 4, dtype=torch.bool),)


def batch4():
    return _conv(), (torch.randn(4, 2, 5, 5),)


class Dict(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = _conv()

    def forward(self, x):
        return {"a": self.c(x), "b": self.c(x) * 2}


def dict_output():
    return Dict().eval(), (torch.randn(1, 2, 5, 5),)


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = _conv()

    def forward(self, x):
        y = self.c(x)
        return (y, (y + 1, y * 2))


def nested_output():
    return Nested().eval(), (torch.randn(1, 2, 5, 5),)


class NoneOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = _conv()

    def forward(self, x):
        return self.c(x), None


def none_output():
    return NoneOut().eval(), (torch.randn(1, 2, 5, 5),)


class IntOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = _conv()

    def forward(self, x):
        return self.c(x), 3


def int_output():
    return IntOut().eval(), (torch.randn(1, 2, 5, 5),)


def zero_size():
    return _conv(), (torch.randn(1, 2, 0, 5),)


def training():
    m = _conv()
    m.train()
    return m, (torch.randn(1, 2, 5, 5),)


def training_dropout():
    """Left in training mode (dropout active): the compiler puts it in eval mode."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.Dropout(0.5))
    m.train()
    return m, (torch.randn(1, 2, 5, 5),)


def wrong_type():
    return 3


def not_module():
    return (lambda x: x), (torch.randn(1, 4),)


def raises():
    raise KeyError("nope")


def tensor_only():
    return _conv()


def list_inputs():
    return _conv(), [torch.randn(1, 2, 5, 5)]


def scalar_input():
    class M(nn.Module):
        def forward(self, x, k):
            return x * k

    return M(), (torch.randn(1, 4), 2.0)


def training_dropout_eval():
    """``training_dropout`` as its author meant it for inference."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.Dropout(0.5)).eval()
    return m, (torch.randn(1, 2, 5, 5),)
