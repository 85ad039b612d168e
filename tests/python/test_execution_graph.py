"""``execution_graph``: a fully lowered graph written straight in the execution dialect gives
ExecuTorch's ``torch.export`` → ``to_edge`` → ``to_executorch`` program byte for byte, with
the same execution graph (names included) and the same memory plan — byte for byte without
sharing equal constants, and as the same program with them shared (``shared_values``).

The case table covers what the direct path writes: convolutions with scratch buffers and
views (DS-CNN, on a core with MVE and one without: scratch sizes differ), views of views and
transposes (the transformer), a residual graph, several inputs and outputs, and int8 inputs
and outputs. A one-off check over every zoo model and coverage architecture, on cortex-m55 and
cortex-m0plus with float and int8 I/O (76 programs), found no difference either.
``tests/python/test_edge.py`` checks the re-traced path itself against ``to_edge``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from executorch.exir._serialize._program import deserialize_pte_binary
from tests.python.models import SharedConv, split
from tests.quantized_models import QuantizedModels
from tests.zoo import ZOO

from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.options import IoType
from cortex_m_nn.core.target import Target
from cortex_m_nn.ops.library import operator as cortex_m_nn_operator
from cortex_m_nn.pipeline import DIRECT, CompiledProgram, compile_quantized, metadata
from cortex_m_nn.plan.placement import memory_planning_pass
from cortex_m_nn.serialize import execution_graph
from cortex_m_nn.serialize.shared_values import share_values


def _two_inputs() -> tuple[torch.nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(3)
    return SharedConv().eval(), (torch.randn(1, 3, 6, 6), torch.randn(1, 3, 6, 6))


#: case → (model factory, io, cores)
CASES: dict[str, tuple[Callable[[], object], IoType, tuple[str, ...]]] = {
    "ds_cnn": (ZOO["ds_cnn"], IoType.FLOAT, ("cortex-m55", "cortex-m0plus")),
    "ds_cnn-int8-io": (ZOO["ds_cnn"], IoType.INT8, ("cortex-m55", "cortex-m0plus")),
    "transformer": (ZOO["transformer"], IoType.FLOAT, ("cortex-m55",)),
    "resnet8-int8-io": (ZOO["resnet8"], IoType.INT8, ("cortex-m33",)),
    "two_inputs_two_outputs": (_two_inputs, IoType.FLOAT, ("cortex-m55",)),
}
PARAMS = [(case, core) for case, (_, _, cores) in CASES.items() for core in cores]


def _compile(quantized_models: QuantizedModels, case: str, core: str) -> CompiledProgram:
    factory, io, _ = CASES[case]
    name = case.removesuffix("-int8-io")
    quantized = quantized_models.get(name if name in ZOO else f"execution_graph.{name}", factory)
    return compile_quantized(
        quantized.source,
        Target.parse(core),
        quantized.calibration,
        quantized.graphs,
        serialise=False,
        io=io,
    )


@pytest.mark.parametrize(("case", "core"), PARAMS)
def test_same_program_as_the_retraced_path(
    case: str, core: str, quantized_models: QuantizedModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled = _compile(quantized_models, case, core)
    io = compiled.io
    assert execution_graph.unsupported(io.graph) is None
    direct = compiled.pte
    assert compiled.serialised.edge_text == DIRECT  # the direct path was taken
    text, plan = compiled.serialised.executorch_text, compiled.memory.as_dict()
    program = execution_graph.execution_program(
        io.graph, io.program_inputs(compiled.model.example_inputs)
    )
    methods = metadata(compiled.abi, io)
    unshared = execution_graph.serialise(program, methods, memory_planning_pass(), share=False)

    monkeypatch.setattr(execution_graph, "unsupported", lambda graph: "forced")
    compiled._serialised = None
    retraced = compiled.pte
    assert compiled.serialised.edge_text != DIRECT  # and now the re-traced one
    assert unshared == retraced  # without sharing: byte for byte
    assert text == compiled.serialised.executorch_text
    assert plan == compiled.memory.as_dict()
    # with sharing: the re-traced program with its equal constants stored once
    theirs = deserialize_pte_binary(retraced).program
    theirs.execution_plan[0] = share_values(theirs.execution_plan[0])
    ours = deserialize_pte_binary(direct).program
    assert ours == theirs
    assert len(ours.execution_plan[0].values) < len(
        deserialize_pte_binary(retraced).program.execution_plan[0].values
    )


def test_a_fallback_is_serialised_through_to_edge() -> None:
    compiled, _ = check_dialect(*split(), allow_fallback=True)
    reason = execution_graph.unsupported(compiled.io.graph)
    assert reason is not None and "not a cortex_m_nn operator" in reason
    compiled.pte  # noqa: B018
    assert compiled.serialised.edge_text != DIRECT


def _graph(build: Callable[[torch.fx.Graph, torch.fx.Node], object]) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    graph.output(build(graph, graph.placeholder("x")))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


VIEW = torch.ops.aten.view.default
#: a graph the direct path does not write → what its refusal names
UNSUPPORTED: dict[str, tuple[Callable[[torch.fx.Graph, torch.fx.Node], object], str]] = {
    "an ATen operator": (
        lambda g, x: (g.call_function(torch.ops.aten.add.Tensor, (x, x)),),
        "not a cortex_m_nn operator",
    ),
    "a view returned": (lambda g, x: (g.call_function(VIEW, (x, [-1])),), "view returned"),
    "an input returned": (lambda g, x: (x,), "not a tensor the graph computes"),
    "an output returned twice": (
        lambda g, x: (g.call_function(cortex_m_nn_operator("quantize"), (x, 0.5, 0, [])),) * 2,
        "returned twice",
    ),
}


@pytest.mark.parametrize("case", list(UNSUPPORTED))
def test_what_the_direct_path_does_not_write_is_named(case: str) -> None:
    build, expected = UNSUPPORTED[case]
    reason = execution_graph.unsupported(_graph(build))
    assert reason is not None and expected in reason
