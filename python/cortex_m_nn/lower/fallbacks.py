"""The one line a compile that cannot lower an operator fails with: the first operator, where
it is in the model, why, and the rewrite that fixes it."""

from __future__ import annotations

import re

from cortex_m_nn.core.rewrites import rewrite_for
from cortex_m_nn.lower.records import OpRecord

#: Further fallbacks an unsupported-operator error names after the first.
NAMED_FALLBACKS = 3


def where(record: OpRecord) -> str:
    """``path/model.py:51 in norm (LayerNorm)``, or what the graph knows without a trace."""
    first = record.location.split(", ", 1)[0]
    module = first if re.fullmatch(r"[\w.]+ \([\w.]+\)", first) else ""  # module_of's form
    if record.source_line:
        return record.source_line + (f" in {module}" if module else "")
    return module or f"node {record.name} (no source line recorded)"


def unsupported_message(fallbacks: list[OpRecord]) -> str:
    """One line: the first operator that cannot be lowered, where, why, the nearest rewrite."""
    first, rest = fallbacks[0], fallbacks[1:]
    message = (
        f"{first.source_op} at {where(first)} cannot be lowered: {first.fallback_reason}; "
        f"rewrite: {rewrite_for(first.source_op, first.refusal)}; "
        "or pass --allow-fallback to keep it in fp32"
    )
    if rest:
        named = ", ".join(
            f"{r.source_op} at {r.source_line or r.name}" for r in rest[:NAMED_FALLBACKS]
        )
        others = f", +{len(rest) - NAMED_FALLBACKS}" if len(rest) > NAMED_FALLBACKS else ""
        message += f" ({len(rest)} more: {named}{others})"
    return message
