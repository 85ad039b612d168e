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

from cortex_m_nn.cli import main as cli
from cortex_m_nn.core.operators import load_yaml
from cortex_m_nn.embed.pte_source import model_facts

ROOT = Path(__file__).resolve().parents[2]
STAND_IN = Path(__file__).resolve().parent / "cmake_stand_in"
HELLO = ROOT / "samples" / "hello_cortex_m_nn"
TARGET_MODELS = Path(__file__).parents[1] / "target" / "models.py"
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
    "CONFIG_CORTEX_M_NN_EMBEDDED_MODEL": "y",
    "CONFIG_STD_CPP17": "y",
    # ExecuTorch's module builds the runtime (its stand-in libraries); the module's own build
    # of the runtime is tested by test_the_module_builds_executorchs_runtime_itself.
    "CONFIG_EXECUTORCH": "y",
}


#: Another CMake to configure with (Zephyr and ExecuTorch need >= 3.24; the docs list the
#: versions checked): its executable's path.
CMAKE_VARIABLE = "CORTEX_M_NN_TEST_CMAKE"


@pytest.fixture(scope="module")
def cmake() -> str:
    found = os.environ.get(CMAKE_VARIABLE) or shutil.which("cmake")
    if found is None:
        pytest.skip(f"cmake is not installed (or name one in ${CMAKE_VARIABLE})")
    return found


@pytest.fixture(scope="module")
def hello_pte(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pte = tmp_path_factory.mktemp("pte") / "hello.pte"
    status = cli.main(
        [f"{HELLO / 'model.py'}:hello", "--target", "cortex-m55", "-o", str(pte), "-q"]
    )
    assert status == 0
    return pte


def configure(
    cmake: str, build: Path, environment: dict[str, str] | None = None, **values: str
) -> subprocess.CompletedProcess:
    """Configure the stand-in with ``values`` (CMake variables) and ``environment`` (added to
    this process's environment)."""
    settings = {
        "CORTEX_M_NN_ROOT": str(ROOT),
        "PYTHON_EXECUTABLE": sys.executable,
        "APPLICATION_SOURCE_DIR": str(HELLO),
        **AN547,
        **values,
    }
    command = [cmake, "-S", str(STAND_IN), "-B", str(build)]
    command += [f"-D{name}={value}" for name, value in settings.items()]
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "python"), **(environment or {})}
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
    assert {
        "abi.cpp",
        "call_mode.cpp",
        "cortex_m_nn_register.cpp",
        "cortex_m_nn_model.c",
        "model.cpp",
        "model_run.cpp",
        "model_embedded.cpp",
        "program_image.cpp",
    } <= names
    assert kinds(tmp_path, "link") == ["libexecutorch"]
    # The registration registers exactly those operators.
    register = next(Path(s) for s in sources if s.endswith("cortex_m_nn_register.cpp"))
    registered = set(re.findall(r'"cortex_m_nn::(\w+)\.out"', register.read_text()))
    assert registered == set(HELLO_KERNELS)
    # ... and calls only the cases the model runs (on the M55 our window and quads cases where
    # the cost model chose them): no int16 or int4 case function is referenced, and each is
    # compiled in a section of its own, so the link drops them.
    calls = set(re.findall(r"native::(\w+_out)\(", register.read_text()))
    operators = {op.name: op for op in load_yaml()[1]}
    cases = [case.split(".") for case in model_facts(hello_pte.read_bytes()).cases]
    assert calls == {operators[name].case_function(case) for name, case in cases}
    assert not any("int16" in call or "int4" in call for call in calls)
    assert kinds(tmp_path, "library_option") == ["-ffunction-sections -fdata-sections"]
    # The model in its own ROM section; the arena in ordinary data; one rounding.
    assert kinds(tmp_path, "linker") == [f"ROM_SECTIONS {ROOT / 'cmake' / 'model_rom.ld'}"]
    assert kinds(tmp_path, "library_definition") == []
    assert kinds(tmp_path, "definition") == []
    assert kinds(tmp_path, "executorch_core_definitions") == []  # registry not asked to be sized
    # The application sees the API and the generated header with the planned sizes.
    includes = " ".join(kinds(tmp_path, "include"))
    assert str(ROOT / "include") in includes
    header = Path(includes.split()[-1]) / "cortex_m_nn_model.h"
    assert "#define CORTEX_M_NN_ARENA_BYTES" in header.read_text()
    assert "cortex-m-nn: target cortex-m55+mve, rounding double" in result.stdout


