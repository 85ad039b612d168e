"""1-D convolutions and pools on ``[N, C, L]``: lowered as 2-D ones of height 1 on the values
stored channels-last (NLC), from NCHW-style models, within 1 LSB of the PT2E reference."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from cortex_m_nn.check.harness import check_dialect

from .models import seeded
from .test_lowering_conv import TARGETS, lowers_completely
from .test_lowering_conv import operator_nodes as operators


class Temporal(nn.Module):
    """Conv1d (stride, dilation, padding) → depthwise Conv1d with a depth multiplier → residual
    add → pointwise → max_pool1d, avg_pool1d, adaptive_avg_pool1d and mean over L."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(6, 8, 5, stride=2, padding=2)
        self.dilated = nn.Conv1d(8, 8, 3, padding=2, dilation=2)
        self.depthwise = nn.Conv1d(8, 16, 3, padding=1, groups=8)
        self.pointwise = nn.Conv1d(16, 8, 1)
        self.fc = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(self.conv(x))
        y = y + nn.functional.relu6(self.dilated(y))
        y = self.pointwise(torch.relu(self.depthwise(y)))
        pooled = nn.functional.max_pool1d(y, 3, stride=2, padding=1)
        pooled = nn.functional.avg_pool1d(pooled, 2)
        pooled = nn.functional.adaptive_avg_pool1d(pooled, 1).flatten(1)
        return self.fc(pooled), y.mean(-1, keepdim=True)


class Tokens(nn.Module):
    """A [N, L, D] sequence transposed into a 1-D convolution and back: the transposes fold
    into the input quantize and the output dequantize."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(8, 8, 3, padding=1, groups=8)
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        return self.linear(y)


def permutations(compiled) -> list[list[int]]:
    """The layout changes of the boundary quantize/dequantize operators."""
    return [
        list(n.args[3])
        for name in ("quantize", "dequantize")
        for n in operators(compiled, name)
        if n.args[3]
    ]


@pytest.mark.parametrize("target", TARGETS)
def test_temporal_model_lowers_completely(target: str) -> None:
    counts = {"conv2d": 3, "depthwise_conv2d": 1, "max_pool2d": 1, "avg_pool2d": 3, "add": 1}
    compiled, _ = lowers_completely(
        *seeded(Temporal, 1, 6, 40), target, {"aten.conv1d": 4}, counts | {"transpose": 0}
    )
    # the input quantized straight to NLC, the mean's [1, 8, 1] output dequantized from it
    assert permutations(compiled) == [[0, 2, 1], [0, 2, 1]]
    first = operators(compiled, "conv2d")[0]
    assert list(first.args[5:8]) == [[1, 2], [0, 2], [1, 1]]  # stride, padding, dilation
    weight = getattr(compiled.lowered, first.args[1].target)
    assert weight.shape == (8, 1, 5, 6)  # OHWI with H = 1
    (depthwise,) = operators(compiled, "depthwise_conv2d")
    assert depthwise.args[8] == 2  # depth multiplier
    (max_pool,) = operators(compiled, "max_pool2d")
    assert list(max_pool.args[1:4]) == [[1, 3], [1, 2], [0, 1]]


def test_sequence_output_is_dequantized_back_to_channels_first() -> None:
    """A 1-D convolution's output leaves the graph: dequantized from NLC to [N, C, L]."""
    module, inputs = seeded(lambda: nn.Conv1d(3, 4, 3, padding=1), 1, 3, 10)
    compiled, verification = check_dialect(module, inputs, after={"cortex_m_nn.conv2d": 1})
    assert verification.passed
    assert permutations(compiled) == [[0, 2, 1], [0, 2, 1]]
    (output,) = compiled.lowered(*inputs)
    assert output.shape == (1, 4, 10)


def test_transposed_tokens_need_no_transpose_kernel() -> None:
    module, inputs = seeded(Tokens, 1, 12, 8)
    compiled, verification = check_dialect(
        module,
        inputs,
        after={"cortex_m_nn.depthwise_conv2d": 1, "cortex_m_nn.linear": 1},
    )
    assert verification.passed
    assert not operators(compiled, "transpose")  # [N, L, D] is the NLC of [N, D, L]
    assert permutations(compiled) == []


