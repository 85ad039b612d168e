"""The firmware C++ compiles for Cortex-M55, M33 and M4 without a warning under Zephyr's
flags and -Werror (Twister builds with warnings as errors), at -Os (Zephyr's default) and -O2
(CONFIG_SPEED_OPTIMIZATIONS): the warnings that need the optimiser's analysis
(-Wmaybe-uninitialized, -Wstringop-overflow, ...) only appear there. src/model.cpp,
kernels/abi.cpp and the module's ExecuTorch platform layer against the pinned ExecuTorch's
headers (the executorch wheel's), every kernel against the user's CMSIS-NN (CMSIS_NN_PATH),
and the samples' main.cpp, with arm-none-eabi-g++ (on ARM, uint32_t is `unsigned long`, so
format mistakes the host compiler accepts show up here). M55 builds the MVE path with a model
compiled for it, M33 and M4 the DSP path.

The Zephyr headers are the declaration-only stand-ins of tests/zephyr/zephyr_package/include
(printk with Zephyr's printf format checking). The kernel ABI header
(kernels/include/cortex_m_nn/abi.h) names the ISA from CMSIS-NN's arm_nn_math_types.h: the
checkout's when CMSIS_NN_PATH is set, else a stand-in with its two rules (ARM_MATH_DSP from
__ARM_FEATURE_DSP, ARM_MATH_MVEI from __ARM_FEATURE_MVE). tests/zephyr/test_zephyr_build.py
compiles the same sources, and ExecuTorch's runtime, through the module's own CMake.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.zephyr import zephyr_flags

from cortex_m_nn.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]
STAND_INS = Path(__file__).resolve().parent / "zephyr_package" / "include"
#: Zephyr's C++ flags (tests/zephyr/zephyr_flags.py), ours (-Wextra -Wformat=2), and -Werror as
#: Twister builds; compiled to an object (the optimisation level is the test's parameter).
FLAGS = [
    "-mthumb", *zephyr_flags.COMMON, *zephyr_flags.CXX, *zephyr_flags.WARNINGS, "-Wextra",
    "-Wformat=2", *zephyr_flags.WERROR, "-c", "-o", os.devnull,
]  # fmt: skip
#: Zephyr's optimisation levels: CONFIG_SIZE_OPTIMIZATIONS (default), CONFIG_SPEED_OPTIMIZATIONS.
OPTIMIZATIONS = list(zephyr_flags.OPTIMIZATIONS.values())
#: core → (the compiler's CPU flags, the Kconfig ISA symbol the module sets for it).
CORES = {
    "cortex-m55": (["-mcpu=cortex-m55", "-mfloat-abi=hard"], "CONFIG_CORTEX_M_NN_ISA_MVE"),
    "cortex-m33": (["-mcpu=cortex-m33", "-mfloat-abi=hard"], "CONFIG_CORTEX_M_NN_ISA_DSP"),
    "cortex-m4": (
        ["-mcpu=cortex-m4", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
        "CONFIG_CORTEX_M_NN_ISA_DSP",
    ),
}


#: (ISA directory, the core its hello model is compiled for)
CORE_ISAS = (("mve", "cortex-m55"), ("dsp", "cortex-m33"))


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in headers, and per ISA (mve, dsp) the hello model compiled, embedded and its
    registration generated, in ``<out>/<isa>`` (float inputs and outputs) and
    ``<out>/<isa>-int8`` (``--io int8``)."""
    if shutil.which("arm-none-eabi-g++") is None:
        pytest.skip("arm-none-eabi-g++ is not installed (Debian: gcc-arm-none-eabi)")
    out = tmp_path_factory.mktemp("arm")
    from cortex_m_nn.embed.kernel_codegen import generate

    model = f"{ROOT / 'samples/hello_cortex_m_nn/model.py'}:hello"
    builds = [(isa, target, io) for isa, target in CORE_ISAS for io in ("float", "int8")]
    for isa, target, io in builds:
        directory = out / (isa if io == "float" else f"{isa}-{io}")
        pte, vector = directory / "model.pte", directory / "cortex_m_nn_test_vector.h"
        arguments = [model, "--target", target, "-o", pte, "--test-vector", vector, "--io", io]
        assert cli.main([str(a) for a in [*arguments, "-q"]]) == 0
        assert cli.main(["embed", str(pte), "--output-dir", str(directory), "-q"]) == 0
        generate(directory, {"quantize"})
    (out / "stubs").mkdir()
    (out / "stubs" / "arm_nn_math_types.h").write_text(
        "#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1)\n#define ARM_MATH_DSP 1\n"
        "#endif\n#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)\n"
        "#define ARM_MATH_MVEI 1\n#endif\n"
    )
    return out


def _isa_of(core: str) -> str:
    return CORES[core][1].removeprefix("CONFIG_CORTEX_M_NN_ISA_").lower()


def _cmsis_nn_include(generated: Path) -> Path:
    """CMSIS-NN's Include/ when CMSIS_NN_PATH names a checkout, else the stand-in."""
    checkout = Path(os.environ.get("CMSIS_NN_PATH", "")) / "Include"
    return checkout if (checkout / "arm_nn_math_types.h").is_file() else generated / "stubs"


