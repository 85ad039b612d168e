"""Convolutions (grouped, depthwise with a multiplier, dilated, 'same'/asymmetric padding),
transposed convolutions and matrix products lowered from NCHW models: no fallbacks, numerics
within 1 LSB of the PT2E reference per operator, on every kind of core."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.check.verify import Verification
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.integers import SOFTMAX_OUTPUT_SCALE
from cortex_m_nn.core.target import Target
from cortex_m_nn.lower.graph_values import NCHW_TO_NHWC, NHWC_TO_NCHW
from cortex_m_nn.pipeline import CompiledProgram

from .models import seeded

TARGETS = ["cortex-m55", "cortex-m33", "cortex-m0plus"]


class Decoder(nn.Module):
    """Downsample, then upsample three ways: stride 2 with 24 input channels (CMSIS-NN's
    reverse-conv path), stride 2 with output_padding, stride 1 "same" (rolling-buffer path)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Conv2d(3, 24, 3, stride=2, padding=1)
        self.up1 = nn.ConvTranspose2d(24, 8, 2, stride=2)
        self.up2 = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.out = nn.ConvTranspose2d(4, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.down(x))
        y = torch.relu(self.up1(y))
        y = nn.functional.relu6(self.up2(y))
        return self.out(y)


class Scores(nn.Module):
    """Attention scores: softmax(q @ k^T) on [batch, tokens, features]."""

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-2, -1), dim=-1)


class Attention(nn.Module):
    """softmax(q @ k^T) @ v: the second product needs v transposed for CMSIS-NN."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


class Projection(nn.Module):
    """An activation times a constant matrix, relu fused: the constant is transposed at
    compile time; bmm of two 3-D activations with a permuted right operand."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 5))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        projected = torch.relu(x @ self.weight)  # [2, 4, 5]
        return torch.bmm(projected, y.permute(0, 2, 1))  # y: [2, 3, 5]


