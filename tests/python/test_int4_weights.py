"""int4 weights (``--weights int4``): the packing against CMSIS-NN's documented format, and a
case table compiled end to end (which layers take int4 weights and which CMSIS-NN function
each runs, the weight bytes halved, ``verify`` against the PT2E graph on three cores)."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.options import (
    Activations,
    Int4Ranges,
    LinearWeights,
    QuantizationOptions,
    Weights,
)
from cortex_m_nn.core.target import Isa, Target
from cortex_m_nn.ops import int4

from .test_cli import run, tiny_model  # noqa: F401, F811  (tiny_model: the fixture)


def test_packing_is_cmsis_nns_documented_example() -> None:
    """arm_nnfunctions.h: weights [1, 2, 3, 4] are the bytes [0x21, 0x43]; negative values
    are two's-complement nibbles."""
    assert int4.pack(torch.tensor([1, 2, 3, 4], dtype=torch.int8)).tolist() == [0x21, 0x43]
    assert int4.pack(torch.tensor([-1, -8, 7, -2], dtype=torch.int8)).tolist() == [0x8F, 0xE7]


@settings(max_examples=100, deadline=None)
@given(
    rows=st.integers(1, 5),
    half=st.integers(1, 6),
    seed=st.integers(0, 2**31),
)
def test_unpack_inverts_pack(rows: int, half: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    values = torch.randint(-8, 8, (rows, 2 * half), generator=gen, dtype=torch.int8)
    packed = int4.pack(values)
    assert packed.dtype == torch.uint8 and packed.shape == (rows, half)
    assert torch.equal(int4.unpack(packed), values)


@pytest.mark.parametrize(
    "values",
    [torch.zeros(3, dtype=torch.int8), torch.full((2,), 8, dtype=torch.int8), torch.zeros(2)],
    ids=["odd", "out-of-range", "float"],
)
def test_pack_refuses_what_cmsis_nn_cannot_read(values: torch.Tensor) -> None:
    with pytest.raises(ValueError):
        int4.pack(values)


class Packs(nn.Module):
    """Every layer has an int4 case: a first convolution of one input channel and an even
    kernel width (rows of KW * Cin = 4), a depthwise one of 8 channels, a 1x1 one, a 1xN one
    (height 1), a global pool and a linear layer (per channel a 1x1 s4 convolution, per tensor
    arm_fully_connected_s4)."""

    input_shape = (1, 1, 10, 8)

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Conv2d(1, 8, (3, 4), padding=(1, 2))
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pointwise = nn.Conv2d(8, 16, 1)
        self.row = nn.Conv2d(16, 16, (1, 3), stride=(1, 2), padding=(0, 1))
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.pointwise(torch.relu(self.depthwise(torch.relu(self.first(x))))))
        y = y.mean(dim=2, keepdim=True)  # height 1: the next convolution is 1xN
        y = torch.relu(self.row(y))
        return self.head(y.mean(dim=(2, 3)))


class KeepsInt8(nn.Module):
    """Layers without an int4 case: rows of KW * Cin = 9 (odd), a grouped convolution (no s4
    one), a depthwise convolution of 3 channels (CMSIS-NN's generic s4 kernel misreads odd
    counts), a linear layer of 7 inputs; the 1x1 convolution of 6 channels between has one."""

    input_shape = (1, 3, 6, 6)

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Conv2d(3, 6, 3, padding=1)
        self.grouped = nn.Conv2d(6, 6, 3, padding=1, groups=2)
        self.depthwise = nn.Conv2d(3, 3, 3, padding=1, groups=3)
        self.squeeze = nn.Conv2d(6, 7, 1)
        self.head = nn.Linear(7, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.grouped(torch.relu(self.first(x))))
        z = torch.relu(self.depthwise(x))
        y = self.squeeze(y + torch.cat([z, z], dim=1))
        return self.head(y.mean(dim=(2, 3)))


S4 = {
    "conv": "arm_convolve_wrapper_s4",
    "1xN": "arm_convolve_s4",
    "depthwise": "arm_depthwise_conv_wrapper_s4",
    "fc": "arm_fully_connected_s4",
}
S8 = {
    "conv": "arm_convolve_wrapper_s8",
    "depthwise": "arm_depthwise_conv_wrapper_s8",
    "fc": "arm_fully_connected_s8",
}
S16 = {
    "conv": "arm_convolve_wrapper_s16",
    "depthwise": "arm_depthwise_conv_wrapper_s16",
    "fc": "arm_fully_connected_s16",
}
#: Packs' layers (first, depthwise, pointwise, 1xN, head) all int4, the head per tensor
PACKS_S4 = [S4["conv"], S4["depthwise"], S4["conv"], S4["1xN"], S4["fc"]]


