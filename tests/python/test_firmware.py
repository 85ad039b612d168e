"""``cortex-m-compile inspect``: a firmware ELF built here with arm-none-eabi-gcc from tiny C
sources (a fake CMSIS-NN function, a fake kernel and ExecuTorch function under their mangled
names, the application, and a .pte embedded with cortex_m_nn.embed.pte_source) is attributed by
component, and its model section is checked against the .pte."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cortex_m_nn.core.operators import ops_version
from cortex_m_nn.core.target import Target
from cortex_m_nn.embed import firmware
from cortex_m_nn.embed import pte_source as embed
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.pipeline import compile_model
from cortex_m_nn.serialize.pte import planned_buffer_bytes, pte_operators

from .models import pools
from .test_cli import run

GCC = shutil.which("arm-none-eabi-gcc")
needs_gcc = pytest.mark.skipif(
    GCC is None, reason="arm-none-eabi-gcc not installed (Debian: gcc-arm-none-eabi)"
)

KERNEL = "_ZN11cortex_m_nn6native10conv2d_outEPKaPa"  # cortex_m_nn::native::conv2d_out
METHOD = "_ZN10executorch7runtime6Method7executeEv"  # executorch::runtime::Method::execute
DECLARATIONS = f"""
int kernel(const signed char *in, signed char *out) __asm__("{KERNEL}");
int method(int x) __asm__("{METHOD}");
"""

SOURCES = {
    "cmsis.c": """
int arm_convolve_s8(const signed char *in, signed char *out, int n) {
    int acc = 0;
    for (int i = 0; i < n; i++) { acc += in[i] * 3; out[i] = (signed char)(acc >> 4); }
    return acc;
}
int arm_nn_requantize_helper(int x) { return (x * 1717) >> 11; }
""",
    "kernel.c": DECLARATIONS
    + """
extern int arm_convolve_s8(const signed char *in, signed char *out, int n);
int kernel(const signed char *in, signed char *out) { return arm_convolve_s8(in, out, 16) + 1; }
int method(int x) { return x * 2 + 5; }
""",
    "app.c": DECLARATIONS
    + """
#include "model.h"
signed char arena[4096];
int counter = 7;
int main(void) {
    counter += kernel((const signed char *)cortex_m_nn_model, arena);
    return method(counter) + (int)cortex_m_nn_model_size;
}
void _start(void) { main(); for (;;) {} }
""",
}

LINKER_SCRIPT = """
MEMORY { FLASH (rx) : ORIGIN = 0x00000000, LENGTH = 1M
         RAM (rwx)  : ORIGIN = 0x20000000, LENGTH = 1M }
