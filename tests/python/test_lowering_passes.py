"""The lowering's passes one at a time: what each leaves for the next, and the read-through
decision the walk makes when a reader falls back."""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.fx import GraphModule

from cortex_m_nn.core.refusals import Refusal
from cortex_m_nn.core.target import DEFAULT_TARGET
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.hygiene import mark_removed
from cortex_m_nn.lower.passes import PASSES, Lowering, lower
from cortex_m_nn.lower.records import REMOVED, OpRecord
from cortex_m_nn.pipeline import quantize

READ_THROUGH = "read through (no kernel)"


class FiveDimensionalScores(nn.Module):
    """relu(q @ k^T) with a 5-D q and a 4-D k: the product reads k through its transpose, then
    falls back (CMSIS-NN multiplies 2-D to 4-D operands), so the transpose is lowered after
    all."""

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.relu(q @ k.transpose(-2, -1))


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    shapes = (1, 2, 2, 3, 4), (2, 2, 5, 4)
    return tuple(torch.randn(shape, generator=generator) for shape in shapes)


@functools.cache
def _converted() -> GraphModule:
    inputs = _inputs()
    source = ModelSource("scores5", FiveDimensionalScores(), inputs)
    return quantize(source, synthetic(inputs, 4), progress=False)[1]


def test_the_passes_in_order() -> None:
    assert [name for name, _ in PASSES] == [
        "find patterns",
        "find read-through producers",
        "lower by rule",
        "eliminate dead code",
        "mark removed records",
    ]


def test_each_pass_leaves_its_part() -> None:
    converted = _converted()
    state = Lowering(LoweringContext(converted, DEFAULT_TARGET))
    (find_patterns, find_read_through, walk, dead_code, removed) = (run for _, run in PASSES)
    find_patterns(state)
    ops = {op.target for op, _ in state.plan.patterns.values()}
    assert ops == {torch.ops.aten.matmul.default, torch.ops.aten.transpose.int}
    assert not state.plan.read_through and not list(state.context.graph.nodes)
    find_read_through(state)
    (producer,) = state.plan.read_through
    assert [n.target for n in state.plan.read_through[producer]] == [
        torch.ops.aten.transpose.int,
        producer.target,
    ]
    assert not list(state.context.graph.nodes)  # nothing built before the walk
    walk(state)
    built = len(state.context.graph.nodes)
    assert built and state.context.records
    kernels = {r.source_op: r.kernel for r in state.context.records}
    assert kernels["aten.transpose.int"] == "view (no kernel)"  # the reader fell back
    dead_code(state)
    assert len(state.context.graph.nodes) < built  # k's first quantize: the transpose's folds
    assert all(r.kernel != REMOVED for r in state.context.records)
    removed(state)
    assert [r.source_op for r in state.context.records if r.kernel == REMOVED] == ["quantize"]


def test_a_producer_read_through_is_lowered_when_its_reader_falls_back() -> None:
    converted = _converted()
    result = lower(converted, DEFAULT_TARGET)
    (fallback,) = result.fallbacks
    assert fallback.source_op == "aten.matmul"
    assert fallback.refusal is Refusal.OPERAND_RANK
    assert fallback.fallback_reason == "left operand of rank 5; CMSIS-NN takes 2-D to 4-D"
    (transpose,) = [r for r in result.records if r.source_op == "aten.transpose.int"]
    assert transpose.kernel == "view (no kernel)"  # folded into k's input quantize
    assert transpose.cmsis_function == "(folded into the input quantize)"
    assert READ_THROUGH not in {r.kernel for r in result.records}
    # lowered as the float product meets its inputs: after q's dequantize, before k^T's
    assert [(r.source_op, r.kernel) for r in result.records] == [
        ("quantize", "cortex_m_nn::quantize"),
        ("quantize", REMOVED),  # k's own: the transpose's quantize replaces it
        ("dequantize", "cortex_m_nn::dequantize"),
        ("aten.transpose.int", "view (no kernel)"),
        ("dequantize", "cortex_m_nn::dequantize"),
        ("quantize", "cortex_m_nn::quantize"),
        ("aten.matmul", None),
        ("dequantize", "cortex_m_nn::dequantize"),
    ]
    inputs = _inputs()
    (lowered,) = result.graph_module(*inputs)
    torch.testing.assert_close(lowered, converted(*inputs), rtol=0, atol=0)


def test_layout_caches_belong_to_one_lowering() -> None:
    first, second = (LoweringContext(None, DEFAULT_TARGET) for _ in range(2))
    assert first.origins == {} and first.relayouts == {}
    assert first.origins is not second.origins and first.relayouts is not second.relayouts


def test_rows_of_dead_lowered_nodes_are_marked_removed() -> None:
    records = [
        OpRecord("a", "aten.add", "cortex_m_nn::add", "arm_elementwise_add_s8", output_node="a"),
        OpRecord("b", "aten.mul", "cortex_m_nn::mul", "arm_elementwise_mul_s8", output_node="b"),
        OpRecord("c", "aten.view", "view (no kernel)", "(view)", output_node="c"),
        OpRecord("d", "aten.lstm", None, fallback_reason="not quantized"),
    ]
    mark_removed(records, alive={"a"})
    assert [(r.kernel, r.cmsis_function) for r in records] == [
        ("cortex_m_nn::add", "arm_elementwise_add_s8"),
        (REMOVED, "(a later operator reads its input)"),
        ("view (no kernel)", "(view)"),
        (None, None),
    ]
