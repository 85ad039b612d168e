"""Random models from a small grammar of layers, as the source of a Python file whose
``factory()`` returns ``(module, example_inputs)`` (the CLI loads it as ``path.py:factory``).

A model is a chain of 1 to 6 steps on an image ``[1, C, H, W]`` (convolution, depthwise
convolution, batch norm, max/average pool, an activation, a residual add of a 3x3
convolution, a concatenation with a 1x1 convolution's activation), then optionally a head:
global average pool or flatten, and linear layers. Or a chain of linear layers and activations
on a vector ``[1, F]``. Shapes and channel counts are small and drawn; the shapes stay valid.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

ACTIVATIONS = [
    "torch.relu(x)",
    "F.relu6(x)",
    "torch.sigmoid(x)",
    "torch.tanh(x)",
    "F.hardswish(x)",
    "F.hardsigmoid(x)",
    "F.leaky_relu(x, 0.1)",
]


@dataclass
class Model:
    """The source being built: module declarations, forward lines, the current shape."""

    shape: list[int]  # without the batch dimension
    modules: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def layer(self, declaration: str) -> str:
        self.modules.append(f"self.l{len(self.modules)} = {declaration}")
        return f"self.l{len(self.modules) - 1}"


def _convolution(draw: st.DrawFn, model: Model) -> None:
    channels, height, width = model.shape
    kernel = draw(st.sampled_from([1, 3]))
    padding = draw(st.integers(0, kernel // 2))
    stride = draw(st.integers(1, 2))
    if min(height, width) + 2 * padding < kernel:
        padding = kernel // 2
    depthwise = draw(st.booleans())
    out = channels * draw(st.integers(1, 2)) if depthwise else draw(st.integers(1, 8))
    groups = f", groups={channels}" if depthwise else ""
    name = model.layer(f"nn.Conv2d({channels}, {out}, {kernel}, {stride}, {padding}{groups})")
    model.lines.append(f"x = {name}(x)")
    size = [(s + 2 * padding - kernel) // stride + 1 for s in (height, width)]
    model.shape = [out, *size]


def _image_step(draw: st.DrawFn, model: Model) -> None:
    channels, height, width = model.shape
    step = draw(st.sampled_from(["conv", "bn", "pool", "activation", "add", "concat"]))
    if step == "conv":
        _convolution(draw, model)
    elif step == "bn":
        model.lines.append(f"x = {model.layer(f'nn.BatchNorm2d({channels})')}(x)")
    elif step == "pool" and min(height, width) >= 2:
        pool = draw(st.sampled_from(["max_pool2d", "avg_pool2d"]))
        model.lines.append(f"x = F.{pool}(x, 2)")
        model.shape = [channels, height // 2, width // 2]
    elif step == "add":
        name = model.layer(f"nn.Conv2d({channels}, {channels}, 3, padding=1)")
        model.lines.append(f"x = x + {name}(x)")
    elif step == "concat":
        out = draw(st.integers(1, 4))
        name = model.layer(f"nn.Conv2d({channels}, {out}, 1)")
        model.lines.append(f"x = torch.cat([x, torch.relu({name}(x))], dim=1)")
        model.shape = [channels + out, height, width]
    else:
        model.lines.append(f"x = {draw(st.sampled_from(ACTIVATIONS))}")


def _vector_step(draw: st.DrawFn, model: Model) -> None:
    if draw(st.booleans()):
        out = draw(st.integers(1, 16))
        model.lines.append(f"x = {model.layer(f'nn.Linear({model.shape[0]}, {out})')}(x)")
        model.shape = [out]
    else:
        model.lines.append(f"x = {draw(st.sampled_from(ACTIVATIONS))}")


def _head(draw: st.DrawFn, model: Model) -> None:
    """Optionally end an image model in a vector: global average pool or flatten."""
    head = draw(st.sampled_from(["none", "mean", "flatten"]))
    if head == "none":
        return
    channels, height, width = model.shape
    if head == "mean":
        model.lines.append("x = x.mean((2, 3))")
        model.shape = [channels]
    else:
        model.lines.append("x = torch.flatten(x, 1)")
        model.shape = [channels * height * width]
    for _ in range(draw(st.integers(0, 2))):
        _vector_step(draw, model)


SOURCE = """import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{modules}

    def forward(self, x):
{lines}
        return x


def factory():
    torch.manual_seed({seed})
    return Model().eval(), (torch.randn(1, {input_shape}),)
"""


@st.composite
def model_sources(draw: st.DrawFn) -> str:
    """The source of a factory file (a model drawn from the grammar)."""
    if draw(st.integers(0, 3)) == 0:
        model = Model([draw(st.integers(1, 16))])
        input_shape = list(model.shape)
        for _ in range(draw(st.integers(1, 4))):
            _vector_step(draw, model)
    else:
        model = Model([draw(st.integers(1, 4)), draw(st.integers(1, 8)), draw(st.integers(1, 8))])
        input_shape = list(model.shape)
        for _ in range(draw(st.integers(1, 6))):
            _image_step(draw, model)
        _head(draw, model)
    indent = " " * 8
    return SOURCE.format(
        modules="\n".join(indent + m for m in model.modules) or indent + "pass",
        lines="\n".join(indent + line for line in model.lines),
        seed=draw(st.integers(0, 2**16)),
        input_shape=", ".join(map(str, input_shape)),
    )