def _int4(**options: object) -> QuantizationOptions:
    """``--weights int4`` and ``options``."""
    return QuantizationOptions(weights=Weights.INT4, **options)


#: (id, model, options, the layers' CMSIS-NN functions in order)
CASES = [
    ("int4-per-channel-linear", Packs, _int4(linear_weights=LinearWeights.PER_CHANNEL),
     [S4["conv"], S4["depthwise"], S4["conv"], S4["1xN"], S4["conv"]]),
    # the head's rows have like peaks: per channel would not halve its 4-bit rounding noise
    ("int4", Packs, _int4(), PACKS_S4),
    ("int4-per-tensor-linear", Packs, _int4(linear_weights=LinearWeights.PER_TENSOR), PACKS_S4),
    ("int8", Packs, QuantizationOptions(),
     [S8["conv"], S8["depthwise"], S8["conv"], S8["conv"], S8["fc"]]),
    ("int4-mse-ranges", Packs, _int4(int4_ranges=Int4Ranges.MSE), PACKS_S4),
    # --weights auto's choice: int4 only where named
    ("int4-layers-named", Packs, QuantizationOptions(int4_layers=("conv2d_1", "linear")),
     [S8["conv"], S4["depthwise"], S8["conv"], S8["conv"], S4["fc"]]),
    ("int16-activations-keep-int8-weights", Packs, _int4(activations=Activations.INT16),
     [S16["conv"], S16["depthwise"], S16["conv"], S16["conv"], S16["fc"]]),
    ("no-int4-case", KeepsInt8, _int4(),
     [S8["conv"], S8["conv"], S8["depthwise"], S4["conv"], S8["fc"]]),
]  # fmt: skip

WEIGHTED = ("conv", "linear")


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m33", "cortex-m0plus"])
@pytest.mark.parametrize(
    ("model", "options", "functions"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_weights_lower_and_verify(target: str, model, options, functions) -> None:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        module = model().eval()
        example = (torch.randn(*model.input_shape),)
    compiled, verification = check_dialect(
        module, example, target=Target.parse(target), options=options
    )
    assert verification.passed, verification.exceeding
    if Target.parse(target).isa is Isa.MVE:  # the generic kernel: docs/int4.md, defect 5
        functions = ["arm_depthwise_conv_s4" if f == S4["depthwise"] else f for f in functions]
    rows = [r for r in compiled.records if r.name.startswith(WEIGHTED)]
    assert [r.cmsis_function.split(" after ")[0] for r in rows] == functions
    # the constants hold packed weights (uint8) exactly where the row says s4
    calls = [
        n
        for n in compiled.lowered.graph.nodes
        if str(n.target).split(".")[1:2] in (["conv2d"], ["depthwise_conv2d"], ["linear"])
        and str(n.target).startswith("cortex_m_nn.")
    ]
    packed = [getattr(compiled.lowered, n.args[1].target).dtype == torch.uint8 for n in calls]
    assert packed == ["_s4" in f for f in functions]


def test_int4_halves_the_weights_it_packs() -> None:
    """Every weighted layer of Packs (linear per channel in both): the weight bytes the report
    counts (weights, bias, multipliers, shifts) drop by half the weights' own bytes."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        module = Packs().eval()
        example = (torch.randn(*Packs.input_shape),)
    bytes_ = {}
    for weights in Weights:
        options = QuantizationOptions(weights=weights, linear_weights=LinearWeights.PER_CHANNEL)
        compiled, _ = check_dialect(module, example, options=options)
        bytes_[weights] = sum(r.weight_bytes for r in compiled.records)
    layers = [module.first, module.depthwise, module.pointwise, module.row, module.head]
    weight_elements = sum(layer.weight.numel() for layer in layers)
    assert bytes_[Weights.INT8] - bytes_[Weights.INT4] == weight_elements // 2


def test_cli_weights_int4(capsys, tiny_model, tmp_path) -> None:  # noqa: F811
    """``--weights int4`` on the command line: verified, recorded in the report's options,
    each weighted row an _s4 function, and fewer weight bytes than the int8 compile."""
    totals = {}
    for weights in ("int8", "int4"):
        pte, document = tmp_path / f"{weights}.pte", tmp_path / f"{weights}.json"
        arguments = ["--weights", weights, "--verify", "-o", pte, "--report-json", document]
        result = run(capsys, f"{tiny_model}:make", *arguments)
        assert result.status == 0, result.err
        report = json.loads(document.read_text())
        assert report["calibration"]["options"]["weights"] == weights
        functions = [r["cmsis_function"] for r in report["operators"]]
        assert any("_s4" in f for f in functions) == (weights == "int4"), functions
        totals[weights] = report["totals"]["weight_bytes"]
    assert totals["int4"] < totals["int8"]
