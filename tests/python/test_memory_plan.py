"""The memory plan in the report: its sums match the .pte, it is valid, it is bounded below,
and the constants and runtime overhead are counted from the program itself."""

from __future__ import annotations

import math

import pytest
import torch
from executorch.exir._serialize._program import deserialize_pte_binary
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.tensor import TensorSpec
from hypothesis import given, settings
from hypothesis import strategies as st

from cortex_m_nn.core.target import Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.pipeline import compile_model
from cortex_m_nn.plan import placement
from cortex_m_nn.plan.memory_plan import ALIGNMENT, CONSTANT_KINDS, MemoryPlan, PlannedTensor
from cortex_m_nn.report import compile_report as report
from cortex_m_nn.report.plot import render
from cortex_m_nn.serialize.pte import load_temp_bytes, runtime_overhead

from .models import conv_stack, pools, split, with_rms_norm


def compile_source(name: str, factory, allow_fallback: bool = False):
    module, inputs = factory()
    source = ModelSource(name, module, inputs)
    return compile_model(
        source,
        Target.parse("cortex-m55"),
        synthetic(inputs, 4),
        allow_fallback=allow_fallback,
        progress=False,
    )


@pytest.fixture(scope="module")
def stack(quantized_models):
    """conv_stack for cortex-m55; exported and calibrated once for the session."""
    return quantized_models.get("conv_stack", conv_stack).lower("cortex-m55")


@pytest.fixture(scope="module")
def fallback():
    return compile_source("with_rms_norm", with_rms_norm, allow_fallback=True)


def pte_program(pte: bytes):
    return deserialize_pte_binary(pte).program


def test_json_plan_sums_match_the_pte(stack) -> None:
    memory = report.as_dict(stack, None)["memory"]
    program = pte_program(stack.pte)
    forward = next(p for p in program.execution_plan if p.name == "forward")
    assert memory["arena_bytes"] == sum(forward.non_const_buffer_sizes) > 0
    # Each constant buffer once, at its tensor's size (the file pads them to alignment).
    element = {1: 1, 3: 4, 6: 4}  # int8, int32, float32
    buffers = {
        v.val.data_buffer_idx: element[int(v.val.scalar_type)] * math.prod(v.val.sizes)
        for v in forward.values
        if type(v.val).__name__ == "Tensor" and v.val.data_buffer_idx > 0
    }
    stored = sum(buffers.values())
    assert stored <= sum(len(buffer.storage) for buffer in program.constant_buffer)
    assert memory["constants"]["total"] == memory["pte_constant_bytes"] == stored > 0
    assert sum(memory["constants"][k] for k in CONSTANT_KINDS) == stored
    # Every planned tensor of the program appears in the plan, at its offset.
    planned = sorted(
        v.val.allocation_info.memory_offset_low
        for v in forward.values
        if type(v.val).__name__ == "Tensor" and v.val.allocation_info is not None
    )
    assert sorted({t["offset"] for t in memory["tensors"]}) == sorted(set(planned))


def test_constants_by_kind(stack) -> None:
    constants = stack.memory.constants
    # int8 weights of the float model's layers, one byte per element.
    module, _ = conv_stack()
    layers = [m for m in module.modules() if isinstance(m, torch.nn.Conv2d | torch.nn.Linear)]
    assert constants["weights"] == sum(m.weight.numel() for m in layers) == 568
    # int32 biases; identical byte strings are stored once, so at most one per channel.
    assert 0 < constants["biases"] <= 4 * sum(m.bias.numel() for m in layers)
    # Per-channel multipliers and shifts of the three convolutions (the linear layer's are
    # scalars in the instruction), each an int32 per output channel, deduplicated.
    assert 0 < constants["requantization"] <= 2 * 4 * (8 + 16 + 16)
    # MVE linear: one int32 kernel sum per output feature, computed at compile time.
    assert constants["kernel_sums"] == 4 * 5 and constants["other"] == 0


def test_plan_is_valid_and_bounded(stack, fallback) -> None:
    for compiled in (stack, fallback):
        plan = compiled.memory
        assert plan.conflicts() == []
        assert plan.extent_bytes <= plan.arena_bytes
        assert 0 < plan.lower_bound_bytes <= plan.arena_bytes
        kinds = {t.kind for t in plan.tensors}
        assert {"input", "activation", "output"} <= kinds
        assert all(t.first <= t.last < len(plan.operators) for t in plan.tensors)


