"""What the benchmarks on emulated cores share: reading the insncount QEMU plugin's output
(benchmarks/qemu/plugin), the function symbols a static library defines (to attribute the
plugin's per-function counts to CMSIS-NN, say), and printing and saving rows of measurements
per (model, core). Used by bench_target.py and both peers."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

Rows = Mapping[tuple[str, str], dict[str, Any]]
"""Measurements per (model, core); a row holding ``error`` says why it has none."""

Column = tuple[str, str, Callable[[dict[str, Any]], Any]]
"""A table column: title, format spec of its values (alignment and width first, e.g. ``>13,``)
and the value of a row (None, shown as ``-``, where there is none)."""


def regions(text: str) -> list[tuple[int, dict[str, int]]]:
    """The plugin's regions in order: (instructions, instructions per function symbol)."""
    found: list[tuple[int, dict[str, int]]] = []
    for line in text.splitlines():
        if m := re.match(r"insncount: region \d+ = (\d+) insns", line):
            found.append((int(m.group(1)), {}))
        elif (m := re.match(r"insncount: symbol (\S+) = (\d+)", line)) and found:
            found[-1][1][m.group(1)] = int(m.group(2))
    return found


def first_region(text: str) -> tuple[int | None, dict[str, int]]:
    """Region 0 (the whole inference): instructions (None: no region) and per function."""
    found = regions(text)
    return found[0] if found else (None, {})


def library_symbols(archive: Path, kinds: str | None = None) -> set[str]:
    """Symbols defined by the static library ``archive`` (only those of nm's ``kinds``, e.g.
    ``"Tt"`` for functions, if given)."""
    listing = subprocess.run(
        ["arm-none-eabi-nm", "--defined-only", str(archive)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {
        parts[2]
        for line in listing.splitlines()
        if len(parts := line.split()) == 3 and (kinds is None or parts[1] in kinds)
    }


def library_functions(archive: Path) -> set[str]:
    """Function symbols (global or local) defined by the static library ``archive``."""
    return library_symbols(archive, "Tt")


def table(rows: Rows, columns: Sequence[Column]) -> str:
    """The rows as a table people read: model, core, then ``columns``; a failed row shows its
    error instead."""

    def cell(spec: str, value: Any) -> str:
        value = "-" if value is None else value
        if isinstance(value, str):
            spec = re.match(r"[<>^]?\d*", spec).group()  # alignment and width only
        return f"{value:{spec}}"

    head = f"{'model':<18}{'core':<5}" + "".join(cell(spec, t) for t, spec, _ in columns)
    lines = [head, "-" * len(head)]
    for (model, core), r in rows.items():
        if "error" in r:
            lines.append(f"{model:<18}{core:<5}error: {r['error']}")
        else:
            values = "".join(cell(spec, value(r)) for _, spec, value in columns)
            lines.append(f"{model:<18}{core:<5}{values}")
    return "\n".join(lines)


def components(rows: Rows) -> str:
    """Flash / RAM of each image by component (a row's ``flash`` and ``ram`` dictionaries)."""
    lines = ["flash / RAM by component (B; RAM = .data + .bss):"]
    for (model, core), r in rows.items():
        if "error" not in r:
            parts = [f"{c} {r['flash'][c]:,} / {r['ram'].get(c, 0):,}" for c in r["flash"]]
            lines.append(f"  {model:<18}{core:<5}" + "; ".join(parts))
    return "\n".join(lines)


def as_json(rows: Rows) -> list[dict[str, Any]]:
    """The rows as a JSON-ready list, each with its ``model`` and ``core``."""
    return [{"model": m, "core": c, **r} for (m, c), r in rows.items()]


def report(rows: Rows, table: str, json_path: Path | None) -> int:
    """Print ``table`` and the components, write the rows to ``json_path`` if given; the exit
    status: 1 if any row failed."""
    print(table + "\n\n" + components(rows))
    if json_path:
        json_path.write_text(json.dumps(as_json(rows), indent=1))
    return 0 if all("error" not in r for r in rows.values()) else 1
