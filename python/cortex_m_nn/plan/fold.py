"""A stage's strip calls folded into one ``cortex_m_nn::stage`` call (:mod:`cortex_m_nn.ops.stage`).

``plan.strips`` writes a stage as graph nodes: every strip call, the ``window``s and
``assemble``s that tie strips to tensors and the halo's copies. Each of those calls would cost
ExecuTorch's method allocator a value, a tensor and an argument list; folded, the stage costs
one call. :func:`fold` replaces the nodes by the call and writes its program:

- **Where each tensor lives.** The stage's input and output are the call's own tensors; a
  ``window`` lies inside its base, an ``assemble``'s parts at their rows of it, a ``view`` on its
  base's bytes — as ``plan.liveness`` and the memory planner see them. Every other buffer (a
  strip, a halo copy, a call's CMSIS-NN scratch) is one region of the stage's scratch tensor.
- **Where the buffers go.** A tensor's successive strip buffers are one region (the halo
  moved down it). Each region lives from the first step that touches it to the last; regions
  whose lifetimes meet get disjoint bytes, each at the lowest aligned offset that fits, in
  whichever of three orders needs the fewest bytes.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import torch
from torch.fx import Graph, Node

from cortex_m_nn.ops.stage import (
    INPUT,
    OUTPUT,
    SCRATCH,
    STEP_OPERATORS,
    WITH_SCRATCH,
    Argument,
    Constant,
    Step,
    View,
    encode,
    kinds,
    lead,
)
from cortex_m_nn.plan.memory_plan import ALIGNMENT, aligned
from cortex_m_nn.plan.overlap import STAGE_LEAD
from cortex_m_nn.plan.stage import OPS, VIEW, shape

WINDOW, ASSEMBLE = OPS.window.default, OPS.assemble.default
STRIDED_COPY = OPS.strided_copy.default
STEPS = {getattr(OPS, name).default: name for name in STEP_OPERATORS}
#: A region's key: the stage's input or output, a node's buffer, or a step's scratch.
Key = object


@dataclass(frozen=True)
class Place:
    """A tensor's bytes: ``offset`` bytes into region ``key``."""

    key: Key
    offset: int


@dataclass(frozen=True)
class Folded:
    """The stage call, its program (a constant to register as ``name``) and its scratch."""

    call: Node
    name: str
    program: torch.Tensor
    scratch_bytes: int
    #: how far below the input's first byte the output may start (``ops.stage.lead``)
    lead: int
    #: the program's steps (the kernel calls the stage makes)
    steps: int


def _nbytes(node: Node) -> int:
    value = node.meta["val"]
    value = value[0] if isinstance(value, list | tuple) else value
    return int(value.nbytes)


def _sizes(node: Node) -> tuple[int, ...]:
    value = node.meta["val"]
    return tuple((value[0] if isinstance(value, list | tuple) else value).shape)


def _places(created: list[Node], entry: Node, result: Node) -> dict[Node, Place]:
    """Every stage tensor's bytes: parts and results placed backwards from the assembles that
    hold them, then windows and views forwards from their bases."""
    place: dict[Node, Place] = {entry: Place(INPUT, 0), result: Place(OUTPUT, 0)}
    for node in reversed(created):
        if node.target is ASSEMBLE:
            at = place.setdefault(node, Place(node, 0))
            for part in node.args[0]:
                place[part] = at
                at = Place(at.key, at.offset + _nbytes(part))
        held = place.get(node)
        if held is None:
            continue
        source = node.args[0] if node.target in (VIEW, operator.getitem) else None
        if isinstance(source, Node) and source in created and len(source.users) == 1:
            place[source] = held  # a call's result through its getitem or view back to 4-D
    for node in created:
        if node in place:
            continue
        base = node.args[0] if node.target in (VIEW, WINDOW, operator.getitem) else None
        if isinstance(base, Node) and base in place:
            at = place[base]
            if node.target is WINDOW:
                row_bytes = _nbytes(base) // shape(base)[1]
                at = Place(at.key, at.offset + node.args[1] * row_bytes)
            place[node] = at
        else:
            place[node] = Place(node, 0)  # a buffer of its own
    return _share_halo(created, place)