def test_every_scratch_operator_has_a_planned_scratch_buffer(stack) -> None:
    scratch_ops = [
        n
        for n in stack.lowered.graph.nodes
        if n.op == "call_function"
        and hasattr(n.target, "_schema")
        and len(n.target._schema.returns) == 2
    ]
    scratch = [t for t in stack.memory.tensors if t.kind == "scratch"]
    assert len(scratch) == len(scratch_ops) > 0
    assert [t.nbytes for t in scratch] == [n.args[-1] for n in scratch_ops]
    # A scratch buffer lives for its one kernel call only.
    assert all(t.first == t.last for t in scratch)


def test_fallback_operators_are_planned_too(fallback) -> None:
    assert any(name.startswith("aten::") for name in fallback.memory.operators)
    assert fallback.memory.conflicts() == []


def test_float_op_with_two_outputs_is_planned() -> None:
    """A fallback with several outputs (split) writes one ``alloc`` of several tensors: each
    is planned on its own, and none overlaps another tensor live with it."""
    compiled = compile_source("split", split, allow_fallback=True)
    plan = compiled.memory
    assert plan.conflicts() == []
    parts = [t for t in plan.tensors if t.producer.startswith("aten::split")]
    assert len(parts) == 2, plan.tensors
    assert parts[1].kind == "output"  # b is returned as it is
    # [1, 4, 4, 4] float32 each: half of the conv's 8 channels
    assert [t.nbytes for t in parts] == [4 * 4 * 4 * 4] * 2
    (call,) = [i for i, name in enumerate(plan.operators) if "split" in name]
    assert all(t.first == call for t in parts)
    assert parts[0].offset != parts[1].offset


def tensor(name: str, nbytes: int, offset: int, first: int, last: int, kind="activation"):
    return PlannedTensor(name, kind, nbytes, offset, first, last)


def test_lower_bound_and_conflicts_by_hand() -> None:
    tensors = [
        tensor("a", 100, 0, 0, 1, "input"),  # 112 aligned
        tensor("b", 32, 112, 1, 2),
        tensor("s", 20, 144, 1, 1, "scratch"),  # 32 aligned
        tensor("c", 64, 0, 2, 3, "output"),
    ]
    plan = MemoryPlan(["op0", "op1", "op2", "op3"], tensors, 176)
    # live: op0 a=112; op1 a+b+s = 112+32+32; op2 b+c = 32+64; op3 c = 64
    assert [plan.live_bytes(i) for i in range(4)] == [112, 176, 96, 64]
    assert plan.lower_bound_bytes == 176 and plan.peak_index == 1
    assert plan.largest_scratch_bytes == 20
    assert plan.conflicts() == []
    clash = MemoryPlan(plan.operators, [*tensors[:3], tensor("d", 8, 120, 2, 2)], 176)
    assert clash.conflicts() == [("b", "d")]
    assert ALIGNMENT == MemoryPlanningPass().alignment


@pytest.mark.parametrize(("lead", "shared"), [(16, 48), (-32, 64), (-96, 64), (200, 0)])
def test_overlapped_bytes_counts_what_a_lead_lets_an_output_share(lead: int, shared: int) -> None:
    """b (64 B) written over a (96 B) at op1, starting ``lead`` bytes below a's start or lower:
    16 below at best covers a's first 48 bytes; 32 or 96 above allows 32 above, a's bytes
    32-95 (all of b); 200 below, none. By hand, from the two intervals."""
    tensors = [tensor("a", 96, 0, 0, 1, "input"), tensor("b", 64, 96, 1, 2)]
    plan = MemoryPlan(["op0", "op1", "op2"], tensors, 160, leads={("b", "a"): lead})
    assert plan.overlapped_bytes(1) == 160 - shared
    assert [plan.overlapped_bytes(i) for i in (0, 2)] == [96, 64]


def test_planner_reaches_the_bound_where_greedy_does_not(stack) -> None:
    # ConvStack's residual branch: ExecuTorch's greedy plans 2,448 B for a 2,160 B bound;
    # placing each tensor at the lowest free offset reaches the bound.
    plan = stack.memory
    assert plan.planner == "best_offset"
    assert plan.arena_bytes == plan.lower_bound_bytes == 2160
    # naive gives every tensor its own bytes: the sum of all aligned sizes.
    assert plan.arena_bytes < sum(t.aligned_bytes for t in plan.tensors)
    assert report.as_dict(stack, None)["memory"]["planner"] == "best_offset"


