"""A stage run in strips, as graph nodes (``plan.patch``): each strip computes the rows of
every stage tensor that it needs and no earlier strip computed, keeping the rows it shares
with the previous strip (the halo) by copying them instead of computing them again.

For a stage tensor ``t`` and strip ``i`` the buffer holds rows ``need_i(t)``
(``stage.strip_rows``). Of those, the rows the previous strip's buffer also holds are copied
from it (``strided_copy``, at the buffer's start) and the rest are computed by the call on
exactly the rows of its inputs they read (``window``s of the inputs' buffers, padded only at
the image border: ``RowMap.pads``); ``assemble`` makes the two one buffer, each part planned
at its rows. A buffer whose rows the previous one holds entirely is a ``window`` of it. The
exit's strips are disjoint and are planned at their rows of the exit (``assemble``). So every
row of every tensor is computed once, by the same call on the same rows as layer by layer.

A window, a copy's part or a strip must start at a multiple of ExecuTorch's 16-byte alignment
(``storage_base``); :func:`strips_graph` gives None for a stage and strips where one would not.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch.fx import Graph, GraphModule, Node

from cortex_m_nn.core.cmsis_nn import WRAPPER
from cortex_m_nn.core.target import Target
from cortex_m_nn.lower.scratch import conv2d_scratch_bytes, depthwise_conv2d_scratch_bytes
from cortex_m_nn.ops.params import sides
from cortex_m_nn.plan import paths
from cortex_m_nn.plan.memory_plan import ALIGNMENT
from cortex_m_nn.plan.stage import (
    CONVOLUTIONS,
    ELEMENTWISE,
    OPS,
    VIEW,
    Stage,
    macs,
    owned,
    row_bytes,
    row_map,
    shape,
    tensor_inputs,
    value_of,
    view_of,
)


class Misaligned(Exception):
    """A window, a copy's part or a strip would not start at an aligned byte."""


@dataclass(frozen=True)
class Held:
    """The node of a buffer holding ``rows`` of a stage tensor."""

    node: Node
    rows: range


