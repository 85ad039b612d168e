"""The CMake package (cmake/package.cmake, cmake/cortex_m_nn.cmake) without a compiler: what
`cmake --install` puts in a prefix, find_package's version rule, and the one-line refusals of
a project that calls the functions wrongly. Building and running with it: tests/target."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cortex_m_nn.embed import cmsis_pack

ROOT = Path(__file__).resolve().parents[2]
SHARE = Path("share") / "cortex_m_nn"
VERSION = re.search(
    r'__version__ = "([0-9.]+)"', (ROOT / "python" / "cortex_m_nn" / "version.py").read_text()
)


@pytest.fixture(scope="module")
def cmake() -> str:
    found = shutil.which("cmake")
    if found is None:
        pytest.skip("cmake is not installed (apt install cmake)")
    return found


@pytest.fixture(scope="module")
def prefix(cmake: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("package")
    build, prefix = root / "build", root / "prefix"
    run([cmake, "-S", str(ROOT), "-B", str(build), f"-DCMAKE_INSTALL_PREFIX={prefix}"])
    run([cmake, "--install", str(build)])
    return prefix


def run(command: list[str], ok: bool = True) -> str:
    done = subprocess.run(command, capture_output=True, text=True)
    output = done.stdout + done.stderr
    assert (done.returncode == 0) == ok, output
    return " ".join(output.split())


def _referenced(cmake_file: Path) -> set[str]:
    """The tree's files a CMake file names as ${CORTEX_M_NN_ROOT}/<path> (no variables in it)."""
    text = cmake_file.read_text()
    return {m for m in re.findall(r"\$\{CORTEX_M_NN_ROOT\}/([A-Za-z0-9_./-]+)", text)}


def test_the_installed_package_holds_every_file_its_functions_read(prefix: Path) -> None:
    share = prefix / SHARE
    needed = _referenced(ROOT / "cmake" / "cortex_m_nn.cmake")
    assert {"kernels", "cmake/sources.cmake", "cmake/executorch_runtime.cmake"} <= needed
    # the source lists the functions compile (cmake/sources.cmake)
    lists = cmsis_pack.read_source_lists(ROOT)
    compiled = (
        "CORTEX_M_NN_API_SOURCES",
        "CORTEX_M_NN_API_HEADERS",
        "CORTEX_M_NN_EMBEDDED_SOURCES",
    )
    needed |= {path for name in compiled for path in lists[name]}
    for path in sorted(needed):
        assert (share / path).exists(), f"{path} is read by the package but not installed"
    # every kernel source and header the kernels' build globs, and the generator's inputs
    for source in [*ROOT.glob("kernels/**/*.cpp"), *ROOT.glob("kernels/**/*.h")]:
        assert (share / source.relative_to(ROOT)).is_file(), source
    for relative in ("python/cortex_m_nn/ops/operators.yaml", "cmake/include"):
        assert (share / relative).exists(), relative
    # the generator comes with the kernels it registers: the package's own Python, no caches
    assert (share / "python/cortex_m_nn/embed/kernel_codegen.py").is_file()
    assert not list(share.rglob("__pycache__"))
    # nothing of the Zephyr module
    assert not list(share.rglob("zephyr_*.cmake"))
    assert not (share / "src" / "flash_partition.cpp").exists()


def _project(tmp_path: Path, body: str) -> Path:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "CMakeLists.txt").write_text(
        f"cmake_minimum_required(VERSION 3.24)\nproject(user NONE)\n{body}\n"
    )
    return project


def configure(cmake: str, project: Path, *definitions: str, ok: bool = True) -> str:
    """Configure ``project``; the steps' Python is this one unless ``definitions`` name one."""
    python = [] if any("CORTEX_M_NN_PYTHON" in d for d in definitions) else [
        f"-DCORTEX_M_NN_PYTHON={sys.executable}"
    ]  # fmt: skip
    command = [cmake, "-S", str(project), "-B", str(project / "build"), *python, *definitions]
    return run(command, ok)


@pytest.mark.parametrize(
    ("request_", "found"),
    [("", True), ("0.1", True), ("0.1.0", True), ("0.2", False), ("1.0", False), ("0.0.9", False)],
)
def test_find_package_takes_the_same_minor_version(
    cmake: str, prefix: Path, tmp_path: Path, request_: str, found: bool
) -> None:
    assert VERSION is not None and VERSION.group(1).startswith("0.1.")
    project = _project(
        tmp_path,
        f"find_package(cortex_m_nn {request_} CONFIG)\n"
        'message(STATUS "found=${cortex_m_nn_FOUND} version=${cortex_m_nn_VERSION}")\n'
        "if(cortex_m_nn_FOUND AND NOT COMMAND cortex_m_nn_add_model)\n"
        '  message(FATAL_ERROR "no functions")\nendif()',
    )
    output = configure(cmake, project, f"-DCMAKE_PREFIX_PATH={prefix}")
    assert (f"found=1 version={VERSION.group(1)}" in output) == found, output


def test_a_checkout_is_a_package_too(cmake: str, tmp_path: Path) -> None:
    project = _project(
        tmp_path,
        'find_package(cortex_m_nn CONFIG REQUIRED)\nmessage(STATUS "root=${CORTEX_M_NN_ROOT}")',
    )
    output = configure(cmake, project, f"-Dcortex_m_nn_DIR={ROOT / 'cmake'}")
    assert f"root={ROOT}" in output


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("cortex_m_nn_runtime()", "cortex_m_nn_runtime(TARGET <core>) names the core"),
        (
            "cortex_m_nn_runtime(TARGET cortex-m99)",
            "TARGET cortex-m99: unknown core 'cortex-m99'; valid cores:",
        ),
        (
            "cortex_m_nn_runtime(TARGET cortex-m4+mve)",
            "TARGET cortex-m4+mve: cortex-m4 cannot run the mve path",
        ),
        (
            "cortex_m_nn_runtime(TARGET cortex-m55 ROUNDING half)",
            "ROUNDING is double or single, not 'half'",
        ),
        (
            "add_custom_target(app)\ncortex_m_nn_add_model(app MODEL ds_cnn)",
            "call cortex_m_nn_runtime(TARGET <core>) first",
        ),
        (
            "add_custom_target(app)\ncortex_m_nn_register_kernels(app CASES conv2d)",
            "call cortex_m_nn_runtime(TARGET <core>) first",
        ),
    ],
)
def test_a_wrong_call_is_refused_in_one_line(
    cmake: str, prefix: Path, tmp_path: Path, body: str, message: str
) -> None:
    project = _project(tmp_path, f"find_package(cortex_m_nn CONFIG REQUIRED)\n{body}")
    output = configure(cmake, project, f"-DCMAKE_PREFIX_PATH={prefix}", ok=False)
    assert f"cortex-m-nn: {message}" in output, output


def test_a_python_without_the_packages_is_named(cmake: str, prefix: Path, tmp_path: Path) -> None:
    project = _project(
        tmp_path,
        "find_package(cortex_m_nn CONFIG REQUIRED)\ncortex_m_nn_runtime(TARGET cortex-m55)",
    )
    python = shutil.which("false") or "/bin/false"
    output = configure(
        cmake, project, f"-DCMAKE_PREFIX_PATH={prefix}", f"-DCORTEX_M_NN_PYTHON={python}", ok=False
    )
    assert f"no Python here can run cortex-m-compile (tried {python} (missing: ))" in output
    assert "-DCORTEX_M_NN_PYTHON=<python>" in output