def test_the_module_compiles_every_source_of_the_api_and_the_kernels_support(
    cmake, hello_pte, tmp_path
) -> None:
    """The shared source lists (cmake/sources.cmake) reach the Zephyr library: every file of
    the API, the embedded model and the kernels' support on disk, whatever its name."""
    configured(cmake, tmp_path, hello_pte)
    sources = {Path(s).resolve() for s in kinds(tmp_path, "source")}
    zephyr_only = {"flash_partition.cpp", "executorch_pal_zephyr.cpp"}
    on_disk = [p for p in (ROOT / "src").glob("*.cpp") if p.name not in zephyr_only]
    on_disk += [*(ROOT / "kernels" / "compute").glob("*.cpp"), ROOT / "kernels" / "abi.cpp"]
    on_disk += [ROOT / "kernels" / "call_mode.cpp"]
    assert {p.resolve() for p in on_disk} <= sources


def test_without_the_option_the_module_adds_nothing(cmake, tmp_path) -> None:
    """With CONFIG_CORTEX_M_NN off the module's CMake (zephyr/, as zephyr/module.yml names it)
    defines no library, runs no step and installs nothing: the top-level CMakeLists.txt, the
    CMake package with its install rules, is not what Zephyr adds."""
    result = configure(cmake, tmp_path, CONFIG_CORTEX_M_NN="")
    assert result.returncode == 0, result.stderr
    assert recorded(tmp_path) == []
    assert "cortex-m-nn:" not in result.stdout
    install = (tmp_path / "cortex-m-nn" / "cmake_install.cmake").read_text()
    assert "share/cortex_m_nn" not in install
    # nor the package's project and cache entries (which a module pointing at the top level
    # would leave in every Zephyr build, option on or off)
    cache = (tmp_path / "CMakeCache.txt").read_text()
    assert "cortex_m_nn_SOURCE_DIR" not in cache
    assert "CORTEX_M_NN_ROOT:INTERNAL" not in cache


def test_a_missing_prebuilt_model_is_refused_naming_the_option(cmake, tmp_path) -> None:
    missing = tmp_path / "missing.pte"
    result = configure(cmake, tmp_path / "build", CONFIG_CORTEX_M_NN_MODEL_PTE=str(missing))
    assert result.returncode != 0
    error = " ".join(result.stderr.split())
    assert f"cortex-m-nn: CONFIG_CORTEX_M_NN_MODEL_PTE: {missing} does not exist" in error
    assert "cortex-m-compile <model> --target cortex-m55+mve" in error