def _compile(
    source: Path, includes: list[Path], *flags: str, core: str = "cortex-m55", level: str = "-Os"
) -> subprocess.CompletedProcess:
    command = ["arm-none-eabi-g++", *CORES[core][0], *FLAGS, level, *flags]
    command += [f"-I{path}" for path in includes]
    return subprocess.run([*command, str(source)], capture_output=True, text=True)


def _runtime_includes(generated: Path, core: str) -> tuple[list[Path], list[str]]:
    """Include paths and definitions of the module's C++ (src/, kernels/) for ``core``."""
    import executorch

    headers = Path(list(executorch.__path__)[0]) / "include"
    includes = [
        ROOT / "include",
        ROOT / "kernels" / "include",
        _cmsis_nn_include(generated),
        generated / _isa_of(core),
        headers,
        headers / "executorch/runtime/core/portable_type/c10",
    ]
    return includes, ["-DC10_USING_CUSTOM_GENERATED_MACROS", f"-D{CORES[core][1]}=1"]


@pytest.mark.parametrize("level", OPTIMIZATIONS)
@pytest.mark.parametrize("core", list(CORES))
def test_model_api_compiles(generated: Path, core: str, level: str) -> None:
    includes, defines = _runtime_includes(generated, core)
    # The API, the check load() calls (check_program_abi, kernels/abi.cpp) and the platform
    # layer the module gives ExecuTorch's runtime, against the same headers.
    sources = ("src/model.cpp", "src/model_run.cpp", "src/model_embedded.cpp")
    sources += ("src/program_image.cpp", "kernels/abi.cpp", "src/executorch_pal_zephyr.cpp")
    sources += ("src/flash_partition.cpp",)  # against the flash-map stand-in's declarations
    for source in sources:
        result = _compile(ROOT / source, [STAND_INS, *includes], *defines, core=core, level=level)
        assert result.returncode == 0, f"{source}: {result.stderr}"


def test_a_core_without_the_configured_isa_is_refused(generated: Path) -> None:
    includes, defines = _runtime_includes(generated, "cortex-m55")
    soft = _compile(ROOT / "src/model_embedded.cpp", includes, *defines, "-mfloat-abi=soft")
    assert soft.returncode != 0
    assert "CONFIG_CORTEX_M_NN_ISA_MVE is set but the compiler does not emit MVE" in soft.stderr
    assert "another CMSIS-NN code path" in soft.stderr


@pytest.mark.parametrize("level", OPTIMIZATIONS)
@pytest.mark.parametrize("core", list(CORES))
def test_kernels_compile(generated: Path, core: str, level: str) -> None:
    """Every kernel (and the call modes they read) against the user's CMSIS-NN (its headers
    decide the code path)."""
    if _cmsis_nn_include(generated) == generated / "stubs":
        pytest.skip("CMSIS_NN_PATH is not set: the kernels include CMSIS-NN's headers")
    includes, defines = _runtime_includes(generated, core)
    for source in [*sorted((ROOT / "kernels").glob("op_*.cpp")), ROOT / "kernels/call_mode.cpp"]:
        result = _compile(source, includes, *defines, core=core, level=level)
        assert result.returncode == 0, f"{source.name}: {result.stderr}"


def _io_suffix(sample: str) -> str:
    """The generated directory's suffix for the I/O the sample's prj.conf compiles with."""
    conf = (ROOT / "samples" / sample / "prj.conf").read_text()
    return "-int8" if "CONFIG_CORTEX_M_NN_MODEL_IO_INT8=y" in conf else ""


def _programs(generated: Path, isa: str) -> Path:
    """What the module writes for two_models' program (hello, float I/O): its image (and the
    sample's .inc of it), cortex_m_nn_programs.h and its test vector."""
    directory = generated / f"{isa}-programs"
    if not directory.is_dir():
        import shutil as copier

        from cortex_m_nn.embed import programs

        directory.mkdir()
        copier.copy(generated / isa / "model.pte", directory / "hello.pte")
        copier.copy(
            generated / isa / "cortex_m_nn_test_vector.h", directory / "hello_test_vector.h"
        )
        target = dict(CORE_ISAS)[isa]
        arguments = ["--output-dir", str(directory), "--target", f"{target}+{isa}"]
        assert (
            programs.main([*arguments, "--rounding", "double", str(directory / "hello.pte")]) == 0
        )
        from tests.zephyr.test_host_apps import FILE2HEX

        inc = [str(directory / "hello.cmnn"), str(directory / "hello_image.inc")]
        subprocess.run([sys.executable, str(FILE2HEX), *inc], check=True)
    return directory


@pytest.mark.parametrize("level", OPTIMIZATIONS)
@pytest.mark.parametrize("core", list(CORES))
@pytest.mark.parametrize("sample", ["hello_cortex_m_nn", "keyword_spotting", "two_models"])
def test_sample_compiles(generated: Path, sample: str, core: str, level: str) -> None:
    includes = [
        STAND_INS,
        ROOT / "include",
        generated / (_isa_of(core) + _io_suffix(sample)),
        _programs(generated, _isa_of(core)),
    ]
    for source in sorted((ROOT / "samples" / sample / "src").glob("*.cpp")):
        result = _compile(source, includes, core=core, level=level)
        assert result.returncode == 0, f"{source.name}: {result.stderr}"
