"""int16 activations (``--activations int16``): the boundary and requantize references against
independent integer computations, and a case table compiled end to end (which ops compute in
int16, where the precision changes, ``verify`` against the PT2E graph)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.integers import RANGES, scalar_type
from cortex_m_nn.core.options import Activations, IoType, LinearWeights, QuantizationOptions
from cortex_m_nn.core.target import Target
from cortex_m_nn.ops.library import FUNCTIONALS

from .ops.independent import ref_requantize

DTYPES = [torch.int8, torch.int16]


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=16),
    scale=st.floats(1e-5, 1.0),
)
def test_int16_quantize_rounds_half_to_even_and_saturates(
    values: list[float], scale: float
) -> None:
    """q = clamp(round_half_even(float32(x) * float32(1/scale)), -32768, 32767), by numpy."""
    x = torch.tensor(values, dtype=torch.float32)
    got = FUNCTIONALS["quantize"](Rounding.DOUBLE, x, scale, 0, [], scalar_type(torch.int16))
    inverse = np.float32(1.0 / scale)
    want = [min(max(int(np.rint(np.float32(v) * inverse)), -32768), 32767) for v in values]
    assert got.dtype == torch.int16 and got.tolist() == want


@settings(max_examples=300, deadline=None)
@given(
    source=st.sampled_from(DTYPES),
    target=st.sampled_from(DTYPES),
    single=st.booleans(),
    multiplier=st.integers(2**30, 2**31 - 1),
    shift=st.integers(-31, 14),
    data=st.data(),
)
def test_requantize_is_arm_nn_requantize_per_element(
    source: torch.dtype,
    target: torch.dtype,
    single: bool,
    multiplier: int,
    shift: int,
    data: st.DataObject,
) -> None:
    low, high = RANGES[source]
    xs = data.draw(st.lists(st.integers(low, high), min_size=1, max_size=12))
    in_offset = data.draw(st.integers(-127, 128)) if source is torch.int8 else 0
    out_offset = data.draw(st.integers(-128, 127)) if target is torch.int8 else 0
    if (255 if source is torch.int8 else 32768) << max(shift, 0) >= 2**31:
        shift = 0
    rounding = Rounding.SINGLE if single else Rounding.DOUBLE
    got = FUNCTIONALS["requantize"](
        rounding,
        torch.tensor(xs, dtype=source),
        in_offset,
        out_offset,
        multiplier,
        shift,
        scalar_type(target),
    )
    out_low, out_high = RANGES[target]
    want = [
        min(
            max(ref_requantize(x + in_offset, multiplier, shift, single) + out_offset, out_low),
            out_high,
        )
        for x in xs
    ]
    assert got.dtype == target and got.tolist() == want


@pytest.mark.parametrize(
    ("source", "target", "in_offset", "out_offset", "shift"),
    [
        (torch.int16, torch.int8, 3, 0, 0),  # int16 has zero point 0
        (torch.int8, torch.int16, 0, 5, 0),
        (torch.int8, torch.int8, 200, 0, 0),  # not an int8 zero point
        (torch.int16, torch.int8, 0, 0, 16),  # 32768 << 16 leaves int32
        (torch.int8, torch.int16, 0, 0, 24),  # 255 << 24 too
    ],
)
def test_requantize_refuses_what_it_cannot_compute(source, target, in_offset, out_offset, shift):
    x = torch.zeros(4, dtype=source)
    with pytest.raises(ValueError):
        FUNCTIONALS["requantize"](
            Rounding.DOUBLE, x, in_offset, out_offset, 2**30, shift, scalar_type(target)
        )


class Mlp(nn.Module):
    """Three linear layers; ``spread`` scales the middle layer's rows 1/spread..1, ``middle``
    is the function after it (a ReLU fuses; a sigmoid is an int16 table; the square root of
    a ReLU an int8 one: sqrt's int16 table would err too much near 0)."""

    def __init__(self, spread: float, middle: str = "relu") -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(20, 16), nn.Linear(16, 12), nn.Linear(12, 6)
        functions = {"relu": torch.relu, "sigmoid": torch.sigmoid, "sqrt": self._sqrt_relu}
        self.middle = functions[middle]
        with torch.no_grad():
            for layer in (self.a, self.c):  # every row's peak the same: per tensor fits
                layer.weight.div_(layer.weight.abs().amax(dim=1, keepdim=True) * 4)
            self.b.weight.mul_(torch.logspace(-torch.log10(torch.tensor(spread)), 0, 12)[:, None])

    @staticmethod
    def _sqrt_relu(x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(torch.relu(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(self.middle(self.b(torch.relu(self.a(x)))))


S16, S8, S8_CHANNEL = (
    "arm_fully_connected_s16",
    "arm_fully_connected_s8",
    "arm_fully_connected_per_channel_s8",
)
CONV16 = "arm_convolve_wrapper_s16"  # per-channel int16 linear, a 1x1 convolution
OUT8, OUT16 = "(boundary, int8 → float)", "(boundary, int16 → float)"

#: (id, spread, middle function, activations, linear weights, each row of the report after
#: the input quantize: its CMSIS-NN function, or the boundary's description)
CASES = [
    ("int8", 1.0, "relu", Activations.INT8, LinearWeights.AUTO, [S8, S8, S8, OUT8]),
    (
        "int8-spread",
        100.0,
        "relu",
        Activations.INT8,
        LinearWeights.AUTO,
        [S8, S8_CHANNEL, S8, OUT8],
    ),
    ("int16", 1.0, "relu", Activations.INT16, LinearWeights.AUTO, [S16, S16, S16, OUT16]),
    (
        "int16-per-channel",
        100.0,
        "relu",
        Activations.INT16,
        LinearWeights.AUTO,
        [S16, CONV16, S16, OUT16],
    ),
    (
        "int16-per-tensor",
        100.0,
        "relu",
        Activations.INT16,
        LinearWeights.PER_TENSOR,
        [S16, S16, S16, OUT16],
    ),
    # the sigmoid is an int16 table: no requantization
    (
        "int16-table",
        1.0,
        "sigmoid",
        Activations.INT16,
        LinearWeights.AUTO,
        [S16, S16, "(interpolated table, 513 knots)", S16, OUT16],
    ),
    # sqrt is an int8 table only: a requantization on each side
    (
        "mixed",
        1.0,
        "sqrt",
        Activations.INT16,
        LinearWeights.AUTO,
        [S16, S16, "(int16 → int8)", "(256-entry table lookup)", "(int8 → int16)", S16, OUT16],
    ),
]


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m33", "cortex-m0plus"])
@pytest.mark.parametrize(
    ("spread", "middle", "activations", "weights", "rows"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_activations_lower_and_verify(
    target: str,
    spread: float,
    middle: str,
    activations: Activations,
    weights: LinearWeights,
    rows: list[str],
) -> None:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        module = Mlp(spread, middle).eval()
        example = (torch.randn(2, 20),)
    options = QuantizationOptions(activations=activations, linear_weights=weights, equalize=False)
    compiled, verification = check_dialect(
        module, example, target=Target.parse(target), options=options
    )
    assert verification.passed
    first, *rest = compiled.records
    bits = "int16" if rows[0] == S16 else "int8"
    assert first.cmsis_function == f"(boundary, float → {bits})"
    assert [r.cmsis_function for r in rest] == rows
    int16 = [
        n
        for n in compiled.lowered.graph.nodes
        if str(n.target) == "cortex_m_nn.linear.default"
        and getattr(compiled.lowered, n.args[1].target).dtype == torch.int8
        and n.args[2] is not None
        and getattr(compiled.lowered, n.args[2].target).dtype == torch.int64
    ]
    assert len(int16) == rows.count(S16)  # each int16 layer carries its int64 bias


def test_int16_boundaries_refuse_int8_io() -> None:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        module = Mlp(1.0).eval()
    options = QuantizationOptions(activations=Activations.INT16, equalize=False)
    from cortex_m_nn.core.abi import ProgramAbi
    from cortex_m_nn.frontend.calibration import synthetic
    from cortex_m_nn.frontend.model_source import ModelSource
    from cortex_m_nn.pipeline import compile_model

    example = (torch.randn(2, 20),)
    source = ModelSource("Mlp", module, example)
    with pytest.raises(CompileError, match="is int16 .* use --io float"):
        compile_model(
            source,
            ProgramAbi.for_target(Target.parse("cortex-m55"), Rounding.DOUBLE),
            synthetic(example, count=4),
            progress=False,
            serialise=False,
            options=options,
            io=IoType.INT8,
        )


class SmallCnn(nn.Module):
    """A pad before a convolution, a max pool, a depthwise convolution, a global average pool,
    a flatten and a linear layer: every op has an int16 case."""

    def __init__(self) -> None:
        super().__init__()
        self.pad = nn.ZeroPad2d((0, 1, 0, 1))
        self.conv = nn.Conv2d(1, 4, 3, stride=2)
        self.pool = nn.MaxPool2d(2)
        self.depthwise = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pool(torch.relu(self.conv(self.pad(x))))
        y = torch.relu(self.depthwise(y)).mean(dim=(2, 3))
        return self.head(y.flatten(1))


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m33", "cortex-m0plus"])
def test_a_cnn_is_int16_throughout(target: str) -> None:
    """The pad folds into the int16 convolution; pools and views follow their int16 input: no
    requantization anywhere, and ``verify`` holds."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(4)
        module = SmallCnn().eval()
        example = (torch.randn(1, 1, 12, 10),)
    options = QuantizationOptions(
        activations=Activations.INT16, linear_weights=LinearWeights.PER_TENSOR
    )
    compiled, verification = check_dialect(
        module, example, target=Target.parse(target), options=options
    )
    assert verification.passed
    functions = [r.cmsis_function for r in compiled.records if r.kernel.startswith("cortex_m_nn")]
    assert functions == [
        "(boundary, float → int16)",
        "arm_convolve_wrapper_s16",
        "arm_max_pool_s16",
        "arm_depthwise_conv_wrapper_s16",
        "arm_avgpool_s16",
        "arm_fully_connected_s16",
        "(boundary, int16 → float)",
    ]


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(24, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc(x) * 4, dim=-1)


def test_int16_softmax_is_allowed_its_tables_bound() -> None:
    """arm_softmax_s16 approximates (interpolated tables): verify allows it 4 LSB per entry of
    the row plus 4 (the bound tests/python/ops/test_softmax.py checks against float softmax),
    every other operator 1, and says so in the report."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(6)
        module = Classifier().eval()
        example = (torch.randn(3, 24),)
    options = QuantizationOptions(
        activations=Activations.INT16, linear_weights=LinearWeights.PER_TENSOR
    )
    compiled, verification = check_dialect(module, example, options=options)
    (softmax,) = [r for r in compiled.records if r.cmsis_function == "arm_softmax_s16"]
    assert verification.allowed == {softmax.output_node: 4 * 16 + 4}
    assert verification.passed and not verification.exceeding
    others = {n: d for n, d in verification.per_node.items() if n != softmax.output_node}
    assert max(others.values()) <= 1
    from cortex_m_nn.report import compile_report as report

    line = report.verify_line(report.verify_dict(verification))
    assert f"{softmax.output_node} ≤ 68" in line


class Attention(nn.Module):
    """One attention head: q @ k^T (read through the transpose), a softmax, @ v (v transposed
    by a kernel), a product with a constant matrix, a sigmoid gate: every op int16."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
        self.mix = nn.Parameter(torch.randn(8, 6) / 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.q(x) @ self.k(x).transpose(-2, -1)
        attended = torch.softmax(scores, dim=-1) @ self.v(x)
        return torch.sigmoid(attended @ self.mix)


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m33", "cortex-m0plus"])
def test_attention_is_int16_throughout(target: str) -> None:
    """arm_batch_matmul_s16 for both activation products and the constant one, the sigmoid an
    interpolated int16 table: no requantization, and ``verify`` holds within each bound."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        module = Attention().eval()
        example = (torch.randn(2, 5, 8),)
    options = QuantizationOptions(
        activations=Activations.INT16, linear_weights=LinearWeights.PER_TENSOR
    )
    compiled, verification = check_dialect(
        module, example, target=Target.parse(target), options=options
    )
    assert verification.passed and not verification.exceeding
    functions = [r.cmsis_function for r in compiled.records]
    assert functions.count("arm_fully_connected_s16") == 3
    products = [f for f in functions if f.startswith("arm_batch_matmul")]
    assert products == [
        "arm_batch_matmul_s16",
        "arm_batch_matmul_s16 after (int16 transpose loop)",
        "arm_batch_matmul_s16",
    ]
    assert "arm_softmax_s16" in functions
    assert any(f.startswith("(interpolated table") for f in functions)
    assert not any("→ int8" in f or "int8 →" in f for f in functions)
    (table,) = [r for r in compiled.records if r.kernel == "cortex_m_nn::lut"]
    assert 1 <= verification.allowed[table.output_node] <= 16