def _share_halo(created: list[Node], place: dict[Node, Place]) -> dict[Node, Place]:
    """A strip buffer that starts with rows copied from the previous buffer of its tensor
    takes that buffer's bytes: the copy moves the kept rows down in place (``memmove``; the
    rows it overwrites are no longer read) and the call writes its rows after them. So a
    tensor's strip buffers are one region, instead of two at every copy."""
    region: dict[Key, Key] = {}

    def root(key: Key) -> Key:
        while key in region:
            key = region[key]
        return key

    for node in created:
        first = node.args[0][0] if node.target is ASSEMBLE else None
        if not isinstance(first, Node) or first.target is not STRIDED_COPY:
            continue
        source, at = place[first.args[0]], place[node]
        if source.key in (INPUT, OUTPUT) or at.key in (INPUT, OUTPUT) or at.offset:
            continue
        if root(source.key) != root(at.key):
            region[root(at.key)] = root(source.key)
    return {node: Place(root(at.key), at.offset) for node, at in place.items()}


class _Program:
    """The steps being written, the regions they touch and when."""

    def __init__(self, place: dict[Node, Place]) -> None:
        self.place = place
        self.constants: list[Node] = []
        self.steps: list[tuple[str, list[object], Place, tuple[int, ...], Place | None]] = []
        self.sizes: dict[Key, int] = {}
        self.lives: dict[Key, list[int]] = {}

    def touch(self, at: Place, nbytes: int) -> None:
        if at.key in (INPUT, OUTPUT):
            return
        self.sizes[at.key] = max(self.sizes.get(at.key, 0), at.offset + nbytes)
        span = self.lives.setdefault(at.key, [len(self.steps), len(self.steps)])
        span[1] = len(self.steps)

    def argument(self, value: object) -> object:
        if not isinstance(value, Node):
            return value
        if value.op == "get_attr":
            if value not in self.constants:
                self.constants.append(value)
            return Constant(self.constants.index(value))
        self.touch(self.place[value], _nbytes(value))
        return (self.place[value], _sizes(value))

    def add(self, call: Node, out: Node) -> None:
        name = STEPS[call.target]
        arguments = [self.argument(a) for a in call.args]
        self.touch(self.place[out], _nbytes(out))
        scratch = None
        if name in WITH_SCRATCH:
            scratch = Place(("scratch", len(self.steps)), 0)
            if int(call.args[-1]):
                self.touch(scratch, int(call.args[-1]))
        sizes = _sizes(out)
        if name == "strided_copy" and _contiguous(arguments[1], arguments[2]):
            (at, _), count = arguments[0], math.prod(arguments[1])  # type: ignore[misc]
            source = Place(at.key, at.offset + arguments[3])
            if source == self.place[out]:
                return  # the kept rows are where the buffer starts already
            arguments = [(source, (count,)), [count], [1], 0]
            sizes = (count,)  # the rows as one run of bytes: one memmove
        self.steps.append((name, arguments, self.place[out], sizes, scratch))


def _contiguous(sizes: object, strides: object) -> bool:
    """Whether a strided copy reads its elements one after another (a halo's rows; a dim of
    one element moves nowhere, whatever its stride)."""
    if not isinstance(sizes, list) or not isinstance(strides, list):
        return False
    expected = [math.prod(sizes[k + 1 :]) for k in range(len(sizes))]
    return all(n == 1 or a == b for n, a, b in zip(sizes, strides, expected, strict=True))


