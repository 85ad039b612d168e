"""What the benchmarks on emulated cores share: reading the insncount QEMU plugin's output
(benchmarks/qemu/plugin) and the function symbols a static library defines (to attribute the
plugin's per-function counts to CMSIS-NN, say). Used by bench_target.py and both peers."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path


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
