"""The module's CMake for programs loaded at run time (cmake/zephyr_programs.cmake), configured in
the Zephyr-shaped stand-in (cmake_stand_in/): an image with no model of its own registers the
union of the kernel cases its programs call (or all of them), writes each program's image and
the header sizing a model for them, builds the flash-partition code, and stops at configure
time on a program its kernels cannot run or its partition cannot hold. Nothing is compiled."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.zephyr import test_cmake_module as module
from tests.zephyr.test_cmake_module import HELLO, HELLO_KERNELS, configure, fake_executorch, kinds

from cortex_m_nn.cli import main as cli
from cortex_m_nn.core.operators import load_yaml
from cortex_m_nn.embed import program_image

#: A model_partition on Corstone-300's flash simulator (samples/two_models' overlay shape).
PARTITION = {
    "STUB_DT_LABEL_model_partition": "/sim-flash-controller@0/flash_sim@0/partitions/partition@0",
    "STUB_DT_ADDR__sim_flash_controller_0_flash_sim_0_partitions_partition_0": "0x0",
}
cmake = module.cmake  # the fixtures
hello_pte = module.hello_pte


def cmsis_nn(root: Path) -> dict[str, str]:
    """A CMSIS-NN checkout with the files the module compiles itself (Zephyr's CMSIS-NN library
    has no group for them), as ZEPHYR_CMSIS_NN_MODULE_DIR."""
    for name in ("PadFunctions/arm_pad_s8.c", "LSTMFunctions/arm_lstm_unidirectional_s8.c",
                 "TransposeFunctions/arm_transpose_s8.c"):  # fmt: skip
        (root / "Source" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "Source" / name).write_text("")
    return {"ZEPHYR_CMSIS_NN_MODULE_DIR": str(root)}


def said(result: subprocess.CompletedProcess) -> str:
    """CMake's messages as one line (it wraps them)."""
    return " ".join(result.stderr.split())


NO_MODEL = {"CONFIG_CORTEX_M_NN_EMBEDDED_MODEL": "", "CONFIG_CORTEX_M_NN_LOADS_PROGRAMS": "y"}


