"""Data-movement operators in whole models: max pool, transpose, pad, concat, mean, and views
across channels-last bytes. Every model takes NCHW input, lowers with no fallback on each
core, and agrees with the PT2E reference within 1 LSB per operator."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.target import Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.pipeline import quantize

from .models import seeded

TARGETS = ["cortex-m55", "cortex-m33", "cortex-m0plus"]


class MaxPools(nn.Module):
    """max pools (padded; ceil mode) with a fused relu6, then a global mean → linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.linear = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu6(F.max_pool2d(self.conv(x), 3, 2, 1))
        y = F.max_pool2d(y, 2, ceil_mode=True)
        return self.linear(y.mean((2, 3)))


class AttentionHeads(nn.Module):
    """Tokens from a feature map, a head split (view + permute), softmax per head, heads merged
    back (permute + reshape), and a flatten of the feature map (C > 1, H·W > 1) → linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.qkv = nn.Linear(8, 8)
        self.proj = nn.Linear(8, 5)
        self.head = nn.Linear(8 * 4 * 4, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = torch.relu(self.conv(x))  # [1, 8, 4, 4]
        tokens = features.flatten(2).transpose(1, 2)  # [1, 16, 8]
        heads = self.qkv(tokens).view(1, 16, 2, 4).permute(0, 2, 1, 3)  # [1, 2, 16, 4]
        heads = torch.softmax(heads.mT, dim=-1).mT
        merged = heads.permute(0, 2, 1, 3).reshape(1, 16, 8)
        return self.proj(merged), self.head(features.flatten(1))


class FlattenLinear(nn.Module):
    """flatten / reshape / view of a channels-last feature map straight into linears."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, padding=1)
        self.a = nn.Linear(6 * 5 * 5, 3)
        self.b = nn.Linear(25, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = torch.relu(self.conv(x))
        return self.a(torch.flatten(y, 1)), self.a(y.reshape(1, -1)), self.b(y.view(1, 6, 25))


class Pads(nn.Module):
    """Constant pads: spatial before a convolution and a max pool, on channels."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.second = nn.Conv2d(4, 4, 3)
        self.third = nn.Conv2d(7, 2, 1)
        self.zero = nn.ZeroPad2d((1, 2, 0, 2))  # bottom two more than top: not folded

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.conv(x)
        a = self.second(self.zero(y))
        b = F.max_pool2d(F.pad(y, (1, 1, 1, 1), value=-3.0), 3, 2)
        c = self.third(F.pad(b, (0, 0, 0, 0, 1, 2), value=0.25))
        return a, c


class InfinitePad(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(F.pad(x, (1, 1, 1, 1), value=float("-inf")), 3)


class Concats(nn.Module):
    """Concatenation along channels, height and width of feature maps, and of vectors."""

    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Conv2d(3, 4, 3, padding=1)
        self.right = nn.Conv2d(3, 6, 1)
        self.mix = nn.Conv2d(10, 4, 1)
        self.linear = nn.Linear(4 + 4, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = torch.relu(self.left(x)), self.right(x)
        y = self.mix(torch.cat([a, b], dim=1))
        tall = F.avg_pool2d(torch.cat([y, a], dim=2), 2)
        wide = torch.concat([y, y, a], dim=-1)
        vector = torch.cat([y.mean((2, 3)), wide.mean((2, 3))], dim=1)
        return tall, self.linear(vector)


class Means(nn.Module):
    """Global average pools: mean over [2, 3] and [-2, -1], keepdim or not, adaptive(1)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.linear = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = self.conv(x)
        a = y.mean((2, 3))
        b = torch.relu(y.mean((-2, -1), keepdim=True))
        c = F.adaptive_avg_pool2d(y, 1)
        return self.linear(a), b, self.linear(torch.flatten(c + b, 1))


class ChannelsLastModel(nn.Module):
    """A model written for NHWC tensors: permutes at both ends, which the boundary absorbs."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


class SequenceConv(nn.Module):
    """A [N, C, L] sequence unsqueezed into 1×k convolutions and squeezed back: views read by
    a convolution are made channels-last instead of being refused."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(6, 4, (1, 3), padding=(0, 1))
        self.second = nn.Conv2d(4, 4, (1, 3), padding=(0, 1))
        self.mix = nn.Linear(10, 10)
        self.third = nn.Conv2d(4, 2, (1, 3))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(self.conv(x.unsqueeze(2))).squeeze(2)  # input view: folded in quantize
        return self.second(y.unsqueeze(2)), self.third(self.mix(y).unsqueeze(2))


MODELS = {
    "max_pools": (MaxPools, (1, 3, 9, 9), {"cortex_m_nn.max_pool2d": 2}),
    "attention": (AttentionHeads, (1, 3, 8, 8), {"cortex_m_nn.softmax": 1}),
    "flatten_linear": (FlattenLinear, (1, 4, 5, 5), {"cortex_m_nn.linear": 3}),
    "pads": (Pads, (1, 3, 6, 6), {"cortex_m_nn.pad": 3, "cortex_m_nn.max_pool2d": 1}),
    "concats": (Concats, (1, 3, 6, 6), {"cortex_m_nn.concat": 4}),
    "means": (Means, (1, 3, 5, 7), {"cortex_m_nn.avg_pool2d": 3}),
    "channels_last": (ChannelsLastModel, (1, 6, 6, 3), {"cortex_m_nn.conv2d": 1}),
}


def operators(compiled, name: str) -> list[torch.fx.Node]:
    return [
        n
        for n in compiled.lowered.graph.nodes
        if n.op == "call_function" and str(n.target) == f"cortex_m_nn.{name}.default"
    ]


def only_cortex_m_nn_and_views(compiled) -> None:
    for node in compiled.lowered.graph.nodes:
        if node.op == "call_function" and "getitem" not in str(node.target):
            assert str(node.target).startswith(("cortex_m_nn.", "aten.view")), node.target


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_lowers_completely_and_verifies(name: str, target: str) -> None:
    factory, shape, expected = MODELS[name]
    module, inputs = seeded(factory, *shape)
    compiled, verification = check_dialect(
        module, inputs, target=Target.parse(target), after=expected
    )
    assert not [r for r in compiled.records if not r.lowered]
    only_cortex_m_nn_and_views(compiled)
    assert verification.max_lsb <= 1


@pytest.fixture(scope="module")
def attention():
    return check_dialect(*seeded(AttentionHeads, 1, 3, 8, 8))[0]


def test_tokens_from_a_channels_last_map_move_nothing(attention) -> None:
    """flatten(2).transpose(1, 2) of an NHWC map is its bytes as they are: the qkv linear reads
    the convolution's output through views only."""
    (qkv, *_) = operators(attention, "linear")
    source = qkv.args[0]
    while str(source.target) == "aten.view.default":
        source = source.args[0]
    assert "getitem" in str(source.target) and "conv2d" in str(source.args[0].target)


def test_attention_moves_bytes_only_where_it_must(attention) -> None:
    transposes = operators(attention, "transpose")
    # flatten(1) of the NHWC map, one for the head split permute and the mT before softmax
    # (composed: one transpose of the qkv output), and one for mT + permute + reshape after it
    # (the permute lands on softmax's own bytes held channels-last; the reshape to [1, 16, 8]
    # moves them once).
    assert len(transposes) == 3
    split = [r for r in attention.records if r.source_op == "aten.permute"][0]
    assert split.kernel == "removed (no kernel)"  # its transpose was composed into the next
    for node in transposes:
        assert 2 <= len(node.args[1]) <= 4 and node.args[1] != sorted(node.args[1])


def test_view_read_by_a_convolution_is_made_channels_last() -> None:
    compiled, _ = check_dialect(*seeded(SequenceConv, 1, 6, 10))
    assert not [r for r in compiled.records if not r.lowered]
    (quantize,) = operators(compiled, "quantize")
    assert list(quantize.args[3]) == [0, 2, 3, 1]  # [1, 6, 1, 10] quantized straight to NHWC
    # The linear reads y = squeeze(...) in logical order: one transpose [10, 4] → [4, 10];
    # its output goes back to NHWC for the third convolution: [4, 10] → [10, 4]. The second
    # convolution reads unsqueeze(y), the first convolution's own NHWC bytes: a view.
    transposes = [list(node.args[1]) for node in operators(compiled, "transpose")]
    assert transposes == [[1, 0], [1, 0]]
    first, second, _ = operators(compiled, "conv2d")
    source = second.args[0]
    while str(source.target) == "aten.view.default":
        source = source.args[0]
    assert source.args[0] is first


def test_nhwc_model_needs_no_transpose() -> None:
    compiled, _ = check_dialect(*seeded(ChannelsLastModel, 1, 6, 6, 3))
    assert not operators(compiled, "transpose")
    (quantize,) = operators(compiled, "quantize")
    (dequantize,) = operators(compiled, "dequantize")
    assert list(quantize.args[3]) == [] and list(dequantize.args[3]) == []


def test_flatten_before_linear_is_a_transpose_to_nchw_order() -> None:
    compiled, _ = check_dialect(*seeded(FlattenLinear, 1, 4, 5, 5))
    (transpose,) = operators(compiled, "transpose")  # shared by flatten and reshape
    assert list(transpose.args[1]) == [1, 0]  # [H·W, C] → [C, H·W]
    kinds = {r.source_op: r.kernel for r in compiled.records}
    assert kinds["aten.flatten.using_ints"] == "cortex_m_nn::transpose"


def test_max_pool_fuses_the_following_activation() -> None:
    compiled, _ = check_dialect(*seeded(MaxPools, 1, 3, 9, 9))
    first, second = operators(compiled, "max_pool2d")
    low, high = first.args[-2:]
    assert (low, high) != (-128, 127)  # relu6 became the clamp
    assert second.args[4] is True  # ceil_mode
    assert not any("relu" in r.source_op for r in compiled.records)


def test_concat_functions_follow_the_stored_axis() -> None:
    compiled, _ = check_dialect(*seeded(Concats, 1, 3, 6, 6))
    functions = [r.cmsis_function for r in compiled.records if r.source_op.startswith("aten.cat")]
    functions += [r.cmsis_function for r in compiled.records if r.source_op == "aten.concat"]
    # channels (NHWC innermost) → x, height → z, width → y; the [1, 8] vectors → x
    assert sorted(functions) == sorted(
        [
            "arm_concatenation_s8_x",
            "arm_concatenation_s8_z",
            "arm_concatenation_s8_y",
            "arm_concatenation_s8_x",
        ]
    )


def test_pad_value_is_quantized_like_pt2e() -> None:
    compiled, _ = check_dialect(*seeded(Pads, 1, 3, 6, 6))
    float_values = {}
    for node in compiled.stages.quantized.graph.nodes:
        if str(node.target) in ("aten.pad.default", "aten.constant_pad_nd.default"):
            value = node.args[3] if str(node.target) == "aten.pad.default" else node.args[2]
            (quantize,) = node.users
            scale, zero_point = float(quantize.args[1]), int(quantize.args[2])
            float_values[tuple(node.args[1])] = round(float(value or 0.0) / scale) + zero_point
    pads = {tuple(n.args[1]): n for n in operators(compiled, "pad")}
    assert len(pads) == len(float_values) == 3
    # NHWC storage: the logical (W, H) pads land on stored dims 2 and 1, channel pads on 3.
    assert pads[(0, 0, 1, 0)].args[3] == float_values[(1, 2, 0, 2)]
    assert list(pads[(0, 0, 1, 0)].args[2]) == [0, 2, 2, 0]
    assert pads[(0, 1, 1, 0)].args[3] == float_values[(1, 1, 1, 1)]
    assert pads[(0, 0, 0, 1)].args[3] == float_values[(0, 0, 0, 0, 1, 2)]
    assert list(pads[(0, 0, 0, 1)].args[2]) == [0, 0, 0, 2]


class Dilated(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(x, 3, 1, 1, dilation=2)


class Replicate(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.pad(x, (1, 1, 1, 1), mode="replicate")


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (Dilated, "dilation [2, 2]"),
        (Replicate, "pad mode 'replicate'"),
        (InfinitePad, "aten.pad at"),  # no scale covers -inf: left in float by the quantizer
    ],
)
def test_unsupported_variants_are_refused_with_the_reason(factory, message: str) -> None:
    with pytest.raises(CompileError) as error:
        check_dialect(*seeded(factory, 1, 2, 6, 6))
    assert message in str(error.value) and "\n" not in str(error.value)


# --- quantizer: data movement shares quantization parameters -------------------------------


def quantized(factory: type[nn.Module], *shape: int) -> torch.fx.GraphModule:
    module, inputs = seeded(factory, *shape)
    source = ModelSource(factory.__name__, module, inputs)
    return quantize(source, synthetic(inputs, 4), progress=False)[1]


def qparams(node: torch.fx.Node) -> tuple[float, int]:
    return float(node.args[1]), int(node.args[2])


def test_concat_inputs_and_output_share_one_observer() -> None:
    graph = quantized(Concats, 1, 3, 6, 6).graph
    cats = [n for n in graph.nodes if str(n.target) in ("aten.cat.default", "aten.concat.default")]
    assert len(cats) == 4
    for cat in cats:
        (output,) = cat.users
        inputs = {qparams(dequantize) for dequantize in cat.args[0]}
        assert inputs == {qparams(output)}


class AfterSoftmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1).transpose(1, 2).reshape(1, 12)


def test_data_movement_after_softmax_keeps_its_fixed_quantization() -> None:
    graph = quantized(AfterSoftmax, 1, 3, 4).graph
    quantizes = [n for n in graph.nodes if "quantize_per_tensor" in str(n.target)]
    # the input, then softmax, transpose and reshape all at 1/256, -128: no requantization
    assert [qparams(q) for q in quantizes[1:] if "dequantize" not in str(q.target)] == [
        (1 / 256, -128)
    ] * 3


def test_activation_after_a_pool_shares_the_pool_quantization() -> None:
    graph = quantized(MaxPools, 1, 3, 9, 9).graph
    pool = next(n for n in graph.nodes if str(n.target) == "aten.max_pool2d.default")
    (relu6,) = pool.users  # no quantize between the pool and its activation
    assert "hardtanh" in str(relu6.target) or "relu6" in str(relu6.target)
    (output,) = relu6.users
    assert qparams(output) == qparams(pool.args[0])