@pytest.mark.parametrize(("extra", "expected"), [("0", 0), ("5", 5)])
def test_the_kernel_registry_is_sized_to_the_kernels(
    cmake, hello_pte, tmp_path, extra: str, expected: int
) -> None:
    """ExecuTorch's kernel table gets room for the model's kernels plus the extra ones, not its
    default 2000 (24 KB of RAM)."""
    configured(
        cmake,
        tmp_path,
        hello_pte,
        CONFIG_CORTEX_M_NN_KERNEL_REGISTRY_SIZED="y",
        CONFIG_CORTEX_M_NN_KERNEL_REGISTRY_EXTRA=extra,
    )
    size = len(HELLO_KERNELS) + expected
    assert kinds(tmp_path, "executorch_core_definitions") == [f"MAX_KERNEL_NUM={size}"]


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
        "CONFIG_CORTEX_M_NN_MODEL_IO_INT8": "y",
        "CONFIG_CPU_CORTEX_M55": "n",
        "CONFIG_CPU_CORTEX_M33": "y",
        "CONFIG_CORTEX_M_NN_ISA_MVE": "n",
        "CONFIG_CORTEX_M_NN_ISA_SCALAR": "y",
    }
    first = configure(cmake, tmp_path, **values)
    assert first.returncode == 0, first.stderr
    assert "compiling model.py:hello for cortex-m33+scalar" in first.stdout
    out = tmp_path / "cortex-m-nn" / "cortex_m_nn"
    assert (
        "typedef int8_t cortex_m_nn_test_input_t;"
        in (out / "cortex_m_nn_test_vector.h").read_text()
    )
    model_h = (out / "cortex_m_nn_model.h").read_text()
    assert '"cortex-m33"' in model_h
    assert "#define CORTEX_M_NN_MODEL_INPUT_INT8 {1}" in model_h  # --io int8 reached the compile
    again = configure(cmake, tmp_path, **values)
    assert again.returncode == 0, again.stderr
    assert "compiling" not in again.stdout  # nothing changed: no second compile


def python_without_torch(directory: Path) -> Path:
    """This Python with torch, torchao and executorch hidden (as in a fresh Zephyr
    workspace): a launcher that puts a ``sitecustomize`` marking them absent on the path."""
    hide = directory / "hide"
    hide.mkdir()
    hidden = "('torch', 'torchao', 'executorch')"
    (hide / "sitecustomize.py").write_text(
        f"import sys\nfor name in {hidden}:\n    sys.modules[name] = None\n"
    )
    return python_launcher(
        directory / "python-without-torch", f'PYTHONPATH="{hide}${{PYTHONPATH:+:$PYTHONPATH}}" '
    )


def python_launcher(path: Path, environment: str = "") -> Path:
    """A shell script at ``path`` that runs this Python (with ``environment`` assignments)."""
    path.write_text(f'#!/bin/sh\n{environment}exec "{sys.executable}" "$@"\n')
    path.chmod(0o755)
    return path


def test_without_torch_the_error_offers_the_prebuilt_route(cmake, tmp_path) -> None:
    bare = python_without_torch(tmp_path)
    result = configure(
        cmake,
        tmp_path / "build",
        CORTEX_M_NN_PYTHON=str(bare),
        CONFIG_CORTEX_M_NN_MODEL_SOURCE="ds_cnn",
    )
    assert result.returncode != 0
    message = " ".join(result.stderr.split())
    assert f"tried {bare} (missing: torch, torchao, executorch)" in message
    assert "-DCORTEX_M_NN_PYTHON=<python>" in message
    assert "--target cortex-m55+mve --rounding double -o model.pte" in message
    assert 'CONFIG_CORTEX_M_NN_MODEL_PTE="model.pte"' in message


def test_a_model_with_a_stage_builds_the_kernels_its_steps_call(cmake, tmp_path) -> None:
    """A program whose first layers run as one ``stage`` call (--memory small) registers the
    operators it calls, and the module also compiles the kernels the stage's kernel calls
    directly (a link would otherwise miss them)."""
    from cortex_m_nn.core.operators import STAGE_STEP_OPERATORS

    pte = tmp_path / "staged.pte"
    model = f"{TARGET_MODELS}:stage_guard"
    arguments = [model, "--memory", "small", "--io", "int8", "-o", str(pte), "-q"]
    assert cli.main(arguments) == 0
    configured(cmake, tmp_path / "build", pte)
    sources = kinds(tmp_path / "build", "source")
    compiled = {Path(s).stem.removeprefix("op_") for s in sources if Path(s).name.startswith("op_")}
    assert {"stage", *STAGE_STEP_OPERATORS} <= compiled
    register = next(Path(s) for s in sources if s.endswith("cortex_m_nn_register.cpp"))
    registered = set(re.findall(r'"cortex_m_nn::(\w+)\.out"', register.read_text()))
    assert "stage" in registered and "add" not in registered


