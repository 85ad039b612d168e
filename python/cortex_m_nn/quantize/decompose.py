"""Before annotation: data movement with several outputs, or none that one copy expresses,
rewritten as the single-output ops the lowering moves bytes for.

* ``split``, ``split_with_sizes``, ``chunk`` → one ``slice`` per piece used; ``unbind`` → one
  ``select`` per piece used (each an ordinary op with one output the quantizer can share
  its input's quantization with, which ``getitem`` of a list is not);
* ``stack`` → ``unsqueeze`` of each input, then ``cat``;
* ``roll`` → per rolled dim, ``cat`` of the two slices that trade places (``roll`` without
  dims flattens first and restores the shape after).

Each new node keeps the source location of the op it replaces, so a report or a refusal
names the user's line.
"""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from cortex_m_nn.core.families import aten
from cortex_m_nn.core.graph import argument

#: The ops with several outputs rewritten into one op per output used.
MULTI_OUTPUT = {
    aten.split.Tensor,
    aten.split_with_sizes.default,
    aten.chunk.default,
    aten.unbind.int,
}
#: Meta entries copied from the replaced op: where it comes from in the user's code.
LOCATION = ("nn_module_stack", "stack_trace", "torch_fn", "source_fn_stack", "from_node")


def _add(graph: torch.fx.Graph, like: Node, target: object, args: tuple) -> Node:
    """``target(*args)`` before ``like``, with its value computed on the inputs' fake values
    and ``like``'s source location."""
    with graph.inserting_before(like):
        node = graph.call_function(target, args)
    node.meta.update({k: like.meta[k] for k in LOCATION if k in like.meta})
    values = torch.fx.node.map_arg(args, lambda n: n.meta["val"])
    node.meta["val"] = target(*values)
    return node


def _pieces(node: Node) -> list[tuple[int, int]] | None:
    """(start, end) along the split dim of each output of a splitting op."""
    value = node.args[0].meta["val"]
    dim = int(argument(node, 2 if node.target is not aten.unbind.int else 1, "dim", 0))
    size = int(value.shape[dim])
    if node.target is aten.unbind.int:
        return [(i, i + 1) for i in range(size)]
    if node.target is aten.chunk.default:
        chunks = int(node.args[1])
        step = -(-size // chunks)
        return [(s, min(s + step, size)) for s in range(0, size, step)]
    if node.target is aten.split.Tensor and isinstance(node.args[1], int):
        step = int(node.args[1])
        return [(s, min(s + step, size)) for s in range(0, size, step)]
    sizes = [int(s) for s in node.args[1]]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [(s, s + n) for s, n in zip(starts, sizes, strict=True)]


def _split(graph: torch.fx.Graph, node: Node) -> None:
    """One ``slice`` (``select`` for ``unbind``) per ``getitem`` of a splitting op."""
    users = list(node.users)
    if not all(u.target is operator.getitem and isinstance(u.args[1], int) for u in users):
        return
    source = node.args[0]
    rank = source.meta["val"].dim()
    dim = int(argument(node, 2 if node.target is not aten.unbind.int else 1, "dim", 0)) % rank
    pieces = _pieces(node)
    for user in users:
        start, end = pieces[user.args[1]]
        if node.target is aten.unbind.int:
            piece = _add(graph, user, aten.select.int, (source, dim, start))
        else:
            piece = _add(graph, user, aten.slice.Tensor, (source, dim, start, end))
        user.replace_all_uses_with(piece)
        graph.erase_node(user)
    graph.erase_node(node)


def _stack(graph: torch.fx.Graph, node: Node) -> None:
    inputs = node.args[0]
    rank = inputs[0].meta["val"].dim() + 1
    dim = int(argument(node, 1, "dim", 0)) % rank
    parts = [_add(graph, node, aten.unsqueeze.default, (x, dim)) for x in inputs]
    node.replace_all_uses_with(_add(graph, node, aten.cat.default, (parts, dim)))
    graph.erase_node(node)


def _roll(graph: torch.fx.Graph, node: Node) -> None:
    source = node.args[0]
    shape = list(source.meta["val"].shape)
    shifts = [int(s) for s in argument(node, 1, "shifts", [])]
    dims = [int(d) for d in argument(node, 2, "dims", [])]
    value = source
    if not dims:  # roll of the flattened tensor
        value = _add(graph, node, aten.reshape.default, (source, [-1]))
        dims, shifts = [0], shifts[:1]
    for shift, dim in zip(shifts, dims, strict=True):
        size = int(value.meta["val"].shape[dim])
        k = shift % size
        if k:
            tail = _add(graph, node, aten.slice.Tensor, (value, dim, size - k, size))
            head = _add(graph, node, aten.slice.Tensor, (value, dim, 0, size - k))
            value = _add(graph, node, aten.cat.default, ([tail, head], dim))
    if value.meta["val"].dim() != len(shape):
        value = _add(graph, node, aten.reshape.default, (value, shape))
    node.replace_all_uses_with(value)
    graph.erase_node(node)


def decompose_movement(model: GraphModule) -> GraphModule:
    """Rewrite the ops above in ``model`` (in place); returns it."""
    graph = model.graph
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target in MULTI_OUTPUT and "val" in node.args[0].meta:
            _split(graph, node)
        elif node.target is aten.stack.default and all("val" in x.meta for x in node.args[0]):
            _stack(graph, node)
        elif node.target is aten.roll.default and "val" in node.args[0].meta:
            _roll(graph, node)
    graph.lint()
    model.recompile()
    return model
