"""The firmware C++ compiles for a Cortex-M without a warning (Twister builds with warnings as
errors): src/model.cpp against the pinned ExecuTorch's headers (the executorch wheel's), and
the samples' main.cpp, with arm-none-eabi-g++ (on ARM, uint32_t is `unsigned long`, so format
mistakes the host compiler accepts show up here).

The Zephyr headers the samples include are replaced by two one-line stand-ins (printk as
printf, which carries the same format checking; k_cycle_get_32). The kernel ABI header
(kernels/include/cortex_m_nn/abi.h) names the ISA from CMSIS-NN's arm_nn_math_types.h: the
checkout's when CMSIS_NN_PATH is set, else a stand-in with its two rules (ARM_MATH_DSP from
__ARM_FEATURE_DSP, ARM_MATH_MVEI from __ARM_FEATURE_MVE).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cortex_m_nn import cli

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["-mthumb", "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Wformat=2", "-Werror"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("arm-none-eabi-g++") is None:
        pytest.skip("arm-none-eabi-g++ is not installed (Debian: gcc-arm-none-eabi)")
    out = tmp_path_factory.mktemp("arm")
    pte = out / "model.pte"
    model = f"{ROOT / 'samples/hello_cortex_m_nn/model.py'}:hello"
    vector = out / "cortex_m_nn_test_vector.h"
    arguments = [model, "--target", "cortex-m55", "-o", pte, "--test-vector", vector, "-q"]
    assert cli.main([str(a) for a in arguments]) == 0
    assert cli.main(["embed", str(pte), "--output-dir", str(out), "-q"]) == 0
    from cortex_m_nn.kernel_codegen import generate

    generate(out, {"quantize"})
    stubs = out / "stubs" / "zephyr"
    (stubs / "sys").mkdir(parents=True)
    (stubs / "kernel.h").write_text(
        "#include <stdint.h>\nstatic inline uint32_t k_cycle_get_32(void) { return 0; }\n"
    )
    (stubs / "sys" / "printk.h").write_text("#include <stdio.h>\n#define printk printf\n")
    (out / "stubs" / "arm_nn_math_types.h").write_text(
        "#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1)\n#define ARM_MATH_DSP 1\n"
        "#endif\n#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)\n"
        "#define ARM_MATH_MVEI 1\n#endif\n"
    )
    return out


def _cmsis_nn_include(generated: Path) -> Path:
    """CMSIS-NN's Include/ when CMSIS_NN_PATH names a checkout, else the stand-in."""
    checkout = Path(os.environ.get("CMSIS_NN_PATH", "")) / "Include"
    return checkout if (checkout / "arm_nn_math_types.h").is_file() else generated / "stubs"


def _compile(source: Path, includes: list[Path], *flags: str) -> subprocess.CompletedProcess:
    command = ["arm-none-eabi-g++", "-mcpu=cortex-m55", "-mfloat-abi=hard", *FLAGS, *flags]
    command += [f"-I{path}" for path in includes]
    return subprocess.run([*command, str(source)], capture_output=True, text=True)


def test_model_api_compiles_for_cortex_m55(generated: Path) -> None:
    import executorch

    headers = Path(list(executorch.__path__)[0]) / "include"
    includes = [
        ROOT / "include",
        ROOT / "kernels" / "include",
        _cmsis_nn_include(generated),
        generated,
        headers,
        headers / "executorch/runtime/core/portable_type/c10",
    ]
    defines = ["-DC10_USING_CUSTOM_GENERATED_MACROS", "-DCONFIG_CORTEX_M_NN_ISA_MVE=1"]
    result = _compile(ROOT / "src/model.cpp", includes, *defines)
    assert result.returncode == 0, result.stderr
    # The check load() calls (check_program_abi, kernels/abi.cpp), against the same headers.
    abi = _compile(ROOT / "kernels/abi.cpp", includes, *defines)
    assert abi.returncode == 0, abi.stderr
    # The build refuses a configuration whose ISA the compiler does not emit.
    soft = _compile(ROOT / "src/model.cpp", includes, *defines, "-mfloat-abi=soft")
    assert soft.returncode != 0
    assert "CONFIG_CORTEX_M_NN_ISA_MVE is set but the compiler does not emit MVE" in soft.stderr
    assert "another CMSIS-NN code path" in soft.stderr


@pytest.mark.parametrize("sample", ["hello_cortex_m_nn", "keyword_spotting"])
def test_sample_compiles_for_cortex_m55(generated: Path, sample: str) -> None:
    includes = [generated / "stubs", ROOT / "include", generated]
    result = _compile(ROOT / "samples" / sample / "src" / "main.cpp", includes)
    assert result.returncode == 0, result.stderr