def test_a_call_on_another_path_registers_its_case(cmake, tmp_path, monkeypatch) -> None:
    """A program whose 1x1 convolution runs row by row (conv2d's path 1, --memory small on a
    DSP core; every path kept) has its registration dispatch it to conv2d's rows case, the
    function the image must link; the wrapper's int8 case stays for its 3x3 one."""
    from cortex_m_nn.plan import paths

    monkeypatch.setattr(paths, "relaxable", lambda *_: [])
    pte = tmp_path / "rows.pte"
    (tmp_path / "rows.py").write_text(
        "import torch\nfrom torch import nn\n\n\ndef rows():\n    torch.manual_seed(0)\n"
        "    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 1))\n"
        "    return model.eval(), (torch.randn(1, 3, 8, 8),)\n"
    )
    model = f"{tmp_path / 'rows.py'}:rows"
    arguments = [model, "--memory", "small", "--target", "cortex-m33", "--io", "int8"]
    arguments += ["-o", str(pte), "-q"]
    assert cli.main(arguments) == 0
    m33 = {"CONFIG_CPU_CORTEX_M55": "n", "CONFIG_CPU_CORTEX_M33": "y"}
    m33 |= {"CONFIG_CORTEX_M_NN_ISA_MVE": "n", "CONFIG_CORTEX_M_NN_ISA_DSP": "y"}
    configured(cmake, tmp_path / "build", pte, **m33)
    sources = kinds(tmp_path / "build", "source")
    register = next(Path(s) for s in sources if s.endswith("cortex_m_nn_register.cpp"))
    calls = set(re.findall(r"native::(\w+_out)\(", register.read_text()))
    assert {"conv2d_rows_out", "conv2d_out"} <= calls
    assert "depthwise_conv2d_three_by_three_out" not in calls  # no call runs it


def test_a_call_on_our_kernel_registers_its_case_and_compiles_it(cmake, tmp_path) -> None:
    """A program whose depthwise convolution runs our lanes kernel (depthwise_conv2d's path 2,
    chosen by the cost model on M55) has its registration dispatch it to the lanes case and
    the module compile our compute function it calls."""
    pte = tmp_path / "lanes.pte"
    (tmp_path / "lanes.py").write_text(
        "import torch\nfrom torch import nn\n\n\ndef lanes():\n    torch.manual_seed(0)\n"
        "    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),\n"
        "                          nn.Conv2d(8, 8, 3, padding=1, groups=8))\n"
        "    return model.eval(), (torch.randn(1, 3, 32, 32),)\n"
    )
    arguments = [f"{tmp_path / 'lanes.py'}:lanes", "--io", "int8", "-o", str(pte), "-q"]
    assert cli.main(arguments) == 0
    configured(cmake, tmp_path / "build", pte)
    sources = kinds(tmp_path / "build", "source")
    register = next(Path(s) for s in sources if s.endswith("cortex_m_nn_register.cpp"))
    calls = set(re.findall(r"native::(\w+_out)\(", register.read_text()))
    assert "depthwise_conv2d_lanes_out" in calls
    assert any(s.endswith("kernels/compute/depthwise_conv_lanes_s8.cpp") for s in sources)


def test_a_prebuilt_model_needs_no_torch(cmake, hello_pte, tmp_path) -> None:
    bare = python_without_torch(tmp_path)
    result = configured(cmake, tmp_path / "build", hello_pte, CORTEX_M_NN_PYTHON=str(bare))
    assert f"cortex-m-nn: Python {bare}" in result.stdout
    assert len([s for s in kinds(tmp_path / "build", "source") if "/op_" in s]) == len(
        HELLO_KERNELS
    )


#: pip's two launcher forms: ``#!<python>``, and for long paths a shell line that execs it.
LAUNCHERS = {
    "short": "#!{python}\nimport sys\n",
    "long": "#!/bin/sh\n''''exec' \"{python}\" \"$0\" \"$@\"\n' ''''\n",
}


