"""Where each planned tensor goes: the algorithms ExecuTorch's memory planning pass runs.

ExecuTorch's pass hands a planning algorithm every planned tensor's spec (size, lifetime) and
keeps the offsets it returns. ``memory_planning_pass`` runs several and keeps the smallest
arena (``SmallestOfSuite``): ExecuTorch's ``greedy``, :func:`best_offset`, and for the
``small`` schedule :func:`overlapping`, which lets an output take its dead input's bytes
(``plan.overlap``). ``memory_plan`` reads the result back and checks it.
"""

from __future__ import annotations

from typing import Any

from executorch.exir.memory_planning import (
    MemoryAlgoResult,
    MemoryPlanningAlgorithmSuite,
    SpecAllocResult,
    greedy,
)
from executorch.exir.passes import MemoryPlanningPass
from torch.fx import GraphModule

from cortex_m_nn.core.target import Isa
from cortex_m_nn.plan import overlap


def best_offset(
    alignment: int,
    specs: Any,
    graph_module: GraphModule,
    graph_signature: Any,
    extra_padding: int = 0,
    leads: dict[tuple[int, int], int] | None = None,
    in_order: bool = False,
) -> MemoryAlgoResult:
    """Greedy by size with free offsets: the largest tensors first, each at the lowest offset
    that no already placed tensor with an overlapping lifetime occupies.

    ExecuTorch's ``greedy`` packs tensors into fixed shared objects; placing at any free
    offset lets small tensors fill the gaps beside large ones. A storage-backed spec goes
    inside its base (:func:`_inside`). Graphs with preplanned input buffers are planned by
    ``greedy``.

    ``leads``: (id of an output's spec, id of its input's spec) → lead (``plan.overlap``): that
    output may also start ``lead`` bytes below its input or lower, sharing the input's bytes.
    ``in_order``: place tensors in the order they come to life (then largest first) instead,
    which lets an output take its input's bytes before a later, larger tensor claims them.
    """
    specs = list(specs)
    if getattr(graph_module, "input_mem_buffer_sizes", None):
        return greedy(alignment, specs, graph_module, graph_signature, extra_padding)
    for spec in specs:
        spec.realign(alignment)
    backed = [s for s in specs if s.storage_base is not None]
    specs = [s for s in specs if s.storage_base is None]
    leads = leads or {}
    if in_order:
        ordered = sorted(specs, key=lambda s: (s.lifetime[0], -s.allocated_memory, s.lifetime[1]))
    else:
        ordered = sorted(specs, key=lambda s: (-s.allocated_memory, s.lifetime[0], s.lifetime[1]))
    placed: dict[int, list[tuple[Any, int]]] = {}
    result = MemoryAlgoResult({}, [])
    for spec in ordered:
        memory_id = spec.mem_id if spec.mem_id is not None else 1
        start, stop = spec.lifetime
        forbidden = [
            _forbidden(spec, other, offset, leads)
            for other, offset in placed.setdefault(memory_id, [])
            if other.lifetime[0] <= stop and start <= other.lifetime[1]
        ]
        if leads:
            offset = _least_extent(forbidden, spec.allocated_memory, placed[memory_id])
        else:
            offset = _lowest_allowed(forbidden)
        placed[memory_id].append((spec, offset))
    sizes = [0] * (max(placed, default=1) + 1)
    for memory_id, spans in placed.items():
        base = min((offset for _, offset in spans), default=0)  # < 0 only with leads
        for other, offset in spans:
            result.spec_dict[other] = SpecAllocResult(memory_id, 0, offset - base)
        ends = (offset - base + other.allocated_memory for other, offset in spans)
        sizes[memory_id] = max(ends, default=0) + extra_padding
    for spec in backed:
        result.spec_dict[spec] = _inside(spec, result.spec_dict)
    result.bufsizes = sizes
    return result


def _inside(spec: Any, placed: dict[Any, SpecAllocResult]) -> SpecAllocResult:
    """Where a storage-backed spec (a ``window``, an ``assemble``'s strip: ``plan.patch``)
    goes: its base's offset plus its own (ExecuTorch extended the base's lifetime over it)."""
    offset = spec.storage_base_offset
    base = spec.storage_base
    while base.storage_base is not None:
        offset += base.storage_base_offset
        base = base.storage_base
    return SpecAllocResult(placed[base].mem_id, 0, placed[base].mem_offset + offset)


