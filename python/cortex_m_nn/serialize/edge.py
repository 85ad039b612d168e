"""The lowered graph in ExecuTorch's edge dialect: ``to_edge`` without its needless step.

``executorch.exir.to_edge`` first runs ``ExportedProgram.run_decompositions`` with the core
ATen decomposition table, then its own ATen → edge passes. Decomposing re-traces the whole
graph and, whatever the graph, temporarily re-registers every CompositeImplicitAutograd
operator of torch twice: about 0.65 s on a ten-node graph, over half of serialising a small
model, and 4 s on MobileNetV2-0.35. A fully lowered graph has nothing to decompose: it holds
only ``cortex_m_nn`` operators, ``getitem`` and core ATen views. For such a graph
:func:`to_edge_program` runs what ``to_edge`` runs after decomposing (the same ATen-dialect
check, the same passes, the same edge-dialect check); anything else (a float fallback such as
``aten.conv2d``, which decomposes into ``aten.convolution``) goes through ``to_edge`` itself.
Both give byte-identical programs (``tests/python/test_edge.py``).

The step after decomposing, ``_generate_edge_program``, is private to ExecuTorch; the pinned
``executorch`` version keeps it where it is, and the test above fails if it changes.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import torch
from executorch.exir import EdgeCompileConfig, EdgeProgramManager, to_edge
from executorch.exir.passes.remove_graph_asserts_pass import RemoveNonCoreAtenOpGraphAssertsPass
from executorch.exir.program._program import _generate_edge_program
from executorch.exir.tracer import _default_decomposition_table
from executorch.exir.verification.verifier import (
    EXIRATenDialectVerifier,
    EXIREdgeDialectVerifier,
)
from torch.export import ExportedProgram

from cortex_m_nn.ops.library import NAMESPACE

#: What ``to_program`` asks of the edge dialect: every operator checked against it.
CONFIG = EdgeCompileConfig(_check_ir_validity=True)


@functools.cache
def _decomposed() -> frozenset[torch._ops.OpOverload]:
    """The operators ``to_edge``'s decomposition table replaces."""
    return frozenset(_default_decomposition_table())


def needs_decomposition(target: Any) -> bool:
    """Whether ``to_edge``'s decompositions would change a call of ``target``."""
    if target is operator.getitem:
        return False
    if not isinstance(target, torch._ops.OpOverload):
        return True  # not an operator the edge dialect knows as is: let to_edge decide
    if target.namespace == NAMESPACE:
        return False  # CompositeExplicitAutograd: never decomposed
    implicit = torch._C._dispatch_has_kernel_for_dispatch_key(
        target.name(), "CompositeImplicitAutograd"
    )
    return torch.Tag.core not in target.tags or target in _decomposed() or implicit


def to_edge_program(
    program: ExportedProgram, constant_methods: dict[str, Any]
) -> EdgeProgramManager:
    """``to_edge(program, constant_methods, CONFIG)``, skipping the decomposition when no
    operator of ``program`` has one."""
    targets = {n.target for n in program.graph.nodes if n.op == "call_function"}
    if any(needs_decomposition(target) for target in targets):
        return to_edge(program, constant_methods=constant_methods, compile_config=CONFIG)
    graph = RemoveNonCoreAtenOpGraphAssertsPass()(program.graph_module).graph_module
    EXIRATenDialectVerifier(edge_compile_config=CONFIG, class_only=False)(graph)
    edge = _generate_edge_program(CONFIG, program)
    EXIREdgeDialectVerifier(edge_compile_config=CONFIG, class_only=True)()(edge.graph_module)
    return EdgeProgramManager({"forward": edge}, constant_methods, CONFIG)
