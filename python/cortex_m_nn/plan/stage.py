"""What a patch-based stage is made of (``plan.patch``): the calls a stage can hold, how
each call's output rows read its input rows (:class:`RowMap`), the stages of a lowered graph,
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch.fx import GraphModule, Node

from cortex_m_nn.ops.params import sides

OPS = torch.ops.cortex_m_nn
CONVOLUTIONS = {OPS.conv2d.default, OPS.depthwise_conv2d.default}
#: element-wise operators → how many tensors they read (a lut's table is a constant)
ELEMENTWISE = {OPS.add.default: 2, OPS.mul.default: 2, OPS.lut.default: 1}
VIEW = torch.ops.aten.view.default


@dataclass(frozen=True)
class RowMap:
    """How a call's output rows read its input rows: a window ``extent`` rows tall (the dilated
    kernel) every ``stride`` rows, starting ``top`` rows above the input (its top pad)."""

    extent: int = 1
    stride: int = 1
    top: int = 0

    def reads(self, rows: range, height: int) -> range:
        """The input rows output ``rows`` read (clipped to the input's ``height``)."""
        start = rows.start * self.stride - self.top
        stop = (rows.stop - 1) * self.stride - self.top + self.extent
        return range(max(0, start), min(height, stop))

    def pads(self, rows: range, height: int) -> tuple[int, int]:
        """(top, bottom) pad of the call computing output ``rows`` from :meth:`reads`'s rows."""
        start = rows.start * self.stride - self.top
        stop = (rows.stop - 1) * self.stride - self.top + self.extent
        return max(0, -start), max(0, stop - height)


def shape(node: Node) -> tuple[int, ...]:
    return tuple(node.meta["val"].shape)


def view_of(node: object) -> Node | None:
    """The 4-D tensor ``node`` flattens (an element-wise call's operand), else None."""
    if isinstance(node, Node) and node.target is VIEW and len(node.users) == 1:
        base = node.args[0]
        if isinstance(base, Node) and len(shape(base)) == 4:
            return base
    return None


def value_of(call: Node) -> Node | None:
    """The node holding a call's output tensor: its ``getitem`` 0 when it returns several;
    for an element-wise call on flattened operands, the view back to their 4-D shape."""
    if call.target in ELEMENTWISE and len(shape(call)) != 4:
        users = list(call.users)
        if len(users) == 1 and users[0].target is VIEW and len(shape(users[0])) == 4:
            return users[0]
        return None
    if not isinstance(call.meta.get("val"), list | tuple):
        return call
    found = [u for u in call.users if u.target is operator.getitem and u.args[1] == 0]
    return found[0] if len(found) == 1 else None


def tensor_inputs(call: Node) -> list[Node]:
    """The 4-D tensors the call reads (an element-wise call's through their flattening)."""
    if call.target in CONVOLUTIONS:
        return [call.args[0]]
    return [view_of(a) or a for a in call.args[: ELEMENTWISE[call.target]]]


def owned(call: Node) -> list[Node]:
    """The call's nodes, in graph order: operand flattenings, the call, its results."""
    arity = ELEMENTWISE.get(call.target, 0)
    return [*(a for a in call.args[:arity] if view_of(a)), call, *call.users]


def row_map(call: Node) -> RowMap | None:
    """The call's :class:`RowMap`, or None when a stage cannot hold it."""
    value = value_of(call)
    if value is None:
        return None
    if call.target in ELEMENTWISE:
        tensors = tensor_inputs(call)
        if not all(isinstance(t, Node) and shape(t) == shape(value) for t in tensors):
            return None
        int8 = all(t.meta["val"].dtype is torch.int8 for t in tensors)
        return RowMap() if int8 and len(shape(value)) == 4 else None
    if call.target not in CONVOLUTIONS:
        return None
    weight = call.args[1].meta["val"]
    if weight.dim() != 4 or weight.dtype is not torch.int8:
        return None  # an int4 weight (packed bytes)
    if call.args[0].meta["val"].dtype is not torch.int8:
        return None
    stride, padding, dilation = call.args[5:8]
    extent = dilation[0] * (weight.shape[1] - 1) + 1
    return RowMap(extent, stride[0], sides(padding)[0])


def macs(call: Node, rows: int) -> int:
    """Multiply-accumulates of the call computing ``rows`` output rows."""
    if call.target not in CONVOLUTIONS:
        return 0
    _, _, width, channels = shape(value_of(call))
    _, kh, kw, per = call.args[1].meta["val"].shape
    per = 1 if call.target is OPS.depthwise_conv2d.default else per
    return rows * width * channels * kh * kw * per


def row_bytes(node: Node) -> int:
    value = node.meta["val"]
    return value.shape[2] * value.shape[3] * value.element_size()


@dataclass(frozen=True)
class Stage:
    """Calls ``calls`` (in graph order) reading ``entry`` and giving the rest ``exit``."""

    entry: Node
    exit: Node
    calls: tuple[Node, ...]


def stages(graph_module: GraphModule) -> Iterator[Stage]:
    """Every stage of the graph: a run of calls from its first convolution (reading a 4-D
    tensor of one image), each call one a stage can hold, whose tensors nothing outside reads
    but the last call's."""
    calls = [
        n
        for n in graph_module.graph.nodes
        if n.op == "call_function" and n.target not in (operator.getitem, VIEW)
    ]
    heads = [i for i, c in enumerate(calls) if c.target in CONVOLUTIONS]
    for first in heads[:1]:  # the network's first convolution starts a stage
        head = calls[first]
        entry = head.args[0]
        if row_map(head) is None or shape(entry)[0] != 1:
            return
        inside: set[Node] = {entry}
        for call in calls[first:]:
            value = value_of(call)
            if row_map(call) is None or value is None:
                break
            if any(t not in inside for t in tensor_inputs(call)):
                break
            inside.add(value)
            members = calls[first : calls.index(call) + 1]
            if _closed(members, value, entry):
                yield Stage(entry, value, tuple(members))


def _closed(members: list[Node], exit: Node, entry: Node) -> bool:
    """Whether nothing outside ``members`` reads a tensor they make, but ``exit``."""
    own = {n for call in members for n in owned(call)}
    for call in members:
        for node in owned(call):
            if node is not exit and any(u not in own for u in node.users):
                return False
    return exit is not entry
