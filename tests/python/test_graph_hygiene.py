"""No requantization through float between two lowered operators.

A lowered program converts between float and int8 only at its boundary: every
``cortex_m_nn::quantize`` reads a graph input and every ``cortex_m_nn::dequantize`` writes a
graph output. A ``dequantize → quantize`` pair between two lowered operators (a float round
trip, possibly through float ops) would be a hidden fallback; it is looked for in the lowered
graph and, independently, in the serialised ``.pte``'s instruction list.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from executorch.exir._serialize._program import deserialize_pte_binary
from torch import nn
from torch.fx import GraphModule, Node

from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.frontend.models import ds_cnn

from . import activation_models as act
from .models import ConvOutput, SharedConv, conv_stack, pools, seeded, with_rms_norm

QUANTIZE = torch.ops.cortex_m_nn.quantize.default
DEQUANTIZE = torch.ops.cortex_m_nn.dequantize.default


def float_round_trips(graph_module: GraphModule) -> list[tuple[str, str]]:
    """(dequantize, quantize) node pairs where the quantize's input derives from the
    dequantize's float output, directly or through float operators."""
    pairs = []
    for quantize in graph_module.graph.nodes:
        if quantize.target is not QUANTIZE:
            continue
        stack, seen = [quantize.args[0]], set()
        while stack:
            node = stack.pop()
            if not isinstance(node, Node) or node in seen:
                continue
            seen.add(node)
            if node.target is DEQUANTIZE:
                pairs.append((node.name, quantize.name))
            elif node.op == "call_function":
                stack.extend(node.all_input_nodes)
    return pairs


def boundary_violations(graph_module: GraphModule) -> list[str]:
    """Conversions that are not at the graph boundary."""
    found = []
    for node in graph_module.graph.nodes:
        if node.target is QUANTIZE and node.args[0].op != "placeholder":
            found.append(f"{node.name} quantizes {node.args[0].name}, not a graph input")
        if node.target is DEQUANTIZE and any(user.op != "output" for user in node.users):
            found.append(f"{node.name} feeds {[u.name for u in node.users]}, not only the output")
    return found


def pte_violations(pte: bytes) -> list[str]:
    """The same rule on the serialised program: quantize.out reads a plan input, dequantize.out
    writes a plan output, and there is one of each per float input/output."""
    program = deserialize_pte_binary(pte).program
    plan = next(p for p in program.execution_plan if p.name == "forward")
    names = [f"{op.name}.{op.overload}" for op in plan.operators]
    found, quantizes, dequantizes = [], 0, 0
    for chain in plan.chains:
        for instruction in chain.instructions:
            call = instruction.instr_args
            if not hasattr(call, "op_index"):
                continue
            name = names[call.op_index]
            if name == "cortex_m_nn::quantize.out":
                quantizes += 1
                if call.args[0] not in plan.inputs:
                    found.append(f"quantize.out reads value {call.args[0]}, not a plan input")
            elif name == "cortex_m_nn::dequantize.out":
                dequantizes += 1
                if call.args[-1] not in plan.outputs:
                    found.append(f"dequantize.out writes value {call.args[-1]}, not a plan output")
            elif not name.startswith("cortex_m_nn::"):
                found.append(f"{name} is not a cortex_m_nn operator")
    if (quantizes, dequantizes) != (len(plan.inputs), len(plan.outputs)):
        found.append(
            f"{quantizes} quantize / {dequantizes} dequantize for "
            f"{len(plan.inputs)} inputs / {len(plan.outputs)} outputs"
        )
    return found


def two_inputs() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    module, (x,) = seeded(SharedConv, 1, 3, 4, 4)
    return module, (x, 3 * x.flip(-1))


MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]] = {
    "ds_cnn": ds_cnn,
    "conv_stack": conv_stack,
    "pools": pools,
    "shared_conv": two_inputs,
    "conv_output": lambda: seeded(ConvOutput, 1, 3, 6, 6),
    "every_activation": lambda: act.seeded(act.EveryActivation(), 1, 3, 12, 12),
    "input_relu": lambda: act.seeded(act.InputRelu(), 1, 3, 8, 8),
    "residual_relu6": lambda: act.seeded(act.ResidualRelu6(), 1, 3, 6, 6),
    "clamp_after_pool_and_view": lambda: act.seeded(act.ClampAfterPoolAndView(), 1, 3, 8, 8),
    "tanh_then_clamp": lambda: act.seeded(act.TanhThenClamp(), 1, 3, 8, 8),
    "chained_tables": lambda: act.seeded(act.ChainedTables(), 1, 3, 6, 6),
    "gelu_mlp": lambda: act.seeded(act.GeluMlp(), 2, 5, 8),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_no_float_round_trip_between_lowered_operators(name: str) -> None:
    compiled, _ = check_dialect(*MODELS[name]())
    assert float_round_trips(compiled.lowered) == []
    assert boundary_violations(compiled.lowered) == []
    assert pte_violations(compiled.pte) == []


def test_a_float_fallback_is_found() -> None:
    with_fallback, _ = check_dialect(*with_rms_norm(), allow_fallback=True)
    # conv → dequantize → rms_norm → output: a float tail, not a round trip
    assert float_round_trips(with_fallback.lowered) == []
    (problem,) = boundary_violations(with_fallback.lowered)
    assert "rms_norm" in problem
    problems = pte_violations(with_fallback.pte)
    assert any("aten::" in p for p in problems)
    assert any("dequantize.out writes" in p for p in problems)


def test_an_inserted_round_trip_is_found() -> None:
    compiled, _ = check_dialect(*MODELS["input_relu"]())
    graph = compiled.lowered.graph
    lut = next(n for n in graph.nodes if n.target is torch.ops.cortex_m_nn.lut.default)
    with graph.inserting_after(lut):
        dequantize = graph.call_function(DEQUANTIZE, (lut, 0.1, 0, []))
    with graph.inserting_after(dequantize):
        quantize = graph.call_function(QUANTIZE, (dequantize, 0.1, 0, []))
    lut.replace_all_uses_with(quantize, delete_user_cb=lambda user: user is not dequantize)
    assert float_round_trips(compiled.lowered) == [(dequantize.name, quantize.name)]
    assert len(boundary_violations(compiled.lowered)) == 2