def _forbidden(
    spec: Any, other: Any, offset: int, leads: dict[tuple[int, int], int]
) -> tuple[int, int]:
    """The open interval of offsets ``spec`` may not take beside ``other`` at ``offset``."""
    if (id(spec), id(other)) in leads:  # spec is the output, other its input
        return offset - leads[id(spec), id(other)], offset + other.allocated_memory
    if (id(other), id(spec)) in leads:  # spec is the input, other its output
        return offset - spec.allocated_memory, offset + leads[id(other), id(spec)]
    return offset - spec.allocated_memory, offset + other.allocated_memory


def _least_extent(
    forbidden: list[tuple[int, int]], size: int, placed: list[tuple[Any, int]]
) -> int:
    """With overlaps the arena's start may move down: among the offsets just beside the
    forbidden intervals (and 0), the allowed one that keeps the placed tensors' span smallest
    (then the one nearest 0). An output whose lead lets it start below its input can only
    take the input's bytes if the plan may grow downwards."""
    low = min((offset for _, offset in placed), default=0)
    high = max((offset + other.allocated_memory for other, offset in placed), default=0)
    candidates = {0, *(h for _, h in forbidden), *(lo for lo, _ in forbidden)}
    allowed = [c for c in candidates if not any(lo < c < h for lo, h in forbidden)]
    return min(allowed, key=lambda c: (max(high, c + size) - min(low, c), abs(c), c))


def _lowest_allowed(forbidden: list[tuple[int, int]]) -> int:
    """The lowest offset >= 0 inside none of the open intervals."""
    offset, moved = 0, True
    while moved:
        moved = False
        for low, high in forbidden:
            if low < offset < high:
                offset, moved = high, True
    return offset


def overlapping(isa: Isa, in_order: bool = False) -> Any:
    """``best_offset`` where the calls' outputs may take their dead inputs' bytes
    (``plan.overlap``): the ``small`` schedule's planners for a program of ``isa`` (largest
    first, or ``in_order``)."""

    def overlapping(alignment, specs, graph_module, graph_signature, extra_padding=0):
        leads = {
            (id(o.output.meta["spec"]), id(o.input.meta["spec"])): o.lead
            for o in overlap.overlaps(graph_module, isa)
        }
        return best_offset(
            alignment, specs, graph_module, graph_signature, extra_padding, leads, in_order
        )

    if in_order:
        overlapping.__name__ = "overlapping_in_order"
    return overlapping


class SmallestOfSuite(MemoryPlanningAlgorithmSuite):
    """ExecuTorch's suite (runs each algorithm, keeps the smallest), remembering the winner."""

    chosen: str | None = None

    def __call__(self, alignment, specs, graph_module, graph_signature, extra_padding):
        results = {
            algorithm.__name__: algorithm(
                alignment, specs, graph_module, graph_signature, extra_padding
            )
            for algorithm in self.algo_list
        }
        self.chosen = min(results, key=lambda name: sum(results[name].bufsizes))
        for spec, allocation in results[self.chosen].spec_dict.items():
            spec.mem_id = allocation.mem_id
            spec.mem_offset = allocation.mem_offset
            spec.mem_obj_id = allocation.mem_obj_id
        return results[self.chosen].bufsizes


#: The planning algorithms tried on every program; the smaller arena wins (greedy on a tie).
ALGORITHMS = (greedy, best_offset)


def memory_planning_pass(isa: Isa | None = None, schedule: str = "fast") -> MemoryPlanningPass:
    """ExecuTorch's memory planning pass running ExecuTorch's ``greedy`` and ``best_offset``,
    and for the ``small`` schedule also :func:`overlapping` (``isa``: the program's).

    Measured on cortex-m55 (arena bytes; live-tensor bound in brackets): DS-CNN greedy
    20,464, naive 92,704 (20,464); ConvStack greedy 2,448, greedy without overlapping
    allocations 2,896, naive 4,560 (2,160). ``naive`` never reuses memory, so it is not
    tried; ``best_offset`` closes most of greedy's gap on graphs with branches.
    """
    algorithms = list(ALGORITHMS)
    if schedule == "small":
        if isa is None:
            raise ValueError("the small schedule plans for an ISA: pass the program's")
        algorithms += [overlapping(isa), overlapping(isa, in_order=True)]
    return MemoryPlanningPass(memory_planning_algo=SmallestOfSuite(algorithms))
