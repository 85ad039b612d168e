"""The module's CMake (CMakeLists.txt, cmake/zephyr_module.cmake) configured in a Zephyr-shaped
stand-in project (cmake_stand_in/): which sources, definitions and linker fragments it asks
Zephyr for, how it calls cortex-m-compile, and the errors it stops a build with.

The stand-ins record calls; the Zephyr functions themselves were checked in Zephyr's files
(docs/zephyr-verification.md). Nothing is compiled.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cortex_m_nn import cli

ROOT = Path(__file__).resolve().parents[2]
STAND_IN = Path(__file__).resolve().parent / "cmake_stand_in"
HELLO = ROOT / "samples" / "hello_cortex_m_nn"
HELLO_KERNELS = ["quantize", "conv2d", "avg_pool2d", "linear", "dequantize"]

# mps3/corstone300/an547's memories (boards/arm/mps3/mps3_corstone300_an547.dts).
AN547 = {
    "STUB_DT_CHOSEN_zephyr_flash": "/itcm@10000000",
    "STUB_DT_CHOSEN_zephyr_sram": "/dtcm@30000000",
    "STUB_DT_SIZE__itcm_10000000": "0x80000",
    "STUB_DT_SIZE__dtcm_30000000": "0x80000",
    "STUB_DT_REGION__itcm_10000000": "ITCM",
    "STUB_DT_REGION__dtcm_30000000": "DTCM",
    "STUB_DT_LABEL_isram": "/sram@31000000",
    "STUB_DT_SIZE__sram_31000000": "0x400000",
    "STUB_DT_REGION__sram_31000000": "ISRAM",
    "STUB_DT_LABEL_cortex_m_nn_ddr": "/memory@70000000",
    "STUB_DT_SIZE__memory_70000000": "0x10000000",
    "STUB_DT_REGION__memory_70000000": "CORTEX_M_NN_DDR",
    "BOARD": "mps3",
    "BOARD_QUALIFIERS": "/corstone300/an547",
    "CONFIG_CPU_CORTEX_M": "y",
    "CONFIG_CPU_CORTEX_M55": "y",
    "CONFIG_CORTEX_M_NN": "y",
    "CONFIG_CORTEX_M_NN_ISA_MVE": "y",
    "CONFIG_CORTEX_M_NN_ROUNDING_DOUBLE": "y",
    "CONFIG_CORTEX_M_NN_METHOD_ALLOCATOR_MARGIN": "25",
    "CONFIG_CORTEX_M_NN_TEMP_ALLOCATOR_SIZE": "0",
    "CONFIG_CORTEX_M_NN_FIT_CHECK": "y",
    "CONFIG_STD_CPP17": "y",
}


@pytest.fixture(scope="module")
def cmake() -> str:
    found = shutil.which("cmake")
    if found is None:
        pytest.skip("cmake is not installed")
    return found


@pytest.fixture(scope="module")
def hello_pte(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pte = tmp_path_factory.mktemp("pte") / "hello.pte"
    status = cli.main(
        [f"{HELLO / 'model.py'}:hello", "--target", "cortex-m55", "-o", str(pte), "-q"]
    )
    assert status == 0
    return pte


def configure(cmake: str, build: Path, **values: str) -> subprocess.CompletedProcess:
    settings = {
        "CORTEX_M_NN_ROOT": str(ROOT),
        "PYTHON_EXECUTABLE": sys.executable,
        "APPLICATION_SOURCE_DIR": str(HELLO),
        **AN547,
        **values,
    }
    command = [cmake, "-S", str(STAND_IN), "-B", str(build)]
    command += [f"-D{name}={value}" for name, value in settings.items()]
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    return subprocess.run(command, capture_output=True, text=True, env=environment)


def configured(cmake: str, build: Path, pte: Path, **values: str) -> subprocess.CompletedProcess:
    """``configure`` for the model ``pte``, checked to succeed."""
    result = configure(cmake, build, CONFIG_CORTEX_M_NN_MODEL_PTE=str(pte), **values)
    assert result.returncode == 0, result.stderr
    return result


def recorded(build: Path) -> list[tuple[str, str]]:
    lines = (build / "recorded.txt").read_text().splitlines()
    return [tuple(line.split(" ", 1)) if " " in line else (line, "") for line in lines]


def kinds(build: Path, kind: str) -> list[str]:
    return [value for k, value in recorded(build) if k == kind]


def test_builds_only_the_kernels_the_model_calls(cmake, hello_pte, tmp_path) -> None:
    result = configured(cmake, tmp_path, hello_pte)
    assert kinds(tmp_path, "library") == ["cortex_m_nn"]
    sources = kinds(tmp_path, "source")
    kernels = sorted(
        Path(s).stem.removeprefix("op_") for s in sources if Path(s).name.startswith("op_")
    )
    assert kernels == sorted(HELLO_KERNELS)
    names = {Path(s).name for s in sources}
    assert {"abi.cpp", "cortex_m_nn_register.cpp", "cortex_m_nn_model.c", "model.cpp"} <= names
    assert kinds(tmp_path, "link") == ["libexecutorch"]
    # The registration registers exactly those operators.
    register = next(Path(s) for s in sources if s.endswith("cortex_m_nn_register.cpp"))
    registered = set(re.findall(r'"cortex_m_nn::(\w+)\.out"', register.read_text()))
    assert registered == set(HELLO_KERNELS)
    # The model in its own ROM section; the arena in ordinary data; one rounding.
    assert kinds(tmp_path, "linker") == [f"ROM_SECTIONS {ROOT / 'cmake' / 'model_rom.ld'}"]
    assert kinds(tmp_path, "library_definition") == []
    assert kinds(tmp_path, "definition") == []
    # The application sees the API and the generated header with the planned sizes.
    includes = " ".join(kinds(tmp_path, "include"))
    assert str(ROOT / "include") in includes
    header = Path(includes.split()[-1]) / "cortex_m_nn_model.h"
    assert "#define CORTEX_M_NN_ARENA_BYTES" in header.read_text()
    assert "cortex-m-nn: target cortex-m55+mve, rounding double" in result.stdout


def test_placement_in_named_memories(cmake, hello_pte, tmp_path) -> None:
    configured(
        cmake,
        tmp_path,
        hello_pte,
        CONFIG_CORTEX_M_NN_MODEL_MEMORY="cortex_m_nn_ddr",
        CONFIG_CORTEX_M_NN_ARENA_MEMORY="isram",
    )
    (linker,) = kinds(tmp_path, "linker")
    location, fragment = linker.split(" ", 1)
    assert location == "SECTIONS"
    text = Path(fragment).read_text()
    assert "GROUP_DATA_LINK_IN(CORTEX_M_NN_DDR, CORTEX_M_NN_DDR)" in text
    assert "KEEP(*(.cortex_m_nn_model))" in text and "ALIGN(16)" in text
    assert kinds(tmp_path, "library_definition") == ["CORTEX_M_NN_ARENA_NODELABEL=isram"]


#: (settings beside the model, what the error says) of configurations that stop the build.
REFUSED = {
    "model_does_not_fit": (
        {"STUB_DT_SIZE__dtcm_30000000": "0x400"},  # a 1 KiB DTCM
        [
            "the model does not fit mps3/corstone300/an547",
            "RAM DTCM 1 KiB <",
            "B needed",
            "ISRAM",  # where the arena could go instead
        ],
    ),
    "model_for_another_isa": (
        {"CONFIG_CORTEX_M_NN_ISA_MVE": "n", "CONFIG_CORTEX_M_NN_ISA_DSP": "y"},
        ["compiled for cortex-m55+mve", "--target cortex-m55+dsp --rounding double"],
    ),
}


@pytest.mark.parametrize(("settings", "expected"), REFUSED.values(), ids=list(REFUSED))
def test_a_refused_configuration_stops_the_build(
    cmake, hello_pte, tmp_path, settings: dict[str, str], expected: list[str]
) -> None:
    result = configure(cmake, tmp_path, CONFIG_CORTEX_M_NN_MODEL_PTE=str(hello_pte), **settings)
    assert result.returncode != 0
    message = " ".join(result.stderr.split())
    for fragment in expected:
        assert fragment in message


def test_single_rounding_reaches_all_of_cmsis_nn(cmake, tmp_path, tmp_path_factory) -> None:
    pte = tmp_path_factory.mktemp("single") / "hello.pte"
    assert (
        cli.main([f"{HELLO / 'model.py'}:hello", "--rounding", "single", "-o", str(pte), "-q"]) == 0
    )
    configured(
        cmake,
        tmp_path,
        pte,
        CONFIG_CORTEX_M_NN_ROUNDING_DOUBLE="n",
        CONFIG_CORTEX_M_NN_ROUNDING_SINGLE="y",
    )
    assert kinds(tmp_path, "definition") == ["CMSIS_NN_USE_SINGLE_ROUNDING"]


def test_no_model_is_an_error_naming_the_options(cmake, tmp_path) -> None:
    result = configure(cmake, tmp_path)
    assert result.returncode != 0
    assert "CONFIG_CORTEX_M_NN_MODEL_PTE" in result.stderr
    assert "CONFIG_CORTEX_M_NN_MODEL_SOURCE" in result.stderr


def test_model_source_is_compiled_for_the_configured_target_once(cmake, tmp_path) -> None:
    values = {
        "CONFIG_CORTEX_M_NN_MODEL_SOURCE": "model.py:hello",
        "CONFIG_CORTEX_M_NN_TEST_VECTOR": "y",
        "CONFIG_CPU_CORTEX_M55": "n",
        "CONFIG_CPU_CORTEX_M33": "y",
        "CONFIG_CORTEX_M_NN_ISA_MVE": "n",
        "CONFIG_CORTEX_M_NN_ISA_SCALAR": "y",
    }
    first = configure(cmake, tmp_path, **values)
    assert first.returncode == 0, first.stderr
    assert "compiling model.py:hello for cortex-m33+scalar" in first.stdout
    out = tmp_path / "cortex-m-nn" / "cortex_m_nn"
    assert (out / "cortex_m_nn_test_vector.h").is_file()
    assert '"cortex-m33"' in (out / "cortex_m_nn_model.h").read_text()
    again = configure(cmake, tmp_path, **values)
    assert again.returncode == 0, again.stderr
    assert "compiling" not in again.stdout  # nothing changed: no second compile


def test_a_python_without_the_compiler_is_named(cmake, tmp_path) -> None:
    bare = shutil.which("python3", path="/usr/bin:/bin")
    if bare is None or Path(bare).resolve() == Path(sys.executable).resolve():
        pytest.skip("no second Python to point the build at")
    probe = subprocess.run(
        [bare, "-c", "import importlib.util as u; print(u.find_spec('torch') is None)"],
        capture_output=True,
        text=True,
    )
    if probe.stdout.strip() != "True":
        pytest.skip(f"{bare} has torch")
    result = configure(cmake, tmp_path, CORTEX_M_NN_PYTHON=bare)
    assert result.returncode != 0
    message = " ".join(result.stderr.split())
    assert f"{bare} cannot run cortex-m-compile (missing: torch" in message
    assert "-DCORTEX_M_NN_PYTHON=" in message