ENTRY(_start)
SECTIONS {
  .text : { *(.text*) } > FLASH
  .rodata : { *(.rodata*) } > FLASH
  .cortex_m_nn_model : { KEEP(*(.cortex_m_nn_model)) } > FLASH
  .data : { *(.data*) } > RAM AT > FLASH
  .bss (NOLOAD) : { *(.bss*) *(COMMON) } > RAM
}
"""


@pytest.fixture(scope="module")
def pte() -> bytes:
    module, inputs = pools()
    compiled = compile_model(
        ModelSource("pools", module, inputs),
        Target.parse("cortex-m55"),
        synthetic(inputs, 4),
        progress=False,
    )
    return compiled.pte


NO_MODEL = """
extern int arm_convolve_s8(const signed char *in, signed char *out, int n);
signed char buffer[64];
int main(void) { return arm_convolve_s8(buffer, buffer + 16, 16); }
void _start(void) { main(); for (;;) {} }
"""


def build(
    directory: Path,
    pte: bytes,
    sources: dict[str, str] = SOURCES,
    script: str = LINKER_SCRIPT,
) -> Path:
    """Compile and link ``sources`` (and the embedded model, if they use it) into an ELF."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in sources.items():
        (directory / name).write_text(text)
    files = list(sources)
    if sources is SOURCES:
        (directory / "model.c").write_text(embed.c_source(pte))
        (directory / "model.h").write_text(embed.c_header())
        files.append("model.c")
    (directory / "link.ld").write_text(script)
    elf = directory / "app.elf"
    command = [
        GCC,
        "-mcpu=cortex-m55",
        "-mthumb",
        "-O1",
        "-ffunction-sections",
        "-nostdlib",
        "-T",
        "link.ld",
        *files,
        "-o",
        elf.name,
    ]
    built = subprocess.run(command, cwd=directory, capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    return elf


@pytest.fixture(scope="module")
def elf(pte: bytes, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if GCC is None:
        pytest.skip("arm-none-eabi-gcc not installed (Debian: gcc-arm-none-eabi)")
    return build(tmp_path_factory.mktemp("firmware"), pte)


def nm_sizes(path: Path) -> dict[str, tuple[int, str]]:
    """Symbol → (size, section letter) as binutils' nm reports them (independent of us)."""
    nm = Path(GCC).with_name("arm-none-eabi-nm")
    output = subprocess.run(
        [str(nm), "-S", str(path)], check=True, capture_output=True, text=True
    ).stdout
    found = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 4:
            _, size, letter, name = parts
            found[name] = (int(size, 16), letter)
    return found


@needs_gcc
def test_components_are_attributed_by_symbol(elf: Path, pte: bytes) -> None:
    report = firmware.inspect(elf, pte)
    symbols = nm_sizes(elf)
    arm = sum(size for name, (size, _) in symbols.items() if name.startswith("arm_"))
    assert report["flash"]["CMSIS-NN"] == arm > 0
    kernel = symbols[KERNEL][0]
    assert report["flash"]["cortex_m_nn kernels"] == kernel > 0
    runtime = symbols[METHOD][0]
    assert report["flash"]["ExecuTorch runtime"] == runtime > 0
    # The model section and the model's size variable (in .rodata).
    assert report["flash"]["model"] == len(pte) + symbols["cortex_m_nn_model_size"][0]
    # RAM: the 4 KiB arena (.bss) and the counter (.data, also stored in flash).
    assert report["ram"]["application"] == 4096 + 4
    assert report["ram"]["model"] == report["ram"]["CMSIS-NN"] == 0
    assert sum(report["flash"].values()) == report["flash_bytes"]
    assert sum(report["ram"].values()) == report["ram_bytes"]


@needs_gcc
def test_totals_match_binutils_size(elf: Path) -> None:
    size = Path(GCC).with_name("arm-none-eabi-size")
    line = subprocess.run(
        [str(size), "-A", str(elf)], check=True, capture_output=True, text=True
    ).stdout
    sections = dict(
        (parts[0], int(parts[1]))
        for parts in (row.split() for row in line.splitlines())
        if len(parts) == 3 and parts[1].isdigit()
    )
    report = firmware.inspect(elf)
    flash = sum(
        sections[s] for s in (".text", ".rodata", ".cortex_m_nn_model", ".data") if s in sections
    )
    ram = sum(sections[s] for s in (".data", ".bss") if s in sections)
    assert (report["flash_bytes"], report["ram_bytes"]) == (flash, ram)


@needs_gcc
def test_model_section_is_aligned_and_equals_the_pte(elf: Path, pte: bytes) -> None:
    model = firmware.inspect(elf, pte)["model"]
    assert model["section"] == embed.MODEL_SECTION
    assert model["size"] == len(pte)
    assert model["address"] % embed.MODEL_ALIGNMENT == 0 and model["aligned"]
    assert model["matches_pte"] is True
    summary = model["pte"]
    assert summary["operators"] == sorted(set(pte_operators(pte)))
    assert summary["planned_arena_bytes"] == planned_buffer_bytes(pte)
    assert summary["metadata"] == {
        "cortex_m_nn_core": "cortex-m55",
        "cortex_m_nn_isa": "mve",
        "cortex_m_nn_rounding": "double",
        "cortex_m_nn_version": summary["metadata"]["cortex_m_nn_version"],
        "cortex_m_nn_ops_version": str(ops_version()),
    }


@needs_gcc
def test_inspect_command(capsys, elf: Path, pte: bytes, tmp_path: Path) -> None:
    given = tmp_path / "model.pte"
    given.write_bytes(pte)
    report = tmp_path / "fw.json"
    result = run(capsys, "inspect", elf, "--pte", given, "--json", report)
    assert result.status == 0, result.err
    assert "bytes equal the given .pte" in result.out
    assert "CMSIS-NN" in result.out and "cortex_m_nn kernels" in result.out
    assert "target: core=cortex-m55 isa=mve rounding=double" in result.out
    assert json.loads(report.read_text())["model"]["matches_pte"] is True


@needs_gcc
def test_a_different_pte_is_an_error(capsys, elf: Path, pte: bytes, tmp_path: Path) -> None:
    other = tmp_path / "other.pte"
    changed = bytearray(pte)
    changed[100] ^= 0xFF
    other.write_bytes(bytes(changed))
    result = run(capsys, "inspect", elf, "--pte", other)
    assert result.status == 2
    (line,) = result.err.splitlines()
    assert line.startswith("cortex-m-compile inspect: error: ")
    assert "differs" in line and "from byte 100" in line
    assert "bytes DIFFER from the given .pte from byte 100" in result.out


@needs_gcc
def test_misaligned_model_is_an_error(capsys, pte: bytes, tmp_path: Path) -> None:
    # A linker script that forces the model section to an odd address.
    script = LINKER_SCRIPT.replace(".cortex_m_nn_model :", ".cortex_m_nn_model 0x00080003 :")
    elf = build(tmp_path, pte, script=script)
    model = firmware.inspect(elf, pte)["model"]
    assert model["address"] == 0x80003 and not model["aligned"]
    given = tmp_path / "model.pte"
    given.write_bytes(pte)
    result = run(capsys, "inspect", elf, "--pte", given)
    assert result.status == 2
    assert "must be aligned to 16" in result.err and "0x80003" in result.err


@needs_gcc
def test_image_without_a_model(capsys, pte: bytes, tmp_path: Path) -> None:
    elf = build(tmp_path, pte, sources={"cmsis.c": SOURCES["cmsis.c"], "main.c": NO_MODEL})
    report = firmware.inspect(elf)
    assert report["model"] is None and report["flash"]["CMSIS-NN"] > 0
    result = run(capsys, "inspect", elf)
    assert result.status == 0 and "no .cortex_m_nn_model section" in result.out
    given = tmp_path / "model.pte"
    given.write_bytes(pte)
    result = run(capsys, "inspect", elf, "--pte", given)
    assert result.status == 2 and "cortex_m_nn.embed.pte_source" in result.err


def test_not_an_elf_is_one_line(capsys, tmp_path: Path) -> None:
    bogus = tmp_path / "app.elf"
    bogus.write_text("not an ELF")
    result = run(capsys, "inspect", bogus)
    assert result.status == 2 and "ARM ELF" in result.err
    assert len(result.err.splitlines()) == 1
    missing = run(capsys, "inspect", tmp_path / "absent.elf")
    assert missing.status == 2 and "does not exist" in missing.err


def test_c_source_is_exact(pte: bytes) -> None:
    source = embed.c_source(pte, "my_model")
    numbers = [int(b, 16) for b in __import__("re").findall(r"0x([0-9a-f]{2})", source)]
    assert bytes(numbers) == pte
    assert f"my_model[{len(pte)}]" in source and f"my_model_size = {len(pte)}u" in source
    assert f'section("{embed.MODEL_SECTION}")' in source and "aligned(16)" in source
    assert "extern const unsigned char my_model[];" in embed.c_header("my_model")
    with pytest.raises(ValueError):
        embed.c_source(pte, "not a name")
    with pytest.raises(ValueError):
        embed.c_source(b"")


def test_component_rules() -> None:
    assert firmware.component_of("arm_softmax_s8", ".text") == "CMSIS-NN"
    assert firmware.component_of("_ZN11cortex_m_nn6native3addEv", ".text") == "cortex_m_nn kernels"
    assert firmware.component_of("cortex_m_nn_register_kernels", ".text") == "cortex_m_nn kernels"
    assert firmware.component_of("_ZN10executorch7runtime6MethodD2Ev", ".text") == (
        "ExecuTorch runtime"
    )
    assert firmware.component_of("_ZN5torch8executor4testEv", ".text") == "ExecuTorch runtime"
    assert firmware.component_of("et_pal_init", ".text") == "ExecuTorch runtime"
    assert firmware.component_of("cortex_m_nn_model", embed.MODEL_SECTION) == "model"
    assert firmware.component_of("main", ".text") == "application"
    assert firmware.component_of("memcpy", ".text") == "application"


@needs_gcc
def test_components_can_be_another_runtimes(elf: Path, pte: bytes) -> None:
    """``classify``/``components`` attribute the same bytes otherwise (the peers' images)."""
    ours = firmware.inspect(elf, pte)

    def classify(symbol: str, section: str) -> str:
        return "arm" if symbol.startswith("arm_") else "rest"

    other = firmware.inspect(
        elf, pte, classify=classify, components=("model", "arm", "rest", "unattributed")
    )
    assert (other["flash_bytes"], other["ram_bytes"]) == (ours["flash_bytes"], ours["ram_bytes"])
    assert other["flash"]["arm"] == ours["flash"]["CMSIS-NN"] > 0
    assert other["flash"]["model"] == len(pte)  # the section; its size variable is now "rest"
    for kind in ("flash", "ram"):
        assert other[kind]["unattributed"] == ours[kind]["unattributed"]
        assert sum(other[kind].values()) == other[f"{kind}_bytes"]
