"""Lower a PT2E-quantized graph (``convert_pt2e`` output) onto ``cortex_m_nn`` operators.

The lowering is the passes of :data:`PASSES`, in order, over one :class:`LoweringContext`:

1. ``find_patterns``: each ``quantize`` node closing ``dequantize → op [→ activation] →
   quantize`` whose op has a rule (``lower/rules``);
2. ``find_read_through``: producers every reader reads through, skipped unless needed;
3. ``walk``: the graph in order; each pattern's rule turns it into one ``cortex_m_nn``
   operator on int8 tensors (4-D activations stored channels-last from the input
   ``quantize`` to the output ``dequantize``: ``lower/layout``); what no rule lowers stays
   float and is reported as a fallback;
4. ``eliminate_dead_code`` and ``remove_dead_records``: graph hygiene and the report rows of
   what it removed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torch.fx import GraphModule

from cortex_m_nn.core.target import Target
from cortex_m_nn.lower import rules
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.hygiene import eliminate_dead_code, remove_dead_records, result
from cortex_m_nn.lower.patterns import Plan, find_patterns, find_read_through
from cortex_m_nn.lower.records import LoweringResult
from cortex_m_nn.lower.walk import walk

#: The rule modules registered (``registry.RULES``): importing ``rules`` registers them.
RULE_MODULES = rules.__all__


@dataclass
class Lowering:
    """What the passes share: the context being built and the plan made before the walk."""

    context: LoweringContext
    plan: Plan = field(default_factory=Plan)


Pass = Callable[[Lowering], None]

#: The lowering, in order; each pass is a function of the shared state that can run alone.
PASSES: tuple[tuple[str, Pass], ...] = (
    ("find patterns", lambda s: find_patterns(s.context.source, s.plan)),
    ("find read-through producers", lambda s: find_read_through(s.context.source, s.plan)),
    ("lower by rule", lambda s: walk(s.context, s.plan)),
    ("eliminate dead code", lambda s: eliminate_dead_code(s.context)),
    ("mark removed records", lambda s: remove_dead_records(s.context)),
)


def lower(converted: GraphModule, target: Target) -> LoweringResult:
    """Lower every pattern a rule supports; everything else stays float (see ``fallbacks``)."""
    state = Lowering(LoweringContext(converted, target))
    for _, run in PASSES:
        run(state)
    return result(state.context)