def test_ties_keep_executorch_greedy(quantized_models, monkeypatch) -> None:
    # pools, a chain: best_offset alone packs it to the bound, and so does greedy — a tie,
    # which ExecuTorch's own planner (greedy, tried first) wins.
    pools_model = quantized_models.get("pools", pools)
    both = pools_model.lower("cortex-m55").memory
    monkeypatch.setattr(placement, "ALGORITHMS", (placement.best_offset,))
    alone = pools_model.lower("cortex-m55").memory
    assert alone.planner == "best_offset"
    assert alone.arena_bytes == alone.lower_bound_bytes == both.lower_bound_bytes
    assert both.planner == "greedy"
    assert both.arena_bytes == both.lower_bound_bytes


def test_text_report_shows_the_plan(stack) -> None:
    text = report.to_text(report.as_dict(stack, None))
    memory = stack.memory
    assert f"arena (RAM)          {memory.arena_bytes:>10,} B" in text
    assert f"layer-by-layer bound {memory.lower_bound_bytes:>10,} B" in text
    assert "runtime overhead" in text and "estimate" in text


def test_runtime_overhead_counts_the_program(stack) -> None:
    """Each part holds at least its structures (padding comes on top); tests/target checks the
    total equals what ExecuTorch's method allocator reports on every core."""
    overhead = runtime_overhead(stack.pte)
    program = pte_program(stack.pte)
    forward = next(p for p in program.execution_plan if p.name == "forward")
    assert 16 * len(forward.values) + len(forward.inputs) <= overhead.values
    assert overhead.values < 16 * len(forward.values) + len(forward.inputs) + 8
    tensors = [v.val for v in forward.values if type(v.val).__name__ == "Tensor"]
    assert overhead.tensors >= sum(32 + 4 * len(t.sizes) for t in tensors)
    calls = [i for c in forward.chains for i in c.instructions]
    # kernel pointer, argument span, argument pointers (the TensorMeta lists go to the
    # load-time temporary allocator, which holds the call with the most arguments)
    assert overhead.instructions >= sum(12 + 4 * len(i.instr_args.args) for i in calls)
    most = max(len(i.instr_args.args) for i in calls)
    assert load_temp_bytes(stack.pte) == 28 * most
    without = runtime_overhead(stack.pte, temp_bytes=0)  # no temporary allocator at all
    assert without.instructions >= sum(12 + 16 * len(i.instr_args.args) for i in calls)
    assert without.fixed >= 28 + 16 * len(forward.chains)
    assert overhead.fixed >= 16 * len(forward.chains)
    assert overhead.total == (
        overhead.values + overhead.tensors + overhead.lists + overhead.instructions + overhead.fixed
    )


def test_plot_is_an_image(stack) -> None:
    assert render(stack.memory, "conv_stack").startswith(b"\x89PNG\r\n\x1a\n")
    assert render(stack.memory, "conv_stack", "svg").lstrip().startswith(b"<?xml")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 300), st.integers(0, 12), st.integers(0, 5)),
        min_size=1,
        max_size=14,
    )
)
def test_best_offset_never_overlaps_live_tensors(tensors) -> None:
    specs = []
    for nbytes, start, length in tensors:
        spec = TensorSpec.from_tensor(torch.empty(nbytes, dtype=torch.int8))
        spec.lifetime = [start, start + length]
        specs.append(spec)
    result = placement.best_offset(ALIGNMENT, specs, object(), None)
    placed = [(result.spec_dict[s].mem_offset, s) for s in specs]
    for i, (offset_a, a) in enumerate(placed):
        assert offset_a % ALIGNMENT == 0
        for offset_b, b in placed[i + 1 :]:
            together = a.lifetime[0] <= b.lifetime[1] and b.lifetime[0] <= a.lifetime[1]
            shared = (
                offset_a < offset_b + b.allocated_memory
                and offset_b < offset_a + a.allocated_memory
            )
            assert not (together and shared)
    arena = result.bufsizes[1]
    live = max(
        sum(s.allocated_memory for s in specs if s.lifetime[0] <= t <= s.lifetime[1])
        for t in range(0, 18)
    )
    assert live <= arena <= sum(s.allocated_memory for s in specs)
    assert arena == max(result.spec_dict[s].mem_offset + s.allocated_memory for s in specs)
