"""The two_models sample's partition layout (boards/mps3_corstone300.overlay), checked statically
as a devicetree compiler and the flash driver would see it: model_partition exists in a
fixed-partitions node, lies inside its flash, starts and ends on erase blocks; the flash
simulator's storage holds the whole flash and lies in Corstone-300's secure DDR; the flash's
write block suits PartitionWriter; and the sample's program image fits the partition."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cortex_m_nn.cli import main as cli
from cortex_m_nn.embed import program_image
from cortex_m_nn.embed.pte_source import model_facts

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "two_models"
OVERLAY = SAMPLE / "boards" / "mps3_corstone300.overlay"
#: Corstone-300's DDR4 alternates non-secure and secure every 256 MiB; the sample runs secure
#: (boards/arm/mps3/mps3_common.dtsi: ddr4 reg 0x60000000, 0x70000000, …, 256 MiB each).
SECURE_DDR = (0x70000000, 0x80000000)
SIZE_UNITS = {"DT_SIZE_K": 1024, "DT_SIZE_M": 1024 * 1024}


def _number(text: str) -> int:
    unit = re.fullmatch(r"(DT_SIZE_[KM])\((\d+)\)", text.strip())
    return int(unit.group(2)) * SIZE_UNITS[unit.group(1)] if unit else int(text, 0)


def _node(source: str, label: str) -> str:
    """The body of the node labelled ``label`` (up to its first child's end is enough here)."""
    found = re.search(rf"\b{label}:\s*[\w,@-]+\s*\{{(.*?)\}};", source, re.S)
    assert found, f"no node labelled {label} in {OVERLAY.name}"
    return found.group(1)


def _reg(body: str) -> tuple[int, int]:
    found = re.search(r"reg\s*=\s*<\s*(\S+)\s+(DT_SIZE_[KM]\(\d+\)|0x[0-9a-fA-F]+|\d+)\s*>", body)
    assert found, body
    return _number(found.group(1)), _number(found.group(2))


def _property(body: str, name: str) -> int:
    found = re.search(rf"{name}\s*=\s*<\s*(\S+?)\s*>", body)
    assert found, f"no {name}"
    return _number(found.group(1))


@pytest.fixture(scope="module")
def layout() -> dict[str, int]:
    source = OVERLAY.read_text()
    flash = source[source.index("model_flash:") :]
    storage_start, storage_size = _reg(_node(source, "model_flash_storage"))
    flash_start, flash_size = _reg(flash)
    offset, size = _reg(_node(source, "model_partition"))
    assert 'compatible = "fixed-partitions"' in flash
    assert re.search(r"memory-region\s*=\s*<&model_flash_storage>", source)
    return {
        "storage_start": storage_start, "storage_size": storage_size, "flash_start": flash_start,
        "flash_size": flash_size, "offset": offset, "size": size,
        "erase": _property(flash, "erase-block-size"),
        "write": _property(flash, "write-block-size"),
    }  # fmt: skip


def test_the_partition_lies_in_its_flash_on_erase_blocks(layout: dict[str, int]) -> None:
    assert layout["flash_start"] == 0
    assert layout["offset"] + layout["size"] <= layout["flash_size"]
    assert layout["offset"] % layout["erase"] == 0
    assert layout["size"] % layout["erase"] == 0 and layout["size"] > 0


def test_the_simulators_storage_holds_the_flash_in_secure_ddr(layout: dict[str, int]) -> None:
    assert layout["storage_size"] >= layout["flash_size"]
    start, end = layout["storage_start"], layout["storage_start"] + layout["storage_size"]
    assert SECURE_DDR[0] <= start and end <= SECURE_DDR[1]


def test_the_flash_write_block_suits_partition_writer(layout: dict[str, int]) -> None:
    header = (ROOT / "include" / "cortex_m_nn" / "flash_partition.h").read_text()
    most = int(re.search(r"kMaxWriteBlock = (\d+);", header).group(1))
    assert 0 < layout["write"] <= most and layout["erase"] % layout["write"] == 0


def test_the_samples_program_fits_its_partition(layout: dict[str, int], tmp_path: Path) -> None:
    conf = (SAMPLE / "prj.conf").read_text()
    programs = re.search(r'^CONFIG_CORTEX_M_NN_PROGRAMS="([^"]+)"', conf, re.M).group(1)
    assert 'CONFIG_CORTEX_M_NN_MODEL_PARTITION_LABEL="' not in conf  # the default label
    for entry in programs.split():
        path, _, factory = entry.rpartition(":")
        pte = tmp_path / f"{factory}.pte"
        source = f"{(SAMPLE / path).resolve()}:{factory}"
        assert cli.main([source, "--target", "cortex-m55", "-o", str(pte), "-q"]) == 0
        image = program_image.image_bytes(pte.read_bytes(), model_facts(pte.read_bytes()))
        assert len(image) <= layout["size"]
