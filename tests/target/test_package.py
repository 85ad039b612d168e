"""The CMake package on target: the runner is built through the installed package (every test of
tests/target; here, that it was), samples/bare_metal builds with it and runs bit exact under
QEMU at -Os and unoptimised, and a program for another core is refused when the image is
configured."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from tests.target import harness

pytestmark = pytest.mark.skipif(harness.missing() is not None, reason=str(harness.missing()))

SAMPLE = harness.REPO / "samples" / "bare_metal"
M55 = harness.CORES["m55"]


def _definitions(prefix: Path) -> list[str]:
    flatc, include = harness.flatbuffers()
    return [
        f"-DCMAKE_PREFIX_PATH={prefix}",
        f"-DFLATC_EXECUTABLE={flatc}",
        f"-DFLATBUFFERS_INCLUDE_DIR={include}",
    ]


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return harness.install_package(tmp_path_factory.mktemp("package") / "cortex_m_nn")


@pytest.mark.parametrize("build_type", ["MinSizeRel", "Debug"])
def test_the_bare_metal_sample_runs_bit_exact(
    prefix: Path, tmp_path: Path, build_type: str
) -> None:
    toolchain = prefix / harness.PACKAGE_CMAKE / harness.TOOLCHAIN.name
    definitions = [*_definitions(prefix), f"-DCMAKE_BUILD_TYPE={build_type}"]
    harness.cmake_build(SAMPLE, tmp_path, M55, definitions, toolchain=toolchain)
    cache = (tmp_path / "CMakeCache.txt").read_text()
    assert f"cortex_m_nn_DIR:PATH={prefix / harness.PACKAGE_CMAKE}" in cache
    result = harness.run(tmp_path / "bare_metal.elf", M55)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "outputs equal the compiler's references\nPASS" in result.stdout
    # Only the model's kernel cases are registered: the cases the configure step reported.
    registration = tmp_path / "cortex_m_nn" / "bare_metal" / "registration"
    source = (registration / "cortex_m_nn_register.cpp").read_text()
    linked = set(re.findall(r'^    "([a-z0-9_]+\.[a-z0-9_]+)",$', source, re.MULTILINE))
    facts = (tmp_path / "cortex_m_nn" / "bare_metal" / "cortex_m_nn_model.cmake").read_text()
    cases = re.search(r'set\(CORTEX_M_NN_MODEL_CASES "([^"]*)"\)', facts)
    assert cases is not None and linked == set(cases.group(1).split(";"))


def test_the_runner_was_built_through_the_installed_package(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    harness.write_model(harness.compile_for("ds_cnn", M55), models)
    harness.build(M55, models, tmp_path / "build")
    cache = (tmp_path / "build" / "CMakeCache.txt").read_text()
    installed = tmp_path / "build-cortex_m_nn" / harness.PACKAGE_CMAKE
    assert f"cortex_m_nn_DIR:PATH={installed}" in cache
    assert f"CMAKE_TOOLCHAIN_FILE:FILEPATH={installed / harness.TOOLCHAIN.name}" in cache
    result = harness.run(tmp_path / "build" / "runner_ds_cnn.elf", M55)
    assert "PASS (bit-exact)" in result.stdout


def test_a_program_for_another_core_is_refused_at_configure(prefix: Path, tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    harness.write_model(harness.compile_for("ds_cnn", harness.CORES["m33"]), models)
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.24)\nproject(other C CXX)\n"
        "find_package(cortex_m_nn CONFIG REQUIRED)\n"
        "cortex_m_nn_runtime(TARGET cortex-m55)\n"
        "add_executable(app main.cpp)\n"
        f'cortex_m_nn_add_model(app PTE "{models / "ds_cnn.pte"}")\n'
    )
    (project / "main.cpp").write_text("int main() { return 0; }\n")
    configure = [
        "cmake", "-S", str(project), "-B", str(tmp_path / "build"),
        f"-DCMAKE_TOOLCHAIN_FILE={prefix / harness.PACKAGE_CMAKE / harness.TOOLCHAIN.name}",
        "-DCORTEX_M_NN_CPU=cortex-m55", *_definitions(prefix),
    ]  # fmt: skip
    done = subprocess.run(configure, capture_output=True, text=True)
    assert done.returncode != 0
    output = " ".join((done.stdout + done.stderr).split())
    assert "app's model was compiled for cortex-m33+dsp" in output
    assert "recompile it with cortex-m-compile --target cortex-m55+mve" in output