class TransposedWeight(nn.Module):
    """x @ w.t(): the model's own transpose of a constant is read through."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(5, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight.t()


class OneConv(nn.Module):
    """One convolution after an optional ``F.pad``, a relu on its output."""

    def __init__(
        self, *args: object, pad: tuple[int, ...] = (), value: float = 0.0, **options: object
    ) -> None:
        super().__init__()
        self.pad, self.value = pad, value
        self.conv = nn.Conv1d(*args, **options) if options.pop("one_d", False) else None
        self.conv = self.conv or nn.Conv2d(*args, **options)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        padded = nn.functional.pad(x, self.pad, value=self.value) if self.pad else x
        return torch.relu(self.conv(padded))


#: (id, Conv args and options, input shape, operator counts after lowering, weight shape
#:  stored, the conv's padding argument)
CONVS = [
    ("grouped-3", ((12, 24, 3), {"padding": 1, "groups": 3}), (1, 12, 7, 7),
     {"conv2d": 1}, (24, 3, 3, 4), [1, 1]),
    ("grouped-1x1-stride2", ((8, 8, 1), {"stride": 2, "groups": 4}), (1, 8, 6, 6),
     {"conv2d": 1}, (8, 1, 1, 2), [0, 0]),
    ("grouped-dilated", ((8, 6, 3), {"padding": 2, "dilation": 2, "groups": 2}), (1, 8, 7, 7),
     {"conv2d": 1}, (6, 3, 3, 4), [2, 2]),
    ("depthwise-x3-dilated", ((4, 12, 3), {"padding": 2, "dilation": 2, "groups": 4}),
     (1, 4, 7, 6), {"depthwise_conv2d": 1}, (1, 3, 3, 12), [2, 2]),
    ("same-odd-kernel", ((4, 6, 3), {"padding": "same"}), (1, 4, 5, 6),
     {"conv2d": 1, "pad": 0}, (6, 3, 3, 4), [1, 1]),
    ("same-even-kernel", ((4, 6, (2, 4)), {"padding": "same", "dilation": (1, 2)}),
     (1, 4, 5, 6), {"conv2d": 1, "pad": 0}, (6, 2, 4, 4), [0, 3, 1, 3]),
    ("same-even-depthwise", ((4, 8, 2), {"padding": "same", "groups": 4}), (1, 4, 5, 5),
     {"depthwise_conv2d": 1, "pad": 0}, (1, 2, 2, 8), [0, 0, 1, 1]),
    ("valid", ((4, 6, 3), {"padding": "valid"}), (1, 4, 5, 6), {"conv2d": 1}, (6, 3, 3, 4),
     [0, 0]),
    # TensorFlow's SAME written as F.pad: folded into the convolution's padding
    ("F.pad-asymmetric-stride2", ((4, 6, 3), {"stride": 2, "pad": (0, 1, 0, 1)}),
     (1, 4, 6, 6), {"conv2d": 1, "pad": 0}, (6, 3, 3, 4), [0, 0, 1, 1]),
    ("F.pad-same-depthwise-stride2", ((8, 8, 3), {"stride": 2, "groups": 8, "pad": (0, 1, 0, 1)}),
     (1, 8, 8, 6), {"depthwise_conv2d": 1, "pad": 0}, (1, 3, 3, 8), [0, 0, 1, 1]),
    ("F.pad-plus-own-padding", ((4, 6, 3), {"padding": 1, "pad": (0, 1, 0, 0)}),
     (1, 4, 5, 6), {"conv2d": 1, "pad": 0}, (6, 3, 3, 4), [1, 1, 1, 2]),
    ("F.pad-symmetric", ((4, 6, 3), {"pad": (2, 2, 1, 1)}), (1, 4, 5, 6),
     {"conv2d": 1, "pad": 0}, (6, 3, 3, 4), [1, 2]),
    ("conv1d-F.pad-stride2", ((6, 4, 3), {"stride": 2, "pad": (0, 1), "one_d": True}),
     (1, 6, 10), {"conv2d": 1, "pad": 0}, (4, 1, 3, 6), [0, 0, 0, 1]),
    # pads CMSIS-NN does not read: the pad stays its own kernel (a 3x3 depthwise end padded
    # by 2: arm_depthwise_conv_3x3_s8 reads the middle column unchecked)
    ("F.pad-depthwise-3x3-end-2", ((8, 8, 3), {"padding": 1, "groups": 8, "pad": (0, 1, 0, 1)}),
     (1, 8, 6, 6), {"depthwise_conv2d": 1, "pad": 1}, (1, 3, 3, 8), [1, 1]),
    ("F.pad-start-larger", ((4, 6, 3), {"stride": 2, "pad": (1, 0, 1, 0)}),
     (1, 4, 6, 6), {"conv2d": 1, "pad": 1}, (6, 3, 3, 4), [0, 0]),
    ("F.pad-1x1", ((4, 6, 1), {"pad": (0, 1, 0, 1)}), (1, 4, 5, 5),
     {"conv2d": 1, "pad": 1}, (6, 1, 1, 4), [0, 0]),
    ("F.pad-two-more", ((4, 6, 3), {"pad": (0, 2, 0, 0)}), (1, 4, 5, 6),
     {"conv2d": 1, "pad": 1}, (6, 3, 3, 4), [0, 0]),
    ("F.pad-value", ((4, 6, 3), {"stride": 2, "pad": (0, 1, 0, 1), "value": 0.5}),
     (1, 4, 6, 6), {"conv2d": 1, "pad": 1}, (6, 3, 3, 4), [0, 0]),
    ("F.pad-channels", ((5, 6, 3), {"pad": (0, 1, 0, 1, 0, 1)}), (1, 4, 6, 6),
     {"conv2d": 1, "pad": 1}, (6, 3, 3, 5), [0, 0]),
    ("conv1d-grouped-same", ((6, 6, 4), {"padding": "same", "groups": 3, "one_d": True}),
     (1, 6, 9), {"conv2d": 1, "pad": 0}, (6, 1, 4, 2), [0, 1, 0, 2]),
]  # fmt: skip


@pytest.mark.parametrize("target", TARGETS[:2])
@pytest.mark.parametrize(
    ("layer", "shape", "counts", "weight_shape", "padding"),
    [row[1:] for row in CONVS],
    ids=[row[0] for row in CONVS],
)
def test_convolution_lowers(
    target: str, layer: tuple, shape: tuple, counts: dict, weight_shape: tuple, padding: list
) -> None:
    args, options = layer
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        module = OneConv(*args, **dict(options)).eval()
    after = {f"cortex_m_nn.{name}": count for name, count in counts.items()}
    compiled, verification = check_dialect(
        module, inputs(shape), target=Target.parse(target), after=after
    )
    assert not [r for r in compiled.records if not r.lowered]
    assert verification.passed
    (conv,) = [n for name in ("conv2d", "depthwise_conv2d") for n in operator_nodes(compiled, name)]
    assert getattr(compiled.lowered, conv.args[1].target).shape == weight_shape
    assert list(conv.args[6]) == padding


def inputs(*shapes: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(11)
    return tuple(torch.randn(shape, generator=generator) for shape in shapes)


def layout_changes(compiled) -> list[list[int]]:
    return [
        list(node.args[3])
        for node in compiled.lowered.graph.nodes
        if str(node.target) in ("cortex_m_nn.quantize.default", "cortex_m_nn.dequantize.default")
        and node.args[3]
    ]


def operator_nodes(compiled, name: str) -> list[torch.fx.Node]:
    target = f"cortex_m_nn.{name}.default"
    return [n for n in compiled.lowered.graph.nodes if str(n.target) == target]


def lowers_completely(
    module: nn.Module,
    example: tuple[torch.Tensor, ...],
    target: str,
    replaced: dict[str, int],
    counts: dict[str, int],
) -> tuple[CompiledProgram, Verification]:
    """``module`` compiled for ``target``: the ATen operators ``replaced`` counts before the
    lowering are all gone after it, the cortex_m_nn operators ``counts`` names are there that
    many times, nothing falls back and the numerics verify."""
    after = {f"cortex_m_nn.{name}": n for name, n in counts.items()} | dict.fromkeys(replaced, 0)
    compiled, verification = check_dialect(
        module, example, target=Target.parse(target), before=replaced, after=after
    )
    assert not compiled.stages.lowering.fallbacks
    assert verification.passed
    return compiled, verification


@pytest.mark.parametrize("target", TARGETS)
def test_decoder_lowers_completely(target: str) -> None:
    module, example = seeded(Decoder, 1, 3, 8, 8)
    replaced, counts = {"aten.conv_transpose2d.input": 3}, {"conv2d": 1, "transpose_conv2d": 3}
    compiled, verification = lowers_completely(module, example, target, replaced, counts)
    assert verification.snr_db > 20
    assert layout_changes(compiled) == [NCHW_TO_NHWC, NHWC_TO_NCHW]  # only at the boundary
    # up1 (24 input channels, stride 2) plans a reversed-filter buffer after the conv buffer.
    up1, up2, out = operator_nodes(compiled, "transpose_conv2d")
    offset, total = up1.args[-2:]
    assert total - offset == 8 * 2 * 2 * 24
    for node in (up2, out):
        offset, total = node.args[-2:]
        assert offset == total > 0
    assert compiled.arena_bytes > 0


@pytest.mark.parametrize("target", TARGETS)
def test_attention_scores_lower_completely(target: str) -> None:
    compiled, verification = check_dialect(
        Scores(),
        inputs((2, 4, 8), (2, 6, 8)),
        target=Target.parse(target),
        after={"cortex_m_nn.batch_matmul": 1, "cortex_m_nn.softmax": 1, "aten.transpose.int": 0},
    )
    assert verification.passed
    (matmul,) = operator_nodes(compiled, "batch_matmul")
    q, k = matmul.args[:2]  # the quantized inputs themselves: k is not transposed
    assert [str(n.target) for n in (q, k)] == ["cortex_m_nn.quantize.default"] * 2
    assert [n.args[0].name for n in (q, k)] == ["q", "k"]
    folded = [r for r in compiled.records if r.source_op == "aten.transpose.int"]
    assert [r.kernel for r in folded] == ["read through (no kernel)"]
    scratch = matmul.args[-1]
    assert scratch == (6 * 4 if target == "cortex-m55" else 0)  # MVE: a kernel sum per k row


def test_single_head_4d_attention_scores() -> None:
    _, verification = check_dialect(
        Scores(), inputs((1, 1, 4, 8), (1, 1, 6, 8)), after={"cortex_m_nn.batch_matmul": 1}
    )
    assert verification.passed


@pytest.mark.parametrize("target", TARGETS)
def test_full_attention_lowers_completely(target: str) -> None:
    """``probabilities @ v`` takes v transposed: one cortex_m_nn::transpose in front of it."""
    compiled, verification = check_dialect(
        Attention(),
        inputs((2, 4, 8), (2, 6, 8), (2, 6, 8)),
        target=Target.parse(target),
        after={"cortex_m_nn.batch_matmul": 2, "cortex_m_nn.transpose": 0},
    )
    assert verification.passed
    _, second = operator_nodes(compiled, "batch_matmul")
    v = second.args[1]  # v is a graph input: the transpose is folded into its quantize
    assert str(v.target) == "cortex_m_nn.quantize.default" and v.args[3] == [0, 2, 1]
    assert [r for r in compiled.records if not r.lowered] == []


class TwoProjections(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.k, self.v = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, q: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        scores = torch.softmax(q @ self.k(x).transpose(-2, -1), dim=-1)
        return scores @ self.v(x)


@pytest.mark.parametrize("target", TARGETS)
def test_probabilities_times_a_computed_value_transpose_it(target: str) -> None:
    module, _ = seeded(TwoProjections, 1)
    compiled, verification = check_dialect(
        module,
        inputs((2, 4, 8), (2, 6, 8)),
        target=Target.parse(target),
        after={"cortex_m_nn.batch_matmul": 2, "cortex_m_nn.transpose": 1},
    )
    assert verification.passed
    (transpose,) = operator_nodes(compiled, "transpose")
    _, second = operator_nodes(compiled, "batch_matmul")
    assert second.args[1] is transpose or second.args[1].args[0] is transpose
    products = [r for r in compiled.records if r.source_op == "aten.matmul"]
    assert products[1].cmsis_function == "arm_batch_matmul_s8 after arm_transpose_s8"


def test_probabilities_feed_the_product_without_requantization() -> None:
    """softmax's fixed 1/256 output is the product's left operand as it is."""
    compiled, _ = check_dialect(
        Attention(), inputs((2, 4, 8), (2, 6, 8), (2, 6, 8)), allow_fallback=True
    )
    quantizes = [
        n.args[1]
        for n in compiled.stages.quantized.graph.nodes
        if n.target == torch.ops.quantized_decomposed.quantize_per_tensor.default
    ]
    assert quantizes.count(SOFTMAX_OUTPUT_SCALE) == 1


def test_constant_and_permuted_right_operands() -> None:
    module, _ = seeded(Projection, 1)
    compiled, verification = check_dialect(
        module,
        inputs((2, 4, 8), (2, 3, 5)),
        after={"cortex_m_nn.batch_matmul": 2, "aten.permute": 0, "aten.relu": 0},
    )
    assert verification.passed
    first, _ = operator_nodes(compiled, "batch_matmul")
    constant = getattr(compiled.lowered, first.args[1].target)
    assert constant.shape == (5, 8) and constant.dtype == torch.int8  # transposed weight
    assert first.args[-3] == -128  # relu fused: output clamped at the zero point


def test_transposed_constant_is_used_as_stored() -> None:
    module, _ = seeded(TransposedWeight, 1)
    compiled, verification = check_dialect(
        module, inputs((3, 8)), after={"cortex_m_nn.batch_matmul": 1, "aten.t": 0}
    )
    assert verification.passed
    (matmul,) = operator_nodes(compiled, "batch_matmul")
    constant = getattr(compiled.lowered, matmul.args[1].target)
    assert constant.shape == (5, 8)  # the [out, in] parameter's rows, not transposed twice


def test_heads_stored_channels_last_are_quantized_in_logical_order() -> None:
    """Two heads in a 4-D input are stored channels-last at the boundary; the product wants
    them in logical order, which the input quantize gives straight away (no transpose)."""
    compiled, verification = check_dialect(
        Scores(),
        inputs((1, 2, 4, 8), (1, 2, 6, 8)),
        after={"cortex_m_nn.batch_matmul": 1, "cortex_m_nn.transpose": 0},
    )
    assert verification.passed
    (matmul,) = operator_nodes(compiled, "batch_matmul")
    q = matmul.args[0]
    assert str(q.target) == "cortex_m_nn.quantize.default" and q.args[3] == []


class OneTranspose(nn.Module):
    def __init__(self, **options: object) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 4, **options)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(x)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"kernel_size": 3, "stride": 2, "groups": 2}, "groups=2"),
        ({"kernel_size": 3, "stride": 2, "dilation": 2}, "dilation"),
        ({"kernel_size": 3, "stride": 2, "output_padding": 1}, "output_padding 1 > padding 0"),
    ],
)
def test_unsupported_transposed_convolutions_are_refused(options: dict, words: str) -> None:
    module = OneTranspose(**options).eval()
    with pytest.raises(CompileError, match=words) as error:
        check_dialect(module, inputs((1, 4, 5, 5)))
    assert "aten.conv_transpose2d" in str(error.value)
