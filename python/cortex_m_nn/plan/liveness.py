"""The live-tensor bound of a lowered graph, read before serialising it: at each kernel call,
the bytes of every tensor alive then (each aligned as ExecuTorch's planner aligns it) and the
call's scratch. A ``view`` or ``window`` is its base's bytes and an ``assemble``'s strips are
its bytes (``plan.patch``), as the memory planner places them. ``plan.patch`` compares stages
with it; ``memory_plan`` reads the same bound back from the planned program.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
from torch.fx import Graph, GraphModule, Node

from cortex_m_nn.core.runtime_sizes import (
    BOXED_LIST_BYTES,
    EVALUE_BYTES,
    POINTER_BYTES,
    SPAN_BYTES,
    TENSOR_IMPL_BYTES,
)
from cortex_m_nn.plan.memory_plan import aligned
from cortex_m_nn.plan.stage import VIEW
from cortex_m_nn.plan.storage import nodes_in

WINDOW = torch.ops.cortex_m_nn.window.default
ASSEMBLE = torch.ops.cortex_m_nn.assemble.default


def scratch_bytes(call: Node) -> int:
    """The scratch a call returns as its second output (its last argument's bytes)."""
    value = call.meta["val"]
    return int(call.args[-1]) if isinstance(value, list | tuple) and len(value) == 2 else 0


@dataclass
class Sweep:
    """Each kernel call in order and the bytes live at it (its scratch included)."""

    calls: list[Node]
    live: list[int]


def _roots(graph: Graph) -> dict[Node, Node]:
    """Each tensor node → the node whose bytes hold it: a view or window its base's, an
    ``assemble``'s part (or the base of a part that is a view) the assemble's."""
    nodes = list(graph.nodes)

    def base(node: Node) -> Node:
        while node.target in (VIEW, WINDOW):
            node = node.args[0]
        return node

    holder = {base(p): n for n in nodes if n.target is ASSEMBLE for p in n.args[0]}
    root: dict[Node, Node] = {}
    for node in nodes:
        if node.target is operator.getitem and node.args[1] != 0:
            continue
        found = base(node)
        while found in holder:
            found = base(holder[found])
        root[node] = found
    return root


def sweep(graph: Graph | GraphModule) -> Sweep:
    graph = graph.graph if isinstance(graph, GraphModule) else graph
    nodes = list(graph.nodes)
    calls = [
        n for n in nodes if n.op == "call_function" and n.target not in (operator.getitem, VIEW)
    ]
    root = _roots(graph)
    first: dict[Node, int] = {n: 0 for n in nodes if n.op == "placeholder"}
    last: dict[Node, int] = {}
    for index, call in enumerate(calls):
        written = [u for u in call.users if u.target is operator.getitem and u.args[1] == 0]
        for node in nodes_in((call.args, call.kwargs)) + (written or [call]):
            tensor = isinstance(node.meta.get("val"), torch.Tensor)
            if tensor and node.op in ("call_function", "placeholder") and node in root:
                first.setdefault(root[node], index)
                last[root[node]] = index
    output = next(n for n in nodes if n.op == "output")
    for node in nodes_in(output.args):
        last[root[node]] = len(calls) - 1
    change = [0] * (len(calls) + 1)  # bytes that start living at a call, minus those ending
    for node, start in first.items():
        change[start] += aligned(node.meta["val"].nbytes)
        change[max(start, last.get(node, start)) + 1] -= aligned(node.meta["val"].nbytes)
    live, running = [], 0
    for index, call in enumerate(calls):
        running += change[index]
        live.append(running + aligned(scratch_bytes(call)))
    return Sweep(calls, live)


def method_bytes(graph: Graph | GraphModule) -> int:
    """About what ExecuTorch's method allocator takes for the graph's program on a 32-bit
    core (``serialize.pte.runtime_overhead`` counts it exactly from a ``.pte``): a value and
    a tensor per tensor node, each call's argument pointers, each distinct int list. Enough to
    weigh a stage's extra calls against the arena they save."""

    graph = graph.graph if isinstance(graph, GraphModule) else graph
    total, lists = 0, set()
    for node in graph.nodes:
        value = node.meta.get("val")
        for tensor in value if isinstance(value, list | tuple) else [value]:
            if isinstance(tensor, torch.Tensor) and node.op != "get_attr":
                total += EVALUE_BYTES + TENSOR_IMPL_BYTES + 4 * tensor.dim()
        if node.op != "call_function" or node.target in (operator.getitem, VIEW):
            continue
        arguments = len(node.args) + (2 if isinstance(value, list | tuple) else 1)
        total += POINTER_BYTES + SPAN_BYTES + POINTER_BYTES * arguments
        lists |= {tuple(a) for a in node.args if isinstance(a, list) and not nodes_in(a)}
    return total + sum(BOXED_LIST_BYTES + 12 * len(items) + EVALUE_BYTES for items in lists)
