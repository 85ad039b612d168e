"""Does the model fit? Flash must hold the ``.pte`` and the runtime's code, RAM the planned
arena and the runtime's own structures; checked before anything is written or built.

The runtime's code size and RAM are estimates (said so wherever they are shown); the
``.pte`` and the arena are exact. ``cortex-m-compile inspect app.elf`` measures a built
image.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.plan.boards import BOARDS, Board, Region, find_board, format_size, parse_size

KIB = 1024
#: ExecuTorch's core runtime and kernel registration, measured for the peer's runtime on
#: Cortex-M55 (-O3): core ≈ 51 KB, registration ≈ 12 KB.
RUNTIME_CODE_BYTES = 64 * KIB
#: One cortex_m_nn kernel and the CMSIS-NN functions it calls (the peer's 18 kernels and
#: their CMSIS-NN code measured ≈ 3.2 KB each).
OPERATOR_CODE_BYTES = 4 * KIB


def code_bytes_estimate(operators: int) -> int:
    return RUNTIME_CODE_BYTES + OPERATOR_CODE_BYTES * operators


@dataclass(frozen=True)
class Budget:
    """The memories a model must fit: a board's default regions or explicit sizes."""

    where: str
    flash: Region | None
    ram: Region | None
    board: Board | None = None


def budget(
    board: str | None,
    flash: str | None,
    ram: str | None,
    flash_name: str = "--flash",
    ram_name: str = "--ram",
) -> Budget | None:
    """From ``--board``, ``--flash`` and ``--ram`` (explicit sizes override the board's;
    ``flash_name``/``ram_name`` name those memories in messages)."""
    if board is None and flash is None and ram is None:
        return None
    found = find_board(board) if board is not None else None
    flash_region = Region(flash_name, parse_size(flash)) if flash is not None else None
    ram_region = Region(ram_name, parse_size(ram)) if ram is not None else None
    if found is not None:
        flash_region = flash_region or found.region(found.flash)
        ram_region = ram_region or found.region(found.ram)
        where = found.name
    else:
        where = "the given memory"
    return Budget(where, flash_region, ram_region, found)


def _need(role: str, region: Region, parts: list[tuple[str, int, str | None]]) -> dict[str, Any]:
    """What ``region`` must hold: ``parts`` are (report key, bytes, text or None if not shown)."""
    needed = sum(size for _, size, _ in parts)
    return {
        "role": role,
        "region": f"{region.name} {format_size(region.size)}",
        "size_bytes": region.size,
        "needed_bytes": needed,
        "share": needed / region.size if region.size else float("inf"),
        "fits": needed <= region.size,
        "what": " + ".join(text for _, _, text in parts if text),
        **{key: size for key, size, _ in parts},
    }


def _other_regions(board: Board | None, role: str, used: Region, needed: int) -> list[str]:
    """Regions of the board that could take the model or the arena instead.

    An arena needs RAM. A model needs a memory the image can be loaded into: another
    non-volatile one when the board keeps its image in flash or MRAM, otherwise (ITCM or
    SRAM that the debugger or emulator loads) any other large enough region, DDR included.
    """
    if board is None:
        return []
    return [
        f"{r.name} ({format_size(r.size)})"
        for r in board.regions
        if r.name != used.name
        and r.size >= needed
        and (r.volatile if role == "ram" else r.volatile == used.volatile)
    ]


def _boards_with(role: str, needed: int, exclude: Board | None) -> list[str]:
    return [
        f"{b.name} ({format_size(b.region(getattr(b, role)).size)})"
        for b in BOARDS
        if b is not exclude and b.region(getattr(b, role)).size >= needed
    ][:3]


def _fix(role: str, check: dict[str, Any], budget: Budget) -> str:
    what = "the model (.pte)" if role == "flash" else "the arena"
    regions = _other_regions(budget.board, role, _region(budget, role), check["needed_bytes"])
    if regions:
        return f"place {what} in {' or '.join(regions)}"
    boards = _boards_with(role, check["needed_bytes"], budget.board)
    if boards:
        memory = "flash" if role == "flash" else "RAM"
        return f"choose a board with more {memory}, e.g. {', '.join(boards)}"
    return "make the model smaller (fewer or narrower layers)"


def _region(budget: Budget, role: str) -> Region:
    return budget.flash if role == "flash" else budget.ram


def check(
    budget: Budget,
    pte_bytes: int,
    operators: int,
    arena_bytes: int,
    overhead_bytes: int,
    *,
    code_with_model: bool = True,
    runtime_with_arena: bool = True,
    note: str = "",
) -> dict[str, Any]:
    """The fit report (``fits`` and, when it does not, a one-line ``error`` naming the fix,
    and ``note``).

    ``code_with_model=False``: the model has its memory to itself (placed apart from the
    image's code), so only the ``.pte`` counts there; ``runtime_with_arena=False`` likewise
    for the arena and the runtime's own RAM.
    """
    report: dict[str, Any] = {"where": budget.where, "flash": None, "ram": None}
    if budget.flash is not None:
        code = code_bytes_estimate(operators) if code_with_model else 0
        estimate = (
            f"runtime code ≈ {code:,} B (estimate: {RUNTIME_CODE_BYTES // KIB} KiB + "
            f"{OPERATOR_CODE_BYTES // KIB} KiB × {operators} operators)"
        )
        report["flash"] = _need(
            "flash",
            budget.flash,
            [
                ("pte_bytes", pte_bytes, f".pte {pte_bytes:,} B"),
                ("code_bytes_estimate", code, estimate if code_with_model else None),
            ],
        )
    if budget.ram is not None:
        overhead = overhead_bytes if runtime_with_arena else 0
        runtime = f"runtime ≈ {overhead_bytes:,} B (estimate)" if runtime_with_arena else None
        report["ram"] = _need(
            "RAM",
            budget.ram,
            [
                ("arena_bytes", arena_bytes, f"arena {arena_bytes:,} B"),
                ("runtime_overhead_bytes", overhead, runtime),
            ],
        )
    problems = []
    for role in ("flash", "ram"):
        found = report[role]
        if found is not None and not found["fits"]:
            problems.append(
                f"{found['role']} {found['region']} < {found['needed_bytes']:,} B needed "
                f"({found['what']}); {_fix(role, found, budget)}"
            )
    report["fits"] = not problems
    error = f"the model does not fit {budget.where}: " + "; and ".join(problems)
    error += f"; {note}" if note else ""
    report["error"] = f"{error}; nothing written" if problems else None
    return report


def require_fit(report: dict[str, Any]) -> None:
    if not report["fits"]:
        raise CompileError(report["error"])
