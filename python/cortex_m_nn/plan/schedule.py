"""The ``small`` schedule's search for the program needing the least RAM (its arena and
ExecuTorch's method allocator), given a fully lowered graph and a way to plan one:

1. **Paths** (``plan.paths``): 1x1 convolutions off MVE run row by row, so their outputs may
   take their inputs' consumed rows; on MVE 3x3 depthwise calls run our kernel with no
   buffer, where the wrapper's takes 4,464 bytes.
2. **Stages** (``plan.patch``): the first layers in strips, the few best candidates by their
   estimate, each planned in full; the least RAM is kept.
3. **Relax**: the paths that save RAM at a cost in instructions go back to the wrapper's
   wherever the kept program's arena does not need them (a stage's depthwise steps on MVE,
   ``patch.relax``; row-by-row 1x1 convolutions, and depthwise calls where the cost model
   expects the wrapper faster than our kernel, ``paths.relaxable``), planned again and kept
   if the program needs no more RAM — or, given a RAM budget (``--memory auto`` with
   ``--ram``/``--board``), no more than the budget.

``pipeline.to_program`` runs it with its serialiser; the report reads the kept program's
paths and stage from its memory plan. The ``fast`` schedule (:func:`fastest_program`) gives
our kernels the calls where the cost model expects them faster, then the room the first plan's
arena leaves them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from torch.fx import GraphModule

from cortex_m_nn.core.target import Isa, Target
from cortex_m_nn.plan import patch, paths
from cortex_m_nn.plan.memory_plan import MemoryPlan


class Planned(Protocol):
    """A serialised program with its memory plan read back."""

    memory: MemoryPlan


P = TypeVar("P", bound=Planned)


def fastest_program(graph: GraphModule, target: Target, plan: Callable[[GraphModule], P]) -> P:
    """The program of ``graph`` (its values propagated) with our kernels where the cost model
    expects them faster (``paths.fastest``), each buffer no larger than the wrapper's scratch;
    then planned again with the room the first plan's arena leaves each call (a taller tile,
    or our kernel where only a buffer makes it faster), kept if its arena is no larger."""
    paths.reset(graph, target)
    paths.fastest(graph, target)
    program = plan(graph)
    first = paths.state(graph)
    paths.reset(graph, target)
    paths.fastest(graph, target, arena=program.memory.arena_bytes)
    if paths.state(graph) == first:
        return program
    wider = plan(graph)
    if wider.memory.arena_bytes <= program.memory.arena_bytes:
        return wider
    paths.restore(graph, first, target)
    return program


def smallest(
    graph: GraphModule,
    target: Target,
    plan: Callable[[GraphModule], P],
    ram: Callable[[P], int],
    budget: int | None = None,
) -> P:
    """The program of ``graph`` (its values propagated) needing the least RAM, or with
    ``budget`` (bytes of RAM it may take) the one that fits it with the fewest RAM-saving
    paths: ``plan`` serialises a graph and ``ram`` counts a program's RAM.

    On MVE the search runs twice, with and without our depthwise kernel as a RAM-saving path
    (it takes no buffer, but its output may share a row fewer of its input's bytes), and keeps
    the program needing less RAM; on a tie, or both within the budget, the one with our
    kernel (it is also faster where it stays)."""
    variants = [True, False] if target.isa is Isa.MVE else [False]
    found = []
    for lanes in variants:
        paths.reset(graph, target)
        program = _search(graph, target, plan, ram, budget, lanes)
        found.append((program, paths.state(graph)))
    fits = [f for f in found if budget is not None and ram(f[0]) <= budget]
    program, state = fits[0] if fits else min(found, key=lambda f: ram(f[0]))
    paths.restore(graph, state, target)
    return program


def _search(
    graph: GraphModule,
    target: Target,
    plan: Callable[[GraphModule], P],
    ram: Callable[[P], int],
    budget: int | None,
    lanes: bool,
) -> P:
    """Steps 1 to 3, with or without our depthwise kernel as a path (``lanes``)."""
    paths.choose(graph, target, lanes)
    layered = plan(graph)
    best, chosen = layered, None
    after = [layered.memory.overlapped_bytes(k) for k in range(len(layered.memory.operators))]
    for candidate in patch.candidates(graph, target, after=after):
        striped = plan(candidate.graph)  # type: ignore[arg-type]
        if ram(striped) < ram(best):
            best, chosen = striped, candidate
    best, chosen = _relaxed(graph, target, plan, ram, best, chosen, budget)
    if chosen is not None:  # the graph as the program runs it, stage aside
        paths.follow(graph, chosen.graph, target)  # type: ignore[arg-type]
    best.memory.paths = paths.summary(graph)
    if chosen is not None:
        best.memory.stage = patch.describe(chosen, layered.memory.arena_bytes)
        best.memory.stage |= {"ram_bytes": ram(best), "ram_without_bytes": ram(layered)}
    return best


def _relaxed(
    graph: GraphModule,
    target: Target,
    plan: Callable[[GraphModule], P],
    ram: Callable[[P], int],
    best: P,
    chosen: patch.Choice | None,
    budget: int | None,
) -> tuple[P, patch.Choice | None]:
    """Step 3: ``best`` (running ``chosen``'s stage, if any) with the paths its arena does not
    need back on the wrapper's, if that needs no more RAM than it or ``budget``."""
    allowed = max(ram(best), budget or 0)
    arena = best.memory.arena_bytes + allowed - ram(best)  # the method allocator as best's
    relaxed = chosen if chosen is None else patch.relax(graph, chosen, target, arena)
    kept = graph if relaxed is None else relaxed.graph
    undo = paths.relaxable(kept, target, arena)  # type: ignore[arg-type]
    if relaxed is chosen and not undo:
        return best, chosen
    before = [(call, int(call.args[-2]), int(call.args[-1])) for call in undo]
    for call in undo:
        paths.set_wrapper(call, target)
    trial = plan(kept)  # type: ignore[arg-type]
    if ram(trial) <= allowed:
        return trial, relaxed
    for call, path, scratch in before:  # the graph's own calls (no stage kept): as they were
        paths.set_path(call, path, target, scratch)
    return best, chosen
