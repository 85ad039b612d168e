"""west.yml and the samples' CMake against Zephyr's and ExecuTorch's own files.

No Zephyr workspace can be fetched here, so what `west update` and the first `west build`
would need is written down below from the files that need it, each with the commit read
(docs/zephyr-verification.md, "Workspace"), and the manifest is checked against that:
every board a sample allows has its HAL modules imported, every imported name exists in
Zephyr's manifest, ExecuTorch's git submodules are fetched, and every CMake file asks for
at least the CMake version ExecuTorch requires.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]

#: Project names of Zephyr's own west.yml that the allowlist relies on, read at commit
#: 00063b04 of zephyrproject-rtos/zephyr (the newest stored copy; the v4.4.0 tag that
#: west.yml pins was not available to read).
ZEPHYR_PROJECTS = {"cmsis", "cmsis_6", "cmsis-nn", "cmsis-dsp", "hal_rpi_pico"}

#: Zephyr modules each board target needs beyond Zephyr itself, with the file that needs it.
#: CMSIS_6 is the Cortex-M core headers: modules/cmsis_6/CMakeLists.txt (0c9a0cda) adds the
#: module for every CONFIG_CPU_CORTEX_M build.
BOARD_MODULES: dict[str, tuple[set[str], str]] = {
    "mps3/corstone300/an547": (
        {"cmsis_6"},
        "soc/arm/mps3/soc.c (8d6425a6) and CMakeLists.txt (450f279f): Zephyr headers only",
    ),
    "mps3/corstone300/fvp": (
        {"cmsis_6"},
        "soc/arm/mps3/soc.c (8d6425a6) and CMakeLists.txt (450f279f): Zephyr headers only",
    ),
    "ensemble_e8_dk/ae822fa0e5597ls0/rtss_hp": (
        {"cmsis_6"},
        "soc/alif/ensemble/CMakeLists.txt (3de45ee8), common/soc.c (334aa8a2): no HAL",
    ),
    "ensemble_e8_dk/ae822fa0e5597ls0/rtss_he": (
        {"cmsis_6"},
        "soc/alif/ensemble/CMakeLists.txt (3de45ee8), common/soc.c (334aa8a2): no HAL",
    ),
    "rpi_pico2/rp2350a/m33": (
        {"cmsis_6", "hal_rpi_pico"},
        "soc/raspberrypi/rpi_pico/rp2350/soc.c (4bf04b2d) includes <pico/runtime_init.h>",
    ),
}

#: ExecuTorch's CMakeLists.txt (0030fb91, line 48): cmake_minimum_required(VERSION 3.24).
EXECUTORCH_CMAKE = (3, 24)
#: ExecuTorch's pyproject.toml (cff6f4dd): "cmake>=3.24,<4.0.0" ("4.0.0 breaks third-party
#: CMake build"), and requirements-dev.txt the same.
EXECUTORCH_CMAKE_PIP = '"cmake>=3.24,<4"'

#: Submodules ExecuTorch's CMake uses on every build: third-party/CMakeLists.txt (0519ab40)
#: adds json and gflags and builds flatbuffers and flatcc; CMakeLists.txt (0030fb91) adds
#: backends/xnnpack/third-party/FXdiv unless FXDIV_SOURCE_DIR is set. A hand-kept list would
#: follow each release, so west.yml fetches them all (`submodules: true`).
EXECUTORCH_SUBMODULES = {
    "third-party/json",
    "third-party/gflags",
    "third-party/flatbuffers",
    "third-party/flatcc",
    "backends/xnnpack/third-party/FXdiv",
}

#: ExecuTorch release tags confirmed to exist (`v<version>`, as v1.0.1 … v1.4.1 in the
#: index): v1.5.1 from the release page github.com/pytorch/executorch/releases/tag/v1.5.1,
#: linked by several guides, and pytorch/executorch#22922/#22923 (version bump to 1.5.1).
EXECUTORCH_TAGS = {"v1.5.1"}


def _manifest() -> dict:
    return yaml.safe_load((ROOT / "west.yml").read_text())["manifest"]


def _project(name: str) -> dict:
    return next(p for p in _manifest()["projects"] if p["name"] == name)


def _allowed_boards() -> set[str]:
    suites = [*ROOT.glob("samples/*/sample.yaml"), *(ROOT / "tests").rglob("testcase.yaml")]
    boards = set()
    for path in suites:
        suite = yaml.safe_load(path.read_text())
        for scenario in [suite.get("common", {}), *suite["tests"].values()]:
            allowed = scenario.get("platform_allow", [])
            boards |= {allowed} if isinstance(allowed, str) else set(allowed)
    return boards


def test_every_allowed_board_has_its_modules_allowlisted() -> None:
    allowlist = set(_project("zephyr")["import"]["name-allowlist"])
    boards = _allowed_boards()
    assert boards, "no platform_allow found"
    for board in sorted(boards):
        assert board in BOARD_MODULES, f"{board}: add its HAL modules to BOARD_MODULES"
        needed, cited = BOARD_MODULES[board]
        assert cited
        assert needed <= allowlist, f"{board} needs {needed - allowlist} ({cited})"


def test_allowlisted_names_exist_in_zephyrs_manifest() -> None:
    allowlist = set(_project("zephyr")["import"]["name-allowlist"])
    assert allowlist <= ZEPHYR_PROJECTS, allowlist - ZEPHYR_PROJECTS
    for needed, _ in BOARD_MODULES.values():
        assert needed <= ZEPHYR_PROJECTS


def test_executorch_submodules_are_fetched() -> None:
    submodules = _project("executorch").get("submodules", False)
    if submodules is not True:
        paths = {s["path"] if isinstance(s, dict) else s for s in submodules or []}
        assert EXECUTORCH_SUBMODULES <= paths, EXECUTORCH_SUBMODULES - paths
    # The manifest fetches them: neither it nor the Zephyr page asks the user to.
    assert "git submodule update" not in (ROOT / "west.yml").read_text()
    zephyr_page = (ROOT / "docs" / "zephyr.md").read_text()
    assert not re.search(r"git submodule (update|init|sync)", zephyr_page)


def test_executorch_revision_is_a_known_tag() -> None:
    assert _project("executorch")["revision"] in EXECUTORCH_TAGS


def _cmake_files() -> list[Path]:
    """The samples', the ztest suite's and the module's own CMake code."""
    return sorted(
        [
            *ROOT.glob("samples/*/CMakeLists.txt"),
            ROOT / "tests/zephyr/kernels/CMakeLists.txt",
            ROOT / "CMakeLists.txt",
            *ROOT.glob("cmake/*.cmake"),
        ]
    )


def test_cmake_minimum_is_what_executorch_requires() -> None:
    found = 0
    for path in _cmake_files():
        for version in re.findall(
            r"cmake_minimum_required\s*\(\s*VERSION\s+([\d.]+)", path.read_text(), re.IGNORECASE
        ):
            found += 1
            numbers = tuple(int(part) for part in version.split("."))[:2]
            assert numbers >= EXECUTORCH_CMAKE, f"{path.relative_to(ROOT)}: {version}"
    assert found >= 2, "the samples declare their CMake version"
    page = (ROOT / "docs" / "zephyr.md").read_text()
    assert "CMake 3.24" in page, "docs/zephyr.md tells users which CMake ExecuTorch needs"
    assert f"pip install {EXECUTORCH_CMAKE_PIP}" in page, "pip would install CMake 4"