@pytest.fixture(scope="module")
def kws_pte(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pte = tmp_path_factory.mktemp("pte") / "kws.pte"
    assert cli.main(["ds_cnn", "--target", "cortex-m55", "--io", "int8", "-o", str(pte), "-q"]) == 0
    return pte


def partition(size: int) -> dict[str, str]:
    key = "STUB_DT_SIZE__sim_flash_controller_0_flash_sim_0_partitions_partition_0"
    return {**PARTITION, key: hex(size)}


def registered(build: Path) -> set[str]:
    """The cases the generated registration lists as linked (what check_image accepts)."""
    register = next(Path(s) for s in kinds(build, "source") if s.endswith("_register.cpp"))
    listed = register.read_text().split("cortex_m_nn_linked_cases[] = {")[1].split("};")[0]
    return set(re.findall(r'"([\w.:]+)"', listed))


def test_an_image_without_a_model_registers_the_union_of_its_programs(
    cmake, hello_pte, kws_pte, tmp_path
) -> None:
    result = configure(
        cmake, tmp_path, **NO_MODEL, **cmsis_nn(tmp_path / "cmsis-nn"),
        CONFIG_CORTEX_M_NN_PROGRAMS=f"{hello_pte} {kws_pte}",
        CONFIG_CORTEX_M_NN_KERNEL_REGISTRY_SIZED="y",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    names = {Path(s).name for s in kinds(tmp_path, "source")}
    assert {"model.cpp", "model_run.cpp", "program_image.cpp"} <= names
    assert not {"model_embedded.cpp", "cortex_m_nn_model.c", "flash_partition.cpp"} & names
    assert kinds(tmp_path, "linker") == []  # no model section to place
    kernels = {n.removeprefix("op_").removesuffix(".cpp") for n in names if n.startswith("op_")}
    directory = tmp_path / "cortex-m-nn" / "cortex_m_nn" / "programs"
    images = {p.stem: program_image.read_header(p.read_bytes()) for p in directory.glob("*.cmnn")}
    assert sorted(images) == ["hello", "kws"]
    cases = {case for header in images.values() for case in header.cases}
    assert registered(tmp_path) == cases  # every case either program calls, and no other
    assert kernels == {case.split(".")[0] for case in cases} >= set(HELLO_KERNELS)
    # the registry holds the union's kernels, each once
    assert kinds(tmp_path, "executorch_core_definitions") == [f"MAX_KERNEL_NUM={len(kernels)}"]
    header = (directory / "cortex_m_nn_programs.h").read_text()
    arena = max(h.arena_bytes for h in images.values())
    assert f"#define CORTEX_M_NN_PROGRAMS_ARENA_BYTES {arena}u" in header
    assert f"#define CORTEX_M_NN_PROGRAM_KWS_ARENA_BYTES {images['kws'].arena_bytes}u" in header
    assert any("programs" in include for include in kinds(tmp_path, "include"))


def test_an_embedded_model_and_programs_register_both(cmake, hello_pte, kws_pte, tmp_path) -> None:
    result = configure(
        cmake, tmp_path, CONFIG_CORTEX_M_NN_MODEL_PTE=str(hello_pte),
        CONFIG_CORTEX_M_NN_LOADS_PROGRAMS="y", CONFIG_CORTEX_M_NN_PROGRAMS=str(kws_pte),
        **cmsis_nn(tmp_path / "cmsis-nn"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    names = {Path(s).name for s in kinds(tmp_path, "source")}
    assert {"model_embedded.cpp", "cortex_m_nn_model.c", "op_depthwise_conv2d.cpp"} <= names
    image = tmp_path / "cortex-m-nn/cortex_m_nn/programs/kws.cmnn"
    kws = program_image.read_header(image.read_bytes())
    assert set(kws.cases) <= registered(tmp_path)


def test_all_kernels_registers_every_case(cmake, tmp_path) -> None:
    result = configure(
        cmake, tmp_path / "b", **NO_MODEL, **cmsis_nn(tmp_path / "cmsis-nn"),
        CONFIG_CORTEX_M_NN_ALL_KERNELS="y",
    )  # fmt: skip
    tmp_path = tmp_path / "b"
    assert result.returncode == 0, result.stderr
    _, operators = load_yaml()
    every = {f"{op.name}.{case}" for op in operators for case in op.case_names}
    assert registered(tmp_path) == every
    names = {Path(s).name for s in kinds(tmp_path, "source")}
    assert {f"op_{op.name}.cpp" for op in operators} <= names
    # the CMSIS-NN functions Zephyr's CMSIS-NN library leaves out, for the kernels that call them
    assert any(s.endswith("arm_lstm_unidirectional_s8.c") for s in kinds(tmp_path, "source"))


def test_no_model_and_no_program_is_an_error_naming_the_options(cmake, tmp_path) -> None:
    result = configure(cmake, tmp_path, **NO_MODEL)
    assert result.returncode != 0
    assert "CONFIG_CORTEX_M_NN_PROGRAMS" in said(result)
    assert "CONFIG_CORTEX_M_NN_ALL_KERNELS=y" in said(result)


def test_a_program_for_other_kernels_stops_the_build(cmake, tmp_path) -> None:
    m33 = tmp_path / "m33.pte"
    target = ["--target", "cortex-m33", "-o", str(m33), "-q"]
    assert cli.main([f"{HELLO / 'model.py'}:hello", *target]) == 0
    result = configure(cmake, tmp_path / "b", **NO_MODEL, CONFIG_CORTEX_M_NN_PROGRAMS=str(m33))
    assert result.returncode != 0
    assert "recompile it with cortex-m-compile --target cortex-m55+mve" in said(result)


def test_the_partition_is_checked_and_its_code_built(cmake, hello_pte, kws_pte, tmp_path) -> None:
    values = {
        **NO_MODEL, "CONFIG_CORTEX_M_NN_PROGRAMS": f"{hello_pte} {kws_pte}",
        "CONFIG_CORTEX_M_NN_MODEL_PARTITION": "y",
        "CONFIG_CORTEX_M_NN_MODEL_PARTITION_LABEL": "model_partition",
        **cmsis_nn(tmp_path / "cmsis-nn"),
    }  # fmt: skip
    fits = configure(cmake, tmp_path / "fits", **values, **partition(0x20000))
    assert fits.returncode == 0, fits.stderr
    assert "flash_partition.cpp" in {Path(s).name for s in kinds(tmp_path / "fits", "source")}
    assert "offset 0x0 of its flash, 131072 B" in fits.stdout
    small = configure(cmake, tmp_path / "small", **values, **partition(0x4000))
    assert small.returncode != 0
    assert "kws's program image is" in said(small)
    assert "larger than the partition 'model_partition' (16 KiB)" in said(small)
    missing = configure(cmake, tmp_path / "missing", **values)
    assert missing.returncode != 0
    assert "no devicetree node is labelled 'model_partition'" in said(missing)


@pytest.mark.parametrize("verify", ["y", ""])
def test_the_runtime_the_module_builds_verifies_loaded_programs(
    cmake, hello_pte, tmp_path, verify: str
) -> None:
    """CONFIG_CORTEX_M_NN_PROGRAM_VERIFICATION (Kconfig's default when the image loads
    programs) builds ExecuTorch's flatbuffer verifier into the runtime."""
    if shutil.which("true") is None:
        pytest.skip("no `true` executable to stand in for flatc")
    executorch = fake_executorch(tmp_path / "executorch")
    result = configure(
        cmake, tmp_path / "build", **NO_MODEL, CONFIG_EXECUTORCH="",
        CONFIG_CORTEX_M_NN_PROGRAMS=str(hello_pte),
        CONFIG_CORTEX_M_NN_PROGRAM_VERIFICATION=verify,
        ZEPHYR_EXECUTORCH_MODULE_DIR=str(executorch), FLATC_EXECUTABLE=shutil.which("true"),
        FLATBUFFERS_INCLUDE_DIR=str(executorch / "include"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    definitions = " ".join(kinds(tmp_path / "build", "executorch_core_definitions"))
    expected = "ON" if verify else "OFF"
    assert f"$<$<NOT:$<BOOL:{expected}>>:ET_ENABLE_PROGRAM_VERIFICATION=0>" in definitions


def test_executorchs_module_without_its_verifier_is_warned_about(
    cmake, hello_pte, tmp_path
) -> None:
    result = configure(cmake, tmp_path, **NO_MODEL, CONFIG_CORTEX_M_NN_PROGRAMS=str(hello_pte))
    assert result.returncode == 0, result.stderr
    assert "set CONFIG_EXECUTORCH_ENABLE_PROGRAM_VERIFICATION=y" in said(result)


def test_a_program_given_as_a_model_is_compiled_for_the_target(cmake, tmp_path) -> None:
    """A model in CONFIG_CORTEX_M_NN_PROGRAMS is compiled at configure time for the image's
    target (once), with its test vector; its image is named after the factory."""
    values = {**NO_MODEL, "CONFIG_CORTEX_M_NN_PROGRAMS": "model.py:hello",
              "CONFIG_CORTEX_M_NN_PROGRAMS_TEST_VECTORS": "y"}  # fmt: skip
    first = configure(cmake, tmp_path, **values)
    assert first.returncode == 0, first.stderr
    directory = tmp_path / "cortex-m-nn" / "cortex_m_nn" / "programs"
    header = program_image.read_header((directory / "hello.cmnn").read_bytes())
    assert header.isa == "mve" and "conv2d.window" in header.cases
    vector = (directory / "hello_test_vector.h").read_text()
    assert "cortex_m_nn_test_output_0" in vector
    assert "compiling model.py:hello for cortex-m55+mve" in first.stdout
    again = configure(cmake, tmp_path, **values)
    assert again.returncode == 0, again.stderr
    assert "compiling" not in again.stdout
