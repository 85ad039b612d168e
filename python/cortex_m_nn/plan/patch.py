"""Patch-based stages (the ``small`` schedule): the first layers of a network run strip by
strip, so that the large tensors between them never exist whole.

A *stage* (``plan.stage``) is a run of calls at the start of a network — int8 convolutions,
depthwise convolutions, same-shape element-wise ``add``/``mul`` and tables (``lut``) — that
reads one tensor (the *entry*: the graph input, or an earlier call's output) and gives the
rest of the network one tensor (the *exit*). Run in strips, strip ``i`` computes rows
``[a_i, b_i)`` of the exit through every call of the stage, each call on the rows its readers
need (the receptive field, read backwards from the exit). The strips partition the exit's
rows. Rows a strip shares with the previous one (the halo) are copied from the previous
strip's buffer, not computed again (``plan.strips``), so every row of every tensor is computed once.

Bit exact with layer-by-layer execution: every strip's call is the same CMSIS-NN call on a
strip of rows, with the same weights and requantization; a strip pads with the zero point only
where the layer-by-layer call does, at the image's top and bottom border (its top pad is the
call's own where the strip starts at row 0, else 0; its bottom pad is what the output rows
make CMSIS-NN read past the strip's last row: the call's own bottom pad or 0). Every output
element is computed from exactly the input elements and pads it is computed from layer by
layer.

How it maps onto ExecuTorch: the strips are written as graph nodes (``plan.strips``: the
stage's calls once per strip, ``window``s and ``assemble``s tying strips to tensors, the halo's
``strided_copy``s), then folded into one ``cortex_m_nn::stage`` call whose program lists those
calls on views of its input, output and scratch (``plan.fold``, ``ops.stage``). The memory
planner then sees the entry, the exit (which may take the entry's consumed bytes) and the
stage's scratch.

Which stage: :func:`candidates` builds the folded graph for every end of a stage and a few
strip heights and ranks them by live-tensor bound plus method allocator (``plan.liveness``,
the rest of the network included); the compiler plans the best few in full and keeps the one
needing the least RAM, if less than without a stage.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch
from torch.fx import Graph, GraphModule

from cortex_m_nn.core.cmsis_nn import WRAPPER, Case, cmsis_function
from cortex_m_nn.core.target import Isa, Target
from cortex_m_nn.ops.stage import decode
from cortex_m_nn.plan import paths
from cortex_m_nn.plan.fold import fold, shared_bytes
from cortex_m_nn.plan.liveness import method_bytes, sweep
from cortex_m_nn.plan.stage import Stage, macs, shape, stages, value_of
from cortex_m_nn.plan.strips import Strips, strips_graph


@dataclass
class Choice:
    """A stage run in strips of ``chunk`` rows a call: the graph that does it, its live-tensor
    bound, its kernel calls and its stage's MACs."""

    stage: Stage
    chunk: int
    graph: Graph | GraphModule
    bound: int
    macs: int
    calls: int
    #: about what ExecuTorch's method allocator takes for it (``liveness.method_bytes``)
    method: int = 0
    #: the stage call's program (``ops.stage``)
    program: torch.Tensor | None = None
    #: the bound's bytes up to the stage call, and for the calls after it (``after``)
    head: int = 0
    rest: int = 0

    @property
    def ram(self) -> int:
        return self.bound + self.method


#: The stage program's constant.
PROGRAM = "stage_program"
#: Candidates the compiler plans in full (``candidates``).
KEEP = 8
DEPTHWISE = torch.ops.cortex_m_nn.depthwise_conv2d.default
#: The stage's step operators that take a ``path``.
CONVOLUTION_STEPS = ("conv2d", "depthwise_conv2d")
#: Rows a strip call computes, tried (fewer rows: less RAM, more calls and copies).
CHUNKS = (1, 2, 4, 8)


def choose(graph_module: GraphModule, target: Target) -> Choice | None:
    """The stage and chunk that :func:`candidates` ranks first, or None."""
    found = candidates(graph_module, target, keep=1)
    return found[0] if found else None


