"""Operators cortex_m_nn cannot lower: the rewrite advice, the MACs they leave in fp32, and
the one-line error naming them (the CLI's side is in test_cli.py)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
import torch

from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.core.rewrites import GENERIC, GENERIC_KINDS, REWRITES, rewrite_for
from cortex_m_nn.core.target import Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.lower.macs import fp32_macs
from cortex_m_nn.lower.records import NOT_QUANTIZED
from cortex_m_nn.pipeline import compile_model, unsupported_message

from .models import recurrent

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "cortex_m_nn"
#: where refusals are raised: the lowering, and the functional form before quantization
RAISING = (PACKAGE / "lower", PACKAGE / "frontend")
MODELS = Path(__file__).with_name("models.py")

# -- MACs left in fp32, by hand -----------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "args", "output", "weights", "expected"),
    [
        # 8 outputs × 8×8 positions, each summing 8/2 input channels × 3×3
        ("aten.conv2d", [(1, 8, 8, 8), (8, 4, 3, 3), (8,)], (1, 8, 8, 8), [], 8 * 64 * 4 * 9),
        # 2 batches × 5 channels × 8 positions × 3 channels × 3 taps
        ("aten.conv1d.default", [(2, 3, 10), (5, 3, 3)], (2, 5, 8), [], 720),
        # 2 channels × 2×6×6 positions × 27 taps
        ("aten.conv3d", [(1, 1, 4, 8, 8), (2, 1, 3, 3, 3)], (1, 2, 2, 6, 6), [], 3888),
        # each of 4×3×3 inputs feeds 2 outputs × 2×2 taps
        ("aten.conv_transpose2d.input", [(1, 4, 3, 3), (4, 2, 2, 2)], (1, 2, 6, 6), [], 288),
        # 2×7 rows × 5 outputs, 6 products each
        ("aten.linear", [(2, 7, 6), (5, 6), (5,)], (2, 7, 5), [], 420),
        ("aten.matmul", [(3, 4, 5), (3, 5, 2)], (3, 4, 2), [], 120),
        ("aten.addmm", [(2,), (4, 5), (5, 2)], (4, 2), [], 40),
        # 144 elements × (sum of squares + scale + affine weight)
        ("aten.layer_norm", [(1, 4, 6, 6), None, (6,), (6,)], (1, 4, 6, 6), [], 432),
        ("aten.layer_norm", [(1, 4, 6, 6), None, None, None], (1, 4, 6, 6), [], 288),
        ("aten.group_norm", [(2, 8, 4, 4), None, (8,), (8,)], (2, 8, 4, 4), [], 768),
        ("aten._native_batch_norm_legit_no_training", [(1, 8, 4, 4)], None, [], 128),
        # 7 steps × (4·5×6 input weights + 4·5×5 recurrent weights); biases are no MACs
        ("aten.lstm.input", [(1, 7, 6)], None, [(20, 6), (20, 5), (20,), (20,)], 1540),
        # 7 steps × 2 sequences × (3·5×6 + 3·5×5)
        ("aten.gru.input", [(7, 2, 6)], None, [(15, 6), (15, 5)], 2310),
        ("aten.add.Tensor", [(1, 8), (1, 8)], (1, 8), [], 0),
        ("aten.layer_norm", [None], None, [], 0),  # no shape recorded: nothing counted
    ],
)
def test_fp32_macs_by_hand(op, args, output, weights, expected: int) -> None:
    assert fp32_macs(op, args, output, weights) == expected


def test_transposed_convolution_flag() -> None:
    args = [(1, 4, 3, 3), (4, 2, 2, 2)]
    assert fp32_macs("aten.convolution", args, (1, 2, 6, 6), transposed=True) == 288
    assert fp32_macs("aten.convolution", args, (1, 4, 2, 2)) == 16 * 2 * 4


# -- the rewrite table --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "kind", "words"),
    [
        ("aten.conv_transpose2d", Refusal.GROUPED_TRANSPOSED_CONV, ["groups=1", "block-diagonal"]),
        ("aten.layer_norm", Refusal.NOT_QUANTIZED, ["BatchNorm"]),
        ("aten.softmax.int", Refusal.SOFTMAX_DIM, ["transpose(dim, 1)"]),
        ("aten.div.Tensor", Refusal.NOT_QUANTIZED, ["1 / c"]),
        ("aten.max_pool2d", Refusal.POOL_DILATION, ["dilation=1"]),
        ("aten.lstm.input", Refusal.NOT_QUANTIZED, ["two nn.LSTM", "proj_size=0"]),
        ("aten.gru.input", Refusal.NOT_QUANTIZED, ["two nn.GRU", "eval mode"]),
        ("aten.rnn_tanh.input", Refusal.NOT_QUANTIZED, ["no plain RNN", "nn.GRU"]),
        ("aten.lstm.input", Refusal.LSTM_STATE, ["initial state"]),
        ("aten.conv3d", Refusal.NOT_QUANTIZED, ["conv2d"]),
        ("aten.elu", Refusal.TENSOR_ARGUMENTS, ["number"]),
        ("aten.leaky_relu_", Refusal.NOT_QUANTIZED, ["table"]),
        # the kind says more than the op: the input is the problem
        ("aten.conv2d", Refusal.INPUT_NOT_QUANTIZED, ["earlier op"]),
        ("aten.softmax.int", Refusal.ACTIVATION_AFTER, ["relu/clamp"]),
        # an op's own advice for one kind only; another kind of the same op falls through
        ("aten.matmul", Refusal.MATMUL_BATCH_BROADCAST, ["broadcastable"]),
        ("aten.conv1d", Refusal.STRING_PADDING, ["1 x k kernel"]),
    ],
)
def test_rewrite_for(op: str, kind: Refusal, words: list[str]) -> None:
    advice = rewrite_for(op, kind)
    assert all(word in advice for word in words), advice


def test_an_op_no_entry_knows_gets_the_generic_advice() -> None:
    assert rewrite_for("aten.fft_rfft", Refusal.NOT_QUANTIZED) == GENERIC
    assert rewrite_for("aten.matmul", Refusal.MATMUL_INNER_DIMENSION) == GENERIC
    assert "Operators lowered today" in GENERIC


def test_refusals_keep_their_message_and_carry_their_kind() -> None:
    refusal = LoweringRefused(Refusal.GROUPED_TRANSPOSED_CONV, "grouped transposed convolution …")
    assert str(refusal) == "grouped transposed convolution …"
    assert refusal.kind is Refusal.GROUPED_TRANSPOSED_CONV


def test_rewrites_are_one_line_each() -> None:
    assert all("\n" not in r.advice and r.advice == r.advice.strip() for r in REWRITES)


@pytest.mark.parametrize("name", sorted({op for r in REWRITES for op in r.ops}))
def test_rewrite_ops_are_aten_ops(name: str) -> None:
    assert hasattr(torch.ops.aten, name), f"aten.{name} does not exist: fix REWRITES"


def _kinds_raised() -> set[Refusal]:
    """The ``Refusal`` members the lowering's code names (``Refusal.X`` or an alias's ``.X``)
    outside the enum's own module: the kinds it can raise."""
    named = set()
    for path in sorted(p for folder in RAISING for p in folder.rglob("*.py")):
        if path.name == "refusals.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in Refusal.__members__:
                named.add(Refusal[node.attr])
    return named


