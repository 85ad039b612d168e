"""The passes after the walk: drop dead code, and say so in the report rows it affects."""

from __future__ import annotations

from torch.fx import GraphModule

from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.records import REMOVED, LoweringResult, OpRecord


def eliminate_dead_code(context: LoweringContext) -> None:
    """Pass: remove lowered nodes nothing reads (e.g. a transpose a later one composed)."""
    context.graph.eliminate_dead_code()


def mark_removed(records: list[OpRecord], alive: set[str]) -> None:
    """Rows of lowered operators whose node is gone: no kernel runs for them."""
    for record in records:  # e.g. a transpose a later one composed, a quantize folded again
        if (
            record.kernel
            and record.kernel.startswith("cortex_m_nn::")
            and (record.output_node not in alive)
        ):
            record.kernel, record.cmsis_function = REMOVED, "(a later operator reads its input)"


def remove_dead_records(context: LoweringContext) -> None:
    """Pass: mark the report rows of operators dead-code elimination removed."""
    mark_removed(context.records, {node.name for node in context.graph.nodes})


def result(context: LoweringContext) -> LoweringResult:
    """The lowered module, its report rows and which source value each lowered node holds."""
    module = GraphModule(context.root, context.graph, class_name="LoweredModule")
    sources = {
        value.node.name: (quantize.name, value.nhwc)
        for quantize, value in context.quantized.items()
        if value.node.graph is context.graph and value.node in module.graph.nodes
    }
    return LoweringResult(
        module, context.records, sources, context.float_sources, context.state_sources
    )