def chosen_python(
    cmake: str, tmp_path: Path, launcher: str | None, venv: Path | None, zephyrs: Path
) -> str:
    """The Python the module picks, none named, with cortex-m-compile's ``launcher`` form on
    PATH running this Python (None: none on PATH), VIRTUAL_ENV ``venv`` and Zephyr's Python
    ``zephyrs``. The model source does not exist: the build stops at its first compile step."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if launcher is not None:
        script = bin_dir / "cortex-m-compile"
        script.write_text(LAUNCHERS[launcher].format(python=sys.executable))
        script.chmod(0o755)
    elsewhere = [d for d in os.environ["PATH"].split(os.pathsep) if d]
    elsewhere = [d for d in elsewhere if not (Path(d) / "cortex-m-compile").exists()]
    environment = {"PATH": os.pathsep.join([str(bin_dir), *elsewhere]), "VIRTUAL_ENV": ""}
    if venv is not None:
        environment["VIRTUAL_ENV"] = str(venv)
    result = configure(
        cmake,
        tmp_path / "build",
        environment,
        PYTHON_EXECUTABLE=str(zephyrs),
        CORTEX_M_NN_PYTHON="",
        CONFIG_CORTEX_M_NN_MODEL_SOURCE="missing.py:make",
    )
    found = re.search(r"cortex-m-nn: Python (\S+)", result.stdout)
    assert found, result.stderr
    assert "missing.py" in result.stderr  # then the compile step refused the missing model
    return found.group(1)


@pytest.mark.parametrize("launcher", list(LAUNCHERS))
def test_the_python_of_cortex_m_compile_on_path_comes_first(cmake, tmp_path, launcher) -> None:
    """Zephyr's Python has no torch; the cortex-m-compile on PATH (pip's launcher) has."""
    zephyrs = python_without_torch(tmp_path)
    assert chosen_python(cmake, tmp_path, launcher, None, zephyrs) == sys.executable


def test_the_active_virtual_environment_comes_next(cmake, tmp_path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python_launcher(venv / "bin" / "python")
    zephyrs = python_without_torch(tmp_path)
    assert chosen_python(cmake, tmp_path, None, venv, zephyrs) == str(venv / "bin" / "python")


def test_a_python_without_torch_is_passed_over(cmake, tmp_path) -> None:
    """The virtual environment has no torch: Zephyr's Python, which has, runs the compile."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(python_without_torch(tmp_path))
    assert chosen_python(cmake, tmp_path, None, venv, Path(sys.executable)) == sys.executable


#: What ExecuTorch's portable kernels warn about under Zephyr's flags (arm-none-eabi-g++ for
#: Cortex-M55, docs/zephyr-verification.md): kept as warnings, not errors.
PORTABLE_KERNEL_WARNINGS = [
    "-Wno-error=double-promotion",
    "-Wno-error=deprecated-declarations",
    "-Wno-error=int-in-bool-context",
    "-Wno-error=format",
]


def test_portable_kernels_warn_without_failing_a_warnings_as_errors_build(cmake, tmp_path) -> None:
    """A model with fallbacks links ExecuTorch's portable kernels, which ExecuTorch builds with
    Zephyr's options (Twister: -Werror) and which warn under them: for those targets only,
    the warnings found stay warnings."""
    pte = tmp_path / "fallback.pte"
    model = f"{ROOT / 'tests/python/models.py'}:with_rms_norm"
    assert cli.main([model, "--allow-fallback", "-o", str(pte), "-q"]) == 0
    configured(cmake, tmp_path / "build", pte, CONFIG_EXECUTORCH_BUILD_PORTABLE_OPS="y")
    options = dict(line.split(" ", 1) for line in kinds(tmp_path / "build", "target_options"))
    for target in ("portable_kernels", "portable_ops_lib"):
        flags = options[target].split()
        assert set(PORTABLE_KERNEL_WARNINGS) <= set(flags)
        assert "-Wno-double-promotion" not in flags  # still reported, only not fatal