def test_grouped_1d_convolution_is_a_grouped_conv2d() -> None:
    """groups=2 of 4 channels: one conv2d whose OHWI weight holds 2 channels per group."""
    module, inputs = seeded(lambda: nn.Conv1d(4, 4, 3, groups=2), 1, 4, 9)
    compiled, verification = check_dialect(module, inputs, after={"cortex_m_nn.conv2d": 1})
    assert verification.passed
    (conv,) = operators(compiled, "conv2d")
    assert getattr(compiled.lowered, conv.args[1].target).shape == (4, 1, 3, 2)


class Upsampler1d(nn.Module):
    """A 1-D decoder: Conv1d, then ConvTranspose1d at stride 2 (output padding 1) and stride 4
    (padding 1), each into the next, and out as [N, C, L]."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3, padding=1)
        self.up2 = nn.ConvTranspose1d(8, 6, 3, stride=2, padding=1, output_padding=1)
        self.up4 = nn.ConvTranspose1d(6, 3, 4, stride=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.up2(torch.relu(self.conv(x))))
        return self.up4(y)


@pytest.mark.parametrize("target", TARGETS)
def test_transposed_1d_convolutions_lower(target: str) -> None:
    module, inputs = seeded(Upsampler1d, 1, 4, 10)
    replaced, counts = {"aten.conv_transpose1d": 2}, {"conv2d": 1, "transpose_conv2d": 2}
    compiled, _ = lowers_completely(module, inputs, target, replaced, counts | {"transpose": 0})
    up2, up4 = operators(compiled, "transpose_conv2d")
    assert list(up2.args[5:8]) == [[1, 2], [0, 1], [0, 1]]  # stride, padding, output padding
    assert getattr(compiled.lowered, up2.args[1].target).shape == (6, 1, 3, 8)  # OHWI, H = 1
    assert list(up4.args[5:8]) == [[1, 4], [0, 0], [0, 0]]
    (output,) = compiled.lowered(*inputs)
    assert output.shape == (1, 3, 80)
    assert permutations(compiled) == [[0, 2, 1], [0, 2, 1]]  # NLC inside, at the boundary only


class Resize1d(nn.Module):
    """A Conv1d, then ``F.interpolate`` of its [N, C, L] output (``how``: interpolate's
    keyword arguments), then a pointwise Conv1d."""

    def __init__(self, **how: object) -> None:
        super().__init__()
        self.how = how
        self.conv = nn.Conv1d(3, 5, 3, padding=1)
        self.mix = nn.Conv1d(5, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.interpolate(torch.relu(self.conv(x)), **self.how)
        return self.mix(y)


#: (id, interpolate's arguments, output length from 11; the ATen op)
RESIZES_1D = [
    ("nearest-x2", {"scale_factor": 2, "mode": "nearest"}, 22, "upsample_nearest1d"),
    ("nearest-size", {"size": 17, "mode": "nearest"}, 17, "upsample_nearest1d"),
    ("nearest-exact-x1.5", {"scale_factor": 1.5, "mode": "nearest-exact"}, 16,
     "_upsample_nearest_exact1d"),
    ("linear-x3", {"scale_factor": 3, "mode": "linear"}, 33, "upsample_linear1d"),
    ("linear-corners-size", {"size": 20, "mode": "linear", "align_corners": True}, 20,
     "upsample_linear1d"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("how", "length", "op"), [r[1:] for r in RESIZES_1D], ids=[r[0] for r in RESIZES_1D]
)
def test_resize_1d_lowers(how: dict, length: int, op: str) -> None:
    module, inputs = seeded(lambda: Resize1d(**how), 1, 3, 11)
    compiled, verification = check_dialect(
        module,
        inputs,
        before={f"aten.{op}.vec": 1},
        after={"cortex_m_nn.resize": 1, "cortex_m_nn.transpose": 0, f"aten.{op}.vec": 0},
    )
    assert not compiled.stages.lowering.fallbacks
    assert verification.passed
    (resize,) = operators(compiled, "resize")
    rows = getattr(compiled.lowered, resize.args[1].target)
    columns = getattr(compiled.lowered, resize.args[2].target)
    assert columns.shape[0] >= length and rows.shape[0] >= 1
    (output,) = compiled.lowered(*inputs)
    assert output.shape == (1, 4, length)
