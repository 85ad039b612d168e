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

How it maps onto ExecuTorch: the stage's calls are repeated once per strip in the graph (the
weights are the same constants), and two operators that move nothing tie strips to tensors:
``window`` (:mod:`cortex_m_nn.ops.window`) makes rows of a tensor a tensor of its own, planned
inside it, and ``assemble`` (:mod:`cortex_m_nn.ops.assemble`) makes parts one tensor, each
planned at its rows (ExecuTorch's ``storage_base``: ``serialize.execution_graph``). The
halo's copies are ``strided_copy`` calls. The memory planner then sees the entry, the exit
and a few strip-sized buffers with short lifetimes.

Which stage: :func:`choose` builds the graph for every end of a stage and a few strip heights
and keeps the one with the smallest live-tensor bound (``plan.liveness``, the rest of the
network included); the compiler serialises the program with and without it and keeps the
smaller arena.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch.fx import Graph, GraphModule

from cortex_m_nn.core.target import Target
from cortex_m_nn.plan.liveness import method_bytes, sweep
from cortex_m_nn.plan.stage import Stage, macs, shape, stages, value_of
from cortex_m_nn.plan.strips import strips_graph


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

    @property
    def ram(self) -> int:
        return self.bound + self.method


#: Rows a strip call computes, tried (fewer rows: less RAM, more calls and copies).
CHUNKS = (1, 2, 4, 8)


def choose(graph_module: GraphModule, target: Target) -> Choice | None:
    """The stage and chunk needing the least RAM — the live-tensor bound (the rest of the
    network's included) plus ExecuTorch's method allocator, which grows with every call —
    if less than layer by layer's."""
    layered = max(sweep(graph_module).live, default=0) + method_bytes(graph_module)
    best: Choice | None = None
    for stage in stages(graph_module):
        floor = stage.entry.meta["val"].nbytes + stage.exit.meta["val"].nbytes
        if best is not None and floor >= best.ram:
            continue
        for chunk in CHUNKS:
            built = strips_graph(graph_module, stage, chunk, target)
            if built is None:
                continue
            graph, macs = built
            live = sweep(graph)
            found = Choice(stage, chunk, graph, max(live.live), macs, len(live.calls))
            found.method = method_bytes(graph)
            if best is None or found.ram < best.ram:
                best = found
    if best is None or best.ram >= layered:
        return None
    best.graph.lint()
    best.graph = GraphModule(graph_module, best.graph)
    return best


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
        "bound_bytes": chosen.bound,
        "method_bytes_estimate": chosen.method,
        "arena_without_bytes": arena_without,
    }