def fake_executorch(root: Path) -> Path:
    """An ExecuTorch tree with what cmake/executorch_runtime.cmake reads at configure time:
    the source lists (build_variables.bzl), the schema and flatbuffers headers."""
    variables = root / "shim_et/xplat/executorch/build/build_variables.bzl"
    variables.parent.mkdir(parents=True)
    core = ["runtime/executor/program.cpp", "runtime/kernel/operator_registry.cpp",
            "runtime/platform/default/posix.cpp"]  # fmt: skip
    prims = ["kernels/prim_ops/register_prim_ops.cpp"]
    variables.write_text(f"EXECUTORCH_CORE_SRCS = {core!r}\nEXECUTORCH_SRCS = {prims!r}\n")
    for path in [*core, *prims, "runtime/platform/default/minimal.cpp", "schema/program.fbs",
                 "schema/scalar_type.fbs", "include/flatbuffers/flatbuffers.h"]:  # fmt: skip
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("")
    return root


def test_the_module_builds_executorchs_runtime_itself(cmake, hello_pte, tmp_path) -> None:
    """Without CONFIG_EXECUTORCH the image's runtime is ExecuTorch's core source list built by
    cmake/executorch_runtime.cmake (the QEMU runner's), with the module's platform layer and a
    kernel registry compiled into the module's library; ExecuTorch's Zephyr library is not
    linked, and no heap is asked for."""
    executorch = fake_executorch(tmp_path / "executorch")
    configured(
        cmake, tmp_path / "build", hello_pte, CONFIG_EXECUTORCH="",
        ZEPHYR_EXECUTORCH_MODULE_DIR=str(executorch), FLATC_EXECUTABLE=shutil.which("true"),
        FLATBUFFERS_INCLUDE_DIR=str(executorch / "include"),
    )  # fmt: skip
    assert kinds(tmp_path / "build", "link") == ["executorch_core"]
    names = {Path(s).name for s in kinds(tmp_path / "build", "source")}
    assert {"executorch_pal_zephyr.cpp", "operator_registry.cpp"} <= names
    assert "register_prim_ops.cpp" not in names  # the hello model calls no primitive operator
    # ExecuTorch's Zephyr Kconfig default (EXECUTORCH_ENABLE_PROGRAM_VERIFICATION=n): no
    # flatbuffers verifier in the runtime the module builds
    definitions = " ".join(kinds(tmp_path / "build", "executorch_core_definitions"))
    assert "$<$<NOT:$<BOOL:OFF>>:ET_ENABLE_PROGRAM_VERIFICATION=0>" in definitions
    # flatbuffers' index checks end in the module's et_pal_abort (src/executorch_pal_zephyr.cpp),
    # through the header flatbuffers includes for its FLATBUFFERS_ASSERT, not the C library's
    # assert
    assert "FLATBUFFERS_ASSERT=CORTEX_M_NN_FLATBUFFERS_CHECK" in definitions
    assert "FLATBUFFERS_ASSERT_INCLUDE=<cortex_m_nn/flatbuffers_check.h>" in definitions
    check = ROOT / "cmake/include/cortex_m_nn/flatbuffers_check.h"
    assert "#define CORTEX_M_NN_FLATBUFFERS_CHECK(condition)" in check.read_text()
    assert "et_pal_abort" in (ROOT / "src/executorch_pal_zephyr.cpp").read_text()


def test_with_executorchs_module_install_rules_are_skipped(cmake, hello_pte, tmp_path) -> None:
    """ExecuTorch's module links executorch_core to zephyr_interface, which its
    install(EXPORT ExecuTorchTargets) cannot export: the module turns install rules off for
    the whole build (tests/zephyr/test_zephyr_build.py generates it with ExecuTorch's real
    CMake)."""
    configured(cmake, tmp_path, hello_pte)
    cache = (tmp_path / "CMakeCache.txt").read_text()
    assert "CMAKE_SKIP_INSTALL_RULES:BOOL=ON" in cache