@pytest.mark.parametrize("kind", list(Refusal), ids=lambda kind: kind.name)
def test_every_kind_has_advice_or_is_deliberately_generic(kind: Refusal) -> None:
    advised = {k for r in REWRITES for k in r.kinds}
    assert (kind in advised) != (kind in GENERIC_KINDS), (
        f"{kind.name}: give it advice in REWRITES or list it in GENERIC_KINDS (not both)"
    )


@pytest.mark.parametrize("kind", list(Refusal), ids=lambda kind: kind.name)
def test_every_kind_is_one_the_lowering_gives(kind: Refusal) -> None:
    """A kind no code raises is dead, and advice keyed by it is never shown."""
    assert kind in _kinds_raised(), f"{kind.name} is raised nowhere in lower/ or frontend/"


# -- a recurrent layer with --allow-fallback ----------------------------------------------


@pytest.fixture(scope="module")
def rnn():
    module, inputs = recurrent()
    return compile_model(
        ModelSource("recurrent", module, inputs),
        Target.parse("cortex-m55"),
        synthetic(inputs, 4),
        allow_fallback=True,
        progress=False,
    )


def _line_of(text: str) -> int:
    lines = MODELS.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_rnn_is_the_one_fallback_with_its_macs(rnn) -> None:
    (fallback,) = [r for r in rnn.records if not r.lowered]
    # The RNN's zero initial state is a constant, not an operator; its getitem no op either.
    assert fallback.source_op == "aten.rnn_tanh.input"
    assert fallback.fallback_reason == NOT_QUANTIZED
    assert fallback.refusal is Refusal.NOT_QUANTIZED
    # 7 time steps × (5 hidden × 6 inputs + 5 × 5 recurrent)
    assert fallback.macs == 7 * (5 * 6 + 5 * 5) == 385
    relative = os.path.relpath(MODELS) if MODELS.is_relative_to(Path.cwd()) else str(MODELS)
    assert fallback.source_line == f"{relative}:{_line_of('self.rnn(y)')}"
    assert rnn.memory.conflicts() == []


def test_rnn_error_names_it_where_and_what_to_do(rnn) -> None:
    message = unsupported_message(rnn.stages.lowering.fallbacks)
    assert "\n" not in message
    assert message.startswith("aten.rnn_tanh.input at ")
    assert f"models.py:{_line_of('self.rnn(y)')} in rnn (RNN)" in message
    assert "no plain RNN" in message and "--allow-fallback" in message