def _offsets(sizes: dict[Key, int], lives: dict[Key, list[int]]) -> tuple[dict[Key, int], int]:
    """Each region's offset in the scratch tensor and the scratch's bytes: regions placed one
    by one at the lowest aligned gap free over their lifetime, in whichever of a few orders
    (largest first; longest-lived first; first used first) needs the fewest bytes."""
    orders = (
        lambda k: (-sizes[k],),
        lambda k: (lives[k][0] - lives[k][1], -sizes[k]),
        lambda k: (lives[k][0], -sizes[k]),
    )
    return min(
        (_placed(sorted(sizes, key=order), sizes, lives) for order in orders),
        key=lambda placed: placed[1],
    )


def _placed(
    keys: list[Key], sizes: dict[Key, int], lives: dict[Key, list[int]]
) -> tuple[dict[Key, int], int]:
    offsets: dict[Key, int] = {}
    for key in keys:
        first, last = lives[key]
        taken = sorted(
            (offsets[k], offsets[k] + aligned(sizes[k]))
            for k in offsets
            if lives[k][0] <= last and first <= lives[k][1]
        )
        at = 0
        for start, end in taken:
            if at + aligned(sizes[key]) <= start:
                break
            at = max(at, end)
        offsets[key] = at
    return offsets, max((offsets[k] + aligned(sizes[k]) for k in offsets), default=0)


def fold(graph: Graph, created: list[Node], entry: Node, result: Node, name: str) -> Folded:
    """Replace the stage's nodes ``created`` (in graph order; ``result`` the stage's output,
    read by the rest of the network) by one ``stage`` call reading ``entry``."""
    program = _Program(_places(created, entry, result))
    for node in created:
        if node.target in STEPS:
            out = node
            if isinstance(node.meta["val"], list | tuple):
                out = next(u for u in node.users if u.args[1] == 0)
            program.add(node, out)
    offsets, scratch_bytes = _offsets(program.sizes, program.lives)

    def view(at: Place, sizes: tuple[int, ...]) -> View:
        if at.key in (INPUT, OUTPUT):
            return View(at.key, at.offset, sizes)  # type: ignore[arg-type]
        return View(SCRATCH, offsets.get(at.key, 0) + at.offset, sizes)

    steps = []
    for op, arguments, out, sizes, scratch in program.steps:
        encoded: list[Argument] = []
        for kind, argument in zip(kinds(op), arguments, strict=True):
            if kind == "Tensor" and isinstance(argument, tuple):
                encoded.append(view(*argument))
            else:
                encoded.append(argument)  # type: ignore[arg-type]
        given = None
        if scratch is not None:
            given = view(scratch, (program.sizes.get(scratch.key, 0),))
        steps.append(Step(op, tuple(encoded), view(out, sizes), given))
    words = torch.tensor(encode(steps), dtype=torch.int32)
    reach = lead(steps)
    out_shape = list(_sizes(result))
    with graph.inserting_before(created[0]):
        constant = graph.get_attr(name)
        constant.meta["val"] = words
        call = graph.call_function(
            OPS.stage.default,
            (entry, list(program.constants), constant, out_shape, scratch_bytes),
        )
        value = result.meta["val"]
        call.meta["val"] = (value, value.new_empty((scratch_bytes,), dtype=torch.int8))
        call.meta[STAGE_LEAD] = reach
        got = graph.call_function(operator.getitem, (call, 0))
        got.meta["val"] = value
    result.replace_all_uses_with(got)
    for node in reversed(created):
        graph.erase_node(node)
    return Folded(call, name, words, scratch_bytes, reach, len(steps))


def shared_bytes(folded: Folded, input_bytes: int) -> int:
    """The most bytes the stage's output can share with its input (it may start its lead
    below the input's first byte or anywhere lower), aligned as the planner aligns."""
    out_bytes = int(folded.call.meta["val"][0].nbytes)
    start = -(-folded.lead // ALIGNMENT) * -ALIGNMENT  # the output's offset from the input's
    start = min(start, max(0, input_bytes - out_bytes) // ALIGNMENT * ALIGNMENT)
    return max(0, min(start + out_bytes, input_bytes) - max(start, 0))
