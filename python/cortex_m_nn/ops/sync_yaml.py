"""Rewrite ``operators.yaml`` from the operators Python defines: a developer step, run as
``python -m cortex_m_nn.ops.sync_yaml`` after changing a schema (bump ``version`` by hand).

It lives apart from ``cortex_m_nn.core.operators`` because it needs the operators, and the
operators need the kernel ABI, which reads the version from ``core.operators``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import cortex_m_nn.ops  # noqa: F401  (defines the operators)
from cortex_m_nn.core.operators import load_yaml, yaml_path
from cortex_m_nn.ops.library import SCHEMAS


def sync_yaml(path: Path | None = None) -> None:
    """Rewrite the operator list from the operators Python defines (a developer step; the
    header comment, ``version`` and each operator's ``prepared:``, ``cases:`` and
    ``prepared_cases:`` stay: bump the version by hand when a schema changes)."""
    path = path or yaml_path()
    text = path.read_text()
    head = text[: text.index("operators:")]
    kept = {operator.name: operator for operator in load_yaml(path)[1]}
    entries = []
    for name in sorted(SCHEMAS):
        entries.append(f"- func: {getattr(torch.ops.cortex_m_nn, name).out._schema}")
        if name in kept and kept[name].prepared:
            entries.append(f"  prepared: {kept[name].prepared}")
        if name in kept and kept[name].cases:
            entries.append("  cases:")
            for case in kept[name].cases:
                when = ", ".join(f"{argument}: {expected}" for argument, expected in case.when)
                entries.append(f"    {case.name}: {{{when}}}")
        if name in kept and kept[name].prepared_cases:
            entries.append(f"  prepared_cases: [{', '.join(kept[name].prepared_cases)}]")
    path.write_text(head + "operators:\n" + "\n".join(entries) + "\n")


if __name__ == "__main__":
    sync_yaml(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
