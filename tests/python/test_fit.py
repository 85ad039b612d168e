"""Known boards, memory sizes as people write them, and the fit check (before anything is
written): a model that does not fit is refused in one line that names the numbers and a fix."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.target import Core
from cortex_m_nn.plan import fit
from cortex_m_nn.plan.boards import BOARDS, find_board, format_size, parse_size
from cortex_m_nn.serialize.pte import pte_metadata

from .test_cli import error_line, run

MODELS = Path(__file__).with_name("models.py")
K, M = 1024, 1024 * 1024


@pytest.mark.parametrize(
    ("text", "size"),
    [("512K", 512 * K), ("2M", 2 * M), ("1G", 1024 * M), ("524288", 524288), ("64KiB", 64 * K)],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size
    assert parse_size(text.lower()) == size


@pytest.mark.parametrize("text", ["", "big", "1.5M", "-4K", "12T"])
def test_bad_sizes_name_the_form(text: str) -> None:
    with pytest.raises(CompileError, match="512K"):
        parse_size(text)


def test_format_size() -> None:
    assert format_size(512 * K) == "512 KiB"
    assert format_size(5632 * K) == "5632 KiB"
    assert format_size(2 * M) == "2 MiB"
    assert format_size(1000) == "1,000 B"


# Numbers from the boards' Zephyr devicetrees, written out here independently of the table.
DEVICETREE = {
    "mps3/corstone300/an547": (Core.M55, ("ITCM", 512 * K), ("DTCM", 512 * K)),
    "mps3/corstone300/fvp": (Core.M55, ("ITCM", 512 * K), ("DTCM", 512 * K)),
    "ensemble_e8_dk/ae822fa0e5597ls0/rtss_hp": (Core.M55, ("MRAM", 5632 * K), ("DTCM", 1 * M)),
    "ensemble_e8_dk/ae822fa0e5597ls0/rtss_he": (Core.M55, ("MRAM", 5632 * K), ("DTCM", 256 * K)),
    "rpi_pico2/rp2350a/m33": (Core.M33, ("FLASH", 4 * M), ("SRAM", 520 * K)),
    "mps2/an521/cpu0": (Core.M33, ("SSRAM1", 4 * M), ("SSRAM2_3", 4 * M)),
    "mps2/an386": (Core.M4, ("FLASH", 4 * M), ("SRAM", 4 * M)),
    "mps2/an385": (Core.M3, ("FLASH", 4 * M), ("SRAM", 4 * M)),
}


@pytest.mark.parametrize("name", list(DEVICETREE))
def test_board_table(name: str) -> None:
    board = find_board(name)
    core, flash, ram = DEVICETREE[name]
    assert board.core is core
    assert (board.flash, board.region(board.flash).size) == flash
    assert (board.ram, board.region(board.ram).size) == ram


def test_aliases_and_qemu_machines() -> None:
    assert find_board("corstone300") is find_board("mps3-an547") is find_board("MPS3-AN547")
    assert find_board("mps2-an505").name == "mps2/an521/cpu0"
    assert find_board("alif-e8-hp").region("SRAM0").size == 4 * M
    assert find_board("corstone300").region("DDR4").size == 2048 * M
    assert find_board("rpi_pico2").core is Core.M33
    assert len({b.name for b in BOARDS}) == len(BOARDS)


def test_unknown_board_lists_the_known_ones() -> None:
    with pytest.raises(CompileError) as raised:
        find_board("arduino-uno")
    message = str(raised.value)
    assert "arduino-uno" in message and "--flash" in message
    assert all(b.name in message for b in BOARDS)


def check(where: str | None, pte: int, arena: int, flash=None, ram=None) -> dict:
    return fit.check(fit.budget(where, flash, ram), pte, 5, arena, 10_000)


def test_fits_with_the_numbers() -> None:
    report = check("corstone300", 40_000, 20_000)
    assert report["fits"] and report["error"] is None
    code = fit.RUNTIME_CODE_BYTES + 5 * fit.OPERATOR_CODE_BYTES
    assert report["flash"]["needed_bytes"] == 40_000 + code
    assert report["ram"]["needed_bytes"] == 20_000 + 10_000
    assert report["ram"]["size_bytes"] == 512 * K


def test_arena_too_big_names_bigger_ram_on_the_board() -> None:
    report = check("corstone300", 40_000, 600_000)
    assert not report["fits"] and report["flash"]["fits"]
    error = report["error"]
    assert "RAM DTCM 512 KiB < 610,000 B needed" in error
    assert "arena 600,000 B" in error
    assert "place the arena in SRAM (2 MiB) or ISRAM (4 MiB) or DDR4 (2 GiB)" in error
    assert "\n" not in error and error.endswith("nothing written")


def test_model_too_big_for_flash() -> None:
    # Corstone-300 keeps the image in ITCM (loaded, not flashed): DDR can take the model.
    error = check("corstone300", 3 * M, 1000)["error"]
    assert "flash ITCM 512 KiB" in error and "place the model (.pte) in" in error
    assert "DDR4 (2 GiB)" in error
    # The Pico 2 has nothing bigger than its flash: another board.
    error = check("rpi_pico2", 5 * M, 1000)["error"]
    assert "flash FLASH 4 MiB" in error
    assert "choose a board with more flash, e.g. ensemble_e8_dk" in error
    # Alif's MRAM is the only non-volatile memory: SRAM is not offered for the model.
    error = check("alif-e8-hp", 6 * M, 1000)["error"]
    assert "MRAM 5632 KiB" in error and "SRAM0" not in error


def test_both_too_big_is_still_one_line() -> None:
    error = check(None, 300_000, 300_000, flash="256K", ram="128K")["error"]
    assert error.count("<") == 2 and "\n" not in error
    assert "--flash 256 KiB" in error and "--ram 128 KiB" in error
    assert "choose a board with more RAM" in error


def test_explicit_sizes_override_the_board() -> None:
    report = check("corstone300", 1000, 1000, ram="1K")
    assert report["ram"]["region"] == "--ram 1 KiB" and not report["fits"]
    assert report["flash"]["region"] == "ITCM 512 KiB"


# --- the command line ---------------------------------------------------------------------


def test_too_big_is_refused_before_writing(capsys, tmp_path: Path) -> None:
    pte, plot = tmp_path / "out" / "m.pte", tmp_path / "out" / "m.png"
    result = run(capsys, f"{MODELS}:pools", "-o", pte, "--plot", plot, "--ram", "1K")
    line = error_line(result)
    needed = re.search(r"RAM --ram 1 KiB < ([\d,]+) B needed", line)
    assert needed, line
    assert "nothing written" in line
    assert not pte.exists() and not plot.exists()
    assert "does NOT fit" in result.out  # the report says so too


def test_board_sets_the_target_and_fits(capsys, tmp_path: Path) -> None:
    pte, plot = tmp_path / "pico.pte", tmp_path / "plan.png"
    result = run(capsys, f"{MODELS}:pools", "-o", pte, "--board", "rpi_pico2", "--plot", plot)
    assert result.status == 0, result.err
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert pte_metadata(pte.read_bytes())["cortex_m_nn_core"] == "cortex-m33"
    assert "fits rpi_pico2/rp2350a/m33:" in result.out
    assert re.search(r"RAM +SRAM 520 KiB .* of +532,480 B", result.out)


def test_target_must_match_the_board(capsys, tmp_path: Path) -> None:
    pte = tmp_path / "m.pte"
    line = error_line(run(capsys, "--board", "rpi_pico2", "--target", "cortex-m55", "-o", pte))
    assert "cortex-m33" in line and "cortex-m55" in line
    assert not pte.exists()


def test_bad_board_or_size_fails_fast(capsys, tmp_path: Path) -> None:
    assert "known boards" in error_line(run(capsys, "--board", "nope", "-o", tmp_path / "a"))
    assert "512K" in error_line(run(capsys, "--ram", "lots", "-o", tmp_path / "b"))
    assert not list(tmp_path.iterdir())


def test_unknown_plot_format_writes_nothing(capsys, tmp_path: Path) -> None:
    pte = tmp_path / "m.pte"
    line = error_line(run(capsys, f"{MODELS}:pools", "-o", pte, "--plot", tmp_path / "p.xyz"))
    assert "--plot" in line and ".png" in line
    assert not list(tmp_path.iterdir())


def test_auto_schedule_takes_small_where_fast_does_not_fit(capsys, tmp_path: Path) -> None:
    """--memory auto (the default): with --ram between what the small and the fast schedule
    need, the program is the small one's and the report says why; below both, the one-line
    refusal names the smallest arena found."""
    needs = {}
    for schedule in ("fast", "small"):
        report = tmp_path / f"{schedule}.json"
        result = run(capsys, "-o", tmp_path / f"{schedule}.pte", "--memory", schedule,
                     "--ram", "1G", "--report-json", report)  # fmt: skip
        assert result.status == 0, result.err
        needs[schedule] = json.loads(report.read_text())["fit"]["ram"]["needed_bytes"]
    assert needs["small"] < needs["fast"]
    pte = tmp_path / "auto.pte"
    result = run(capsys, "-o", pte, "--ram", str(needs["small"]))
    assert result.status == 0, result.err
    assert "memory schedule small: the first schedule whose arena fits" in result.out
    assert pte.read_bytes() == (tmp_path / "small.pte").read_bytes()
    line = error_line(run(capsys, "-o", tmp_path / "none.pte", "--ram", str(needs["small"] - 16)))
    assert "the smallest arena found is --memory small's (fast " in line
    assert not (tmp_path / "none.pte").exists()