def candidates(
    graph_module: GraphModule, target: Target, keep: int = KEEP, after: list[int] | None = None
) -> list[Choice]:
    """The ``keep`` stages and chunks needing the least RAM — the live-tensor bound up to the
    stage call (its output over its consumed input where its lead allows), the rest of the
    network's after it, plus ExecuTorch's method allocator — of those needing less than layer
    by layer, best first. ``after``: the bytes each call of the graph needs without a stage,
    its overlaps counted (``MemoryPlan.overlapped_bytes``), read for the calls after a stage;
    without it their live-tensor bound, which leaves overlaps out.
    The compiler plans each candidate and keeps the smallest."""
    swept = sweep(graph_module)
    layered = max(swept.live, default=0) + method_bytes(graph_module)
    if after is None or len(after) != len(swept.calls):
        after = swept.live
    found: list[Choice] = []
    for stage in stages(graph_module):
        rest = max(after[swept.calls.index(stage.calls[-1]) + 1 :], default=0)
        floor = max(stage.entry.meta["val"].nbytes, stage.exit.meta["val"].nbytes)
        if len(found) >= keep and floor >= sorted(c.ram for c in found)[keep - 1]:
            continue
        for chunk in CHUNKS:
            built = strips_graph(graph_module, stage, chunk, target)
            if built is not None:
                found.append(_measure(stage, chunk, built, rest))
    kept = sorted((c for c in found if c.ram < layered), key=lambda c: c.ram)[:keep]
    for choice in kept:
        _as_module(graph_module, choice)
    return kept


def _as_module(graph_module: GraphModule, choice: Choice) -> None:
    """The choice's graph as a module over ``graph_module``'s constants and its program."""
    graph = choice.graph if isinstance(choice.graph, Graph) else choice.graph.graph
    graph.lint()
    constants = {
        n.target: getattr(graph_module, n.target)
        for n in graph.nodes
        if n.op == "get_attr" and n.target != PROGRAM
    }
    choice.graph = GraphModule({**constants, PROGRAM: choice.program}, graph)


def relax(graph_module: GraphModule, chosen: Choice, target: Target, arena: int) -> Choice:
    """``chosen`` with the depthwise calls of its stage on faster paths wherever the stage
    fits ``arena`` with them (``plan.paths``: the least-RAM path of a strip,
    ``arm_depthwise_conv_3x3_s8``, costs about 5 instructions a MAC on MVE): one call at a
    time, most MACs first, each given the fastest path (``paths.faster_paths``) with which the
    stage call's bytes stay within."""
    stage, given, relaxed = chosen.stage, dict[str, int](), chosen
    if target.isa is not Isa.MVE:
        return chosen  # off MVE a strip never leaves the wrapper's path
    for call in sorted(stage.calls, key=lambda c: -macs(c, shape(value_of(c))[1])):
        for path in paths.faster_paths(call, target):
            trial = given | {call.name: path}
            built = strips_graph(graph_module, stage, chosen.chunk, target, trial)
            if built is None:
                continue
            found = _measure(stage, chosen.chunk, built, chosen.rest)
            if found.head <= arena:
                given, relaxed = trial, found
                break
    if relaxed is not chosen:
        _as_module(graph_module, relaxed)
    return relaxed


def _measure(stage: Stage, chunk: int, built: Strips, rest: int) -> Choice:
    """The stage folded into one call, with its bound (``rest`` after the stage call) and
    method allocator estimate."""
    folded = fold(built.graph, built.created, built.entry, built.result, PROGRAM)
    swept = sweep(built.graph)
    at = swept.calls.index(folded.call)
    live = swept.live[: at + 1]
    if len(stage.entry.users) == 1:  # the stage's output may take its consumed input
        live[at] -= shared_bytes(folded, stage.entry.meta["val"].nbytes)
    found = Choice(stage, chunk, built.graph, max([*live, rest]), built.macs, folded.steps)
    found.head, found.rest = max(live), rest
    found.program = folded.program
    found.method = method_bytes(built.graph)
    return found


def describe(chosen: Choice, arena_without: int) -> dict[str, object]:
    """The report's account of a stage run in strips."""
    stage = chosen.stage
    layered = sum(macs(c, shape(value_of(c))[1]) for c in stage.calls)
    return {
        "calls": len(stage.calls),
        "first": stage.calls[0].name,
        "last": stage.calls[-1].name,
        "exit_shape": list(shape(stage.exit)),
        "rows_per_call": chosen.chunk,
        "kernel_calls": chosen.calls,
        "macs": layered,
        "macs_recomputed": chosen.macs - layered,
        "step_paths": _step_paths(chosen),
        "bound_bytes": chosen.bound,
        "method_bytes_estimate": chosen.method,
        "arena_without_bytes": arena_without,
    }


def _step_paths(chosen: Choice) -> dict[str, int]:
    """CMSIS-NN function → the stage's steps that run it instead of the wrapper's choice."""
    found: Counter[str] = Counter()
    assert chosen.program is not None
    for step in decode(chosen.program.tolist()):
        path = step.arguments[-2] if step.operator in CONVOLUTION_STEPS else WRAPPER
        if path != WRAPPER:  # the argument before scratch_bytes
            found[cmsis_function(step.operator, Case.S8, int(path))] += 1  # type: ignore[arg-type]
    return dict(found)
