"""Constants computed from constants, once, before PT2E.

A parameter often reaches its operator through a view or a small computation: ConvNeXt's
layer scale ``x * self.gamma.reshape(1, -1, 1, 1)``, ``nn.MultiheadAttention``'s
in-projection weight cut in three (``w.chunk(3)``) when keys and values differ, a bias
``unsqueeze``d to broadcast, a causal mask built with ``torch.ones(…).tril()``. To the
quantizer such a result is an activation (it quantizes it per tensor as one, or as a weight
in a place the lowering reads as an activation). :func:`fold_constants` computes every
operator whose tensor inputs are all constants (``get_attr`` nodes of tensors the graph never
writes) and puts the result in its place as a new constant, so each weight, scale or mask is
quantized as the constant it is. Random operators are left alone.
"""

from __future__ import annotations

import functools
import operator

import torch
from torch._ops import OpOverload
from torch.fx import GraphModule, Node

from cortex_m_nn.core.graph import op_name

#: The attribute prefix of the folded constants.
PREFIX = "_folded_"


def _attribute(graph_module: GraphModule, node: Node) -> object:
    return functools.reduce(getattr, str(node.target).split("."), graph_module)


def constant_value(node: object) -> torch.Tensor | None:
    """The tensor a ``get_attr`` node reads from its graph's module, else None."""
    if not isinstance(node, Node) or node.op != "get_attr":
        return None
    value = _attribute(node.graph.owning_module, node)
    return value if isinstance(value, torch.Tensor) else None


def _written(graph_module: GraphModule) -> set[str]:
    """Attributes some operator writes (an SVDF state, a buffer updated in place)."""
    written = set()
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, OpOverload):
            continue
        for argument, schema in zip(node.args, node.target._schema.arguments, strict=False):
            alias = schema.alias_info
            if alias is not None and alias.is_write and isinstance(argument, Node):
                written.add(str(argument.target))
    return written


def _foldable(graph_module: GraphModule, node: Node, written: set[str]) -> bool:
    if node.op != "call_function" or not isinstance(node.target, OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded in node.target.tags:
        return False
    inputs: list[Node] = []
    torch.fx.node.map_arg((node.args, node.kwargs), inputs.append)
    return bool(inputs) and all(
        i.op == "get_attr"
        and str(i.target) not in written
        and isinstance(_attribute(graph_module, i), torch.Tensor)
        for i in inputs
    )


def _constant(graph_module: GraphModule, before: Node, like: Node, value: torch.Tensor) -> Node:
    """``value`` as a new constant read before ``before``, with ``like``'s metadata."""
    name = f"{PREFIX}{like.name}"
    graph_module.register_buffer(name, value.detach().clone().contiguous())
    with graph_module.graph.inserting_before(before):
        constant = graph_module.graph.get_attr(name)
    constant.meta = dict(like.meta)
    return constant


def _results(node: Node, value: object) -> list[tuple[Node, torch.Tensor]] | None:
    """(the node to replace, its value): the node itself, or each ``getitem`` of a list of
    tensors (``split``, ``chunk``, ``unbind``); None when the value is neither."""
    if isinstance(value, torch.Tensor):
        return [(node, value)]
    users = list(node.users)
    if not isinstance(value, list | tuple) or not users:
        return None
    if not all(u.target is operator.getitem and isinstance(u.args[1], int) for u in users):
        return None
    pieces = [value[int(u.args[1])] for u in users]
    if not all(isinstance(p, torch.Tensor) for p in pieces):
        return None
    return list(zip(users, pieces, strict=True))


def fold_constants(graph_module: GraphModule) -> list[str]:
    """Rewrite ``graph_module`` in place (see the module docstring); returns the folded
    operators' names, in graph order."""
    graph = graph_module.graph
    written = _written(graph_module)
    folded = []
    for node in list(graph.nodes):
        if not _foldable(graph_module, node, written):
            continue
        sources = [n for n in node.all_input_nodes]
        arguments = torch.fx.node.map_arg(
            (node.args, node.kwargs), lambda n: _attribute(graph_module, n)
        )
        with torch.no_grad():
            results = _results(node, node.target(*arguments[0], **arguments[1]))
        if results is None:
            continue
        for replaced, value in results:
            replaced.replace_all_uses_with(_constant(graph_module, node, replaced, value))
            if replaced is not node:
                graph.erase_node(replaced)
        graph.erase_node(node)
        for source in sources:  # a constant only the folded operator read
            if not source.users:
                graph.erase_node(source)
        folded.append(op_name(node.target))
    graph.lint()
    graph_module.recompile()
    return folded
