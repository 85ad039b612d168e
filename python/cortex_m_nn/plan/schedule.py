"""The ``small`` schedule's search for the program needing the least RAM (its arena and
ExecuTorch's method allocator), given a fully lowered graph and a way to plan one:

1. **Paths** (``plan.paths``): 1x1 convolutions off MVE run row by row, so their outputs may
   take their inputs' consumed rows.
2. **Stages** (``plan.patch``): the first layers in strips, the few best candidates by their
   estimate, each planned in full; the least RAM is kept.
3. **Relax**: the paths that save RAM at a cost in instructions go back to the wrapper's
   wherever the kept program's arena does not need them (a stage's depthwise steps on MVE,
   ``patch.relax``; row-by-row 1x1 convolutions, ``paths.relaxable``), planned again and kept
   if the program needs no more RAM — or, given a RAM budget (``--memory auto`` with
   ``--ram``/``--board``), no more than the budget.
4. **Faster**: on MVE the depthwise calls outside a stage take our kernel without a buffer
   where the cost model expects it faster (``paths.fastest``), planned again and kept if the
   program needs no more RAM. (A stage's depthwise steps already run it, ``plan.strips``.)

``pipeline.to_program`` runs it with its serialiser; the report reads the kept program's
paths and stage from its memory plan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from torch.fx import GraphModule

from cortex_m_nn.core.cmsis_nn import ROWS, WRAPPER
from cortex_m_nn.core.target import Target
from cortex_m_nn.plan import patch, paths
from cortex_m_nn.plan.memory_plan import MemoryPlan


class Planned(Protocol):
    """A serialised program with its memory plan read back."""

    memory: MemoryPlan


P = TypeVar("P", bound=Planned)


def smallest(
    graph: GraphModule,
    target: Target,
    plan: Callable[[GraphModule], P],
    ram: Callable[[P], int],
    budget: int | None = None,
) -> P:
    """The program of ``graph`` (its values propagated) needing the least RAM, or with
    ``budget`` (bytes of RAM it may take) the one that fits it with the fewest RAM-saving
    paths: ``plan`` serialises a graph and ``ram`` counts a program's RAM."""
    paths.choose(graph, target)
    layered = plan(graph)
    best, chosen = layered, None
    after = [layered.memory.overlapped_bytes(k) for k in range(len(layered.memory.operators))]
    for candidate in patch.candidates(graph, target, after=after):
        striped = plan(candidate.graph)  # type: ignore[arg-type]
        if ram(striped) < ram(best):
            best, chosen = striped, candidate
    best, chosen = _relaxed(graph, target, plan, ram, best, chosen, budget)
    kept = graph if chosen is None else chosen.graph
    best = _faster(kept, target, plan, ram, best)
    rows = {call.name for call in paths.rows_calls(kept)}  # type: ignore[arg-type]
    for call in paths.rows_calls(graph):  # the graph as the program runs it, stage aside
        if call.name not in rows:
            paths.set_path(call, WRAPPER, target)
    best.memory.paths = paths.summary(graph)
    if chosen is not None:
        best.memory.stage = patch.describe(chosen, layered.memory.arena_bytes)
        best.memory.stage |= {"ram_bytes": ram(best), "ram_without_bytes": ram(layered)}
    return best


def _faster(
    kept: GraphModule,
    target: Target,
    plan: Callable[[GraphModule], P],
    ram: Callable[[P], int],
    best: P,
) -> P:
    """Step 4: ``best`` (the program of ``kept``) with its depthwise calls outside a stage on
    our kernel where the cost model expects it faster and it needs no buffer
    (``paths.fastest``), if that needs no more RAM (its output may then take fewer of its
    input's bytes: a lead of one output row)."""
    given = paths.fastest(kept, target, least=True)
    if not given:
        return best
    trial = plan(kept)
    if ram(trial) <= ram(best):
        return trial
    for call in given:
        paths.set_path(call, WRAPPER, target, paths.depthwise_wrapper_scratch(call, target))
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
    for call in undo:
        paths.set_path(call, WRAPPER, target)
    trial = plan(kept)  # type: ignore[arg-type]
    if ram(trial) <= allowed:
        return trial, relaxed
    for call in undo:  # the graph's own calls (no stage kept): as they were
        paths.set_path(call, ROWS, target)
    return best, chosen