def _meta(size: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(size, dtype=dtype, device="meta")


def _node(graph: Graph, target: object, args: tuple, size: tuple[int, ...], dtype) -> Node:
    node = graph.call_function(target, args)
    node.meta["val"] = _meta(size, dtype)
    return node


def _rows_of(graph: Graph, held: Held, rows: range) -> Node:
    """``rows`` (inside ``held.rows``) as a tensor: the buffer, or a window of it."""
    if rows == held.rows:
        return held.node
    offset = rows.start - held.rows.start
    if offset * row_bytes(held.node) % ALIGNMENT:
        raise Misaligned
    n, _, w, c = shape(held.node)
    size = (n, len(rows), w, c)
    return _node(graph, OPS.window.default, (held.node, offset, len(rows)), size, torch.int8)


def _copy(graph: Graph, held: Held, rows: range) -> Node:
    """``rows`` of the buffer copied into a tensor of their own (``strided_copy``)."""
    n, _, w, c = shape(held.node)
    offset = (rows.start - held.rows.start) * w * c
    args = (held.node, [n, len(rows), w, c], [len(held.rows) * w * c, w * c, c, 1], offset)
    return _node(graph, OPS.strided_copy.default, args, (n, len(rows), w, c), torch.int8)


def _assemble(graph: Graph, parts: list[Node]) -> Node:
    n, _, w, c = shape(parts[0])
    for part in parts[:-1]:
        if part.meta["val"].nbytes % ALIGNMENT:
            raise Misaligned
    size = (n, sum(shape(p)[1] for p in parts), w, c)
    return _node(graph, OPS.assemble.default, (parts,), size, parts[0].meta["val"].dtype)


def _scratch(call: Node, args: list, out: tuple[int, ...], target: Target) -> int:
    """CMSIS-NN's scratch for the call on a strip (its getters, for the strip's shapes)."""
    window = (args[5], args[6], args[7])
    given, weight = tuple(args[0].meta["val"].shape), tuple(call.args[1].meta["val"].shape)
    if call.target is OPS.conv2d.default:
        return conv2d_scratch_bytes(target, given, weight, out, *window)
    return depthwise_conv2d_scratch_bytes(
        target, given, weight, out, *window, depth_multiplier=int(args[8])
    )


def _call(
    graph: Graph, call: Node, held: dict[Node, Held], rows: range, target: Target, path: int | None
) -> Node:
    """The call computing output ``rows`` from its inputs' buffers (on ``path``, or where None
    the least-RAM path ``plan.paths`` gives a strip of it)."""
    mapping, args = row_map(call), list(call.args)
    for position, tensor in enumerate(tensor_inputs(call)):
        node = _rows_of(graph, held[tensor], mapping.reads(rows, shape(tensor)[1]))
        if view_of(call.args[position]) is not None:  # flattened, as the lowering does
            size = (node.meta["val"].numel(),)
            node = _node(graph, VIEW, (node, list(size)), size, node.meta["val"].dtype)
        args[position] = node
    value = value_of(call).meta["val"]
    out = (1, len(rows), *value.shape[2:])
    if call.target in CONVOLUTIONS:
        _, left, _, right = sides(call.args[6])
        top, bottom = mapping.pads(rows, shape(call.args[0])[1])
        args[6] = [top, left, bottom, right]
        args[-2] = paths.strip_path(call, args[6], target) if path is None else path
        # the other paths take no scratch (our kernel then gathers each window on the stack)
        args[-1] = _scratch(call, args, out, target) if args[-2] == WRAPPER else 0
    if call.target in ELEMENTWISE and value_of(call) is not call:  # flattened operands
        flat = _node(graph, call.target, tuple(args), (math.prod(out),), value.dtype)
        return _node(graph, VIEW, (flat, list(out)), out, value.dtype)
    new = graph.call_function(call.target, tuple(args), dict(call.kwargs))
    if not isinstance(call.meta["val"], list | tuple):
        new.meta["val"] = _meta(out, value.dtype)
        return new
    new.meta["val"] = (_meta(out, value.dtype), _meta((args[-1],), torch.int8))
    return _node(graph, operator.getitem, (new, 0), out, value.dtype)


class _Stream:
    """Emits a stage's calls demand-driven, ``chunk`` output rows a call: a tensor's rows are
    computed when a reader needs them, and its buffer keeps only the rows some reader will
    still read."""

    def __init__(
        self, graph: Graph, stage: Stage, chunk: int, target: Target, chosen: Mapping[str, int]
    ) -> None:
        self.graph, self.stage, self.chunk, self.target = graph, stage, chunk, target
        self.chosen = chosen
        self.producer = {value_of(c): c for c in stage.calls}
        self.done = dict.fromkeys(stage.calls, 0)  # output rows computed so far
        self.held = {stage.entry: Held(stage.entry, range(shape(stage.entry)[1]))}
        self.parts: list[Node] = []
        self.macs = 0

    def ensure(self, tensor: Node, stop: int) -> None:
        """Compute ``tensor``'s rows below ``stop``."""
        if tensor is self.stage.entry:
            return
        call = self.producer[tensor]
        while self.done[call] < stop:
            start = self.done[call]
            self.compute(call, range(start, min(start + self.chunk, shape(tensor)[1])))

    def compute(self, call: Node, fresh: range) -> None:
        mapping = row_map(call)
        for tensor in tensor_inputs(call):
            self.ensure(tensor, mapping.reads(fresh, shape(tensor)[1]).stop)
        tensor = value_of(call)
        before = self.held.get(tensor)
        kept = range(0)
        if before is not None:
            kept = range(
                max(self.lowest_read(tensor, fresh.start), before.rows.start), before.rows.stop
            )
        copied = _copy(self.graph, before, kept) if kept else None
        path = self.chosen.get(call.name)
        node = _call(self.graph, call, self.held, fresh, self.target, path)
        self.done[call] = fresh.stop
        self.macs += macs(call, len(fresh))
        if tensor is self.stage.exit:
            self.parts.append(node)
            return
        if copied is not None:
            node = _assemble(self.graph, [copied, node])
        self.held[tensor] = Held(node, range(kept.start if kept else fresh.start, fresh.stop))

    def lowest_read(self, tensor: Node, computed: int) -> int:
        """The lowest row of ``tensor`` a reader will still read (rows below ``computed``
        exist; a reader that has not started reads from its first window)."""
        lowest = computed
        for reader in self.stage.calls:
            if tensor in tensor_inputs(reader) and self.done[reader] < shape(value_of(reader))[1]:
                first = range(self.done[reader], self.done[reader] + 1)
                lowest = min(lowest, row_map(reader).reads(first, shape(tensor)[1]).start)
        return lowest


@dataclass
class Strips:
    """A copy of a graph running a stage in strips: the graph, the MACs of the stage's calls,
    the nodes that run them (in graph order), the stage's entry and the node of its output."""

    graph: Graph
    macs: int
    created: list[Node]
    entry: Node
    result: Node


def strips_graph(
    graph_module: GraphModule,
    stage: Stage,
    chunk: int,
    target: Target,
    chosen: Mapping[str, int] | None = None,
) -> Strips | None:
    """A copy of the graph running ``stage`` in strips of ``chunk`` rows a call (its nodes:
    a ``GraphModule`` over ``graph_module`` runs it; the strips of the calls named in
    ``chosen`` on the path it gives them, the others on the least-RAM one); None when a
    window or strip would be misaligned."""
    graph = Graph()
    env: dict[Node, Node] = {}
    graph.output(graph.graph_copy(graph_module.graph, env))
    copied = set(graph.nodes)
    old = stage
    stage = Stage(env[old.entry], env[old.exit], tuple(env[c] for c in old.calls))
    stream = _Stream(graph, stage, chunk, target, chosen or {})
    try:
        with graph.inserting_before(stage.exit.next):
            stream.ensure(stage.exit, shape(stage.exit)[1])
            assembled = _assemble(graph, stream.parts)
    except Misaligned:
        return None
    stage.exit.replace_all_uses_with(assembled)
    for call in reversed(stage.calls):
        for node in reversed(owned(call)):
            graph.erase_node(node)
    created = [n for n in graph.nodes if n not in copied]
    return Strips(graph, stream.macs, created, stage.entry, assembled)
