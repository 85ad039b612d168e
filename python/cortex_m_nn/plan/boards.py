"""Boards the fit check knows, with their memories, and memory sizes as people write them.

Every number comes from the board's devicetree in Zephyr (zephyrproject-rtos/zephyr); the
file is named beside each board. ``flash`` and ``ram`` name the regions Zephyr's
``zephyr,flash`` and ``zephyr,sram`` choose: where the image (and so the embedded ``.pte``)
and the application's data (and so the arena) go by default. The other regions are where a
model or an arena that does not fit can be placed instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.target import Core

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


#: Regions that keep their contents without power: they hold a model, never an arena.
NON_VOLATILE = frozenset({"FLASH", "MRAM"})


@dataclass(frozen=True)
class Region:
    name: str
    size: int

    @property
    def volatile(self) -> bool:
        return self.name not in NON_VOLATILE


@dataclass(frozen=True)
class Board:
    name: str
    core: Core
    flash: str
    ram: str
    regions: tuple[Region, ...]
    aliases: tuple[str, ...] = ()
    note: str = ""

    def region(self, name: str) -> Region:
        return next(r for r in self.regions if r.name == name)


def _regions(**sizes: int) -> tuple[Region, ...]:
    return tuple(Region(name.upper(), size) for name, size in sizes.items())


def _alif_e8(core: str, dtcm: int, aliases: tuple[str, ...], note: str) -> Board:
    """An M55 core (``rtss_hp``, ``rtss_he``) of the Alif Ensemble E8 DK: the SoC's MRAM,
    SRAM0 and SRAM1 (dts/arm/alif/ensemble/ae822fa0e5597ls0.dtsi), which both cores share, and
    the core's own ITCM and DTCM (dts/arm/alif/ensemble/common/ensemble_<core>.dtsi); flash
    and RAM as boards/alif/ensemble_e8_dk/ensemble_e8_dk_ae822fa0e5597ls0_<core>.dts chooses."""
    return Board(
        f"ensemble_e8_dk/ae822fa0e5597ls0/{core}",
        Core.M55,
        "MRAM",
        "DTCM",
        _regions(mram=5632 * KIB, itcm=256 * KIB, dtcm=dtcm, sram0=4 * MIB, sram1=4 * MIB),
        aliases,
        note,
    )


BOARDS: tuple[Board, ...] = (
    # boards/arm/mps3/mps3_corstone300_an547.dts (ITCM, SRAM, DTCM, ISRAM) and
    # boards/arm/mps3/mps3_common.dtsi (DDR4, 8 x 256 MB); QEMU's mps3-an547 has the same map.
    Board(
        "mps3/corstone300/an547",
        Core.M55,
        "ITCM",
        "DTCM",
        _regions(itcm=512 * KIB, dtcm=512 * KIB, sram=2 * MIB, isram=4 * MIB, ddr4=2 * GIB),
        ("corstone300", "corstone-300", "mps3-an547", "an547"),
        "QEMU mps3-an547",
    ),
    # boards/arm/mps3/mps3_corstone300_fvp.dts and boards/arm/mps3/mps3_common.dtsi
    Board(
        "mps3/corstone300/fvp",
        Core.M55,
        "ITCM",
        "DTCM",
        _regions(itcm=512 * KIB, dtcm=512 * KIB, sram=1 * MIB, isram=2 * MIB, ddr4=2 * GIB),
        ("corstone300-fvp", "corstone-300-fvp"),
        "Arm FVP",
    ),
    _alif_e8(
        "rtss_hp",
        1 * MIB,
        ("alif-e8-hp", "e8-hp", "alif-e8-rtss-hp"),
        "Alif Ensemble E8, high-performance M55",
    ),
    _alif_e8(
        "rtss_he",
        256 * KIB,
        ("alif-e8-he", "e8-he", "alif-e8-rtss-he"),
        "Alif Ensemble E8, high-efficiency M55",
    ),
    # boards/raspberrypi/rpi_pico2/rpi_pico2.dtsi (flash0: 4 MB) and
    # dts/arm/raspberrypi/rpi_pico/rp2350.dtsi (sram0: 520 KB)
    Board(
        "rpi_pico2/rp2350a/m33",
        Core.M33,
        "FLASH",
        "SRAM",
        _regions(flash=4 * MIB, sram=520 * KIB),
        ("rpi_pico2", "pico2", "rp2350"),
        "Raspberry Pi Pico 2",
    ),
    # boards/arm/mps2/mps2_an521_cpu0.dts; QEMU's mps2-an505 uses the AN521 memory map
    # (hw/arm/mps2-tz.c: "AN521 is the same as AN505 here").
    Board(
        "mps2/an521/cpu0",
        Core.M33,
        "SSRAM1",
        "SSRAM2_3",
        _regions(ssram1=4 * MIB, ssram2_3=4 * MIB, psram=16 * MIB),
        ("mps2-an505", "mps2-an521", "an505", "an521"),
        "QEMU mps2-an505 / mps2-an521",
    ),
    # boards/arm/mps2/mps2_an386.dts with boards/arm/mps2/mps2_base.dtsi (flash0, sram0)
    Board(
        "mps2/an386",
        Core.M4,
        "FLASH",
        "SRAM",
        _regions(flash=4 * MIB, sram=4 * MIB),
        ("mps2-an386", "an386"),
        "QEMU mps2-an386",
    ),
    # boards/arm/mps2/mps2_an385.dts (flash0, sram0)
    Board(
        "mps2/an385",
        Core.M3,
        "FLASH",
        "SRAM",
        _regions(flash=4 * MIB, sram=4 * MIB),
        ("mps2-an385", "an385"),
        "QEMU mps2-an385",
    ),
)


def board_names() -> list[str]:
    return [b.name for b in BOARDS] + [a for b in BOARDS for a in b.aliases]


def find_board(name: str) -> Board:
    """The board called ``name`` (its Zephyr name or an alias, any case)."""
    wanted = name.strip().lower()
    for board in BOARDS:
        if wanted == board.name or wanted in board.aliases:
            return board
    known = ", ".join(b.name for b in BOARDS)
    raise CompileError(
        f"unknown board {name!r}; known boards: {known} (or give --flash and --ram sizes)"
    )


_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": KIB, "m": MIB, "g": GIB}


def parse_size(text: str) -> int:
    """``512K``, ``2M``, ``1G``, ``524288`` (bytes); K, M and G are powers of 1024, as in
    devicetree's ``DT_SIZE_K``/``DT_SIZE_M``; ``KB``/``KiB`` are accepted too."""
    match = _SIZE.match(str(text))
    if match is None:
        raise CompileError(
            f"cannot read the size {text!r}: write bytes (524288) or K, M, G (512K, 2M)"
        )
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def format_size(size: int) -> str:
    """``512 KiB``, ``2 MiB``, ``5632 KiB``, ``1,000 B``: exact, never rounded."""
    for unit, factor in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size:,} B"
