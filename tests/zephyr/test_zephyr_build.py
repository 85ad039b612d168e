"""Each sample and the kernel test through the module's real CMake path, as a Zephyr build
takes it: Kconfig evaluated from the application's prj.conf (kconfig_tree), the workspace's
modules processed in order by a stand-in of Zephyr's CMake package (zephyr_package/: real
targets, Zephyr's compile options), with ExecuTorch's real zephyr/CMakeLists.txt
(EXECUTORCH_ROOT) and the CMSIS-NN checkout (CMSIS_NN_PATH). Then:

- CMake configures **and generates** the build (install(EXPORT) checks run at generation);
- the image's libraries (the application, cortex_m_nn, ExecuTorch's runtime) compile for
  Cortex-M55, M33 and M4 with Zephyr's flags and -Werror at -Os and -O2;
- every symbol they leave to Zephyr exists under the application's Kconfig (k_malloc only
  with a system heap, kernel/mempool.c).

CMSIS-NN's own sources (built by Zephyr's modules/cmsis-nn library) are not compiled here.
Needs EXECUTORCH_ROOT, CMSIS_NN_PATH, arm-none-eabi-gcc and flatbuffers (tests/target's
harness finds them: FLATC_EXECUTABLE or the executorch wheel's flatc, FLATBUFFERS_INCLUDE_DIR).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.target import harness
from tests.zephyr import kconfig_tree, zephyr_flags
from tests.zephyr.test_arm_compile import CORES
from tests.zephyr.test_cmake_module import AN547, python_without_torch

from cortex_m_nn.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(__file__).resolve().parent / "zephyr_package"

#: application → its directory
APPS = {
    "hello_cortex_m_nn": ROOT / "samples" / "hello_cortex_m_nn",
    "keyword_spotting": ROOT / "samples" / "keyword_spotting",
    "kernels": ROOT / "tests" / "zephyr" / "kernels",
    "two_models": ROOT / "samples" / "two_models",
}
#: Per application: Kconfig symbols Zephyr generates from its board overlays, and devicetree
#: nodes (STUB_DT_*) the overlays add. two_models: the flash simulator's model_partition.
DEVICETREE = {
    "two_models": (
        {"DT_HAS_ZEPHYR_SIM_FLASH_ENABLED": "y"},
        {
            "STUB_DT_LABEL_model_partition": "/sim-flash-controller@0/flash_sim@0/partitions/"
            "partition@0",
            "STUB_DT_ADDR__sim_flash_controller_0_flash_sim_0_partitions_partition_0": "0x0",
            "STUB_DT_SIZE__sim_flash_controller_0_flash_sim_0_partitions_partition_0": "0x40000",
        },
    ),
}
#: core → the kconfig_tree SoC profile that selects it
SOCS = {"cortex-m55": "m55", "cortex-m33": "m33", "cortex-m4": "m4"}

#: Every symbol an image may leave to Zephyr, and when Zephyr provides it: a .config → bool.
#: k_malloc is compiled only with a non-empty system heap (kernel/mempool.c: K_HEAP_MEM_POOL_SIZE
#: > 0, the larger of CONFIG_HEAP_MEM_POOL_SIZE and the sum of CONFIG_HEAP_MEM_POOL_ADD_SIZE_*,
#: kernel/CMakeLists.txt); the others always (printk with CONFIG_PRINTK, default y).
ZEPHYR_SYMBOLS = {
    "k_malloc": lambda config: heap_size(config) > 0,
    "k_free": lambda config: True,
    "k_uptime_ticks": lambda config: True,
    "k_cycle_get_32": lambda config: True,
    "k_fatal_halt": lambda config: True,
    "printk": lambda config: config.get("CONFIG_PRINTK", "y") == "y",
    # subsys/storage/flash_map (flash_map.c, flash_map_default.c) with CONFIG_FLASH_MAP
    **{
        f"flash_area_{name}": lambda config: config.get("CONFIG_FLASH_MAP") == "y"
        for name in ("open", "close", "read", "write", "erase", "align", "erased_val")
    },
    "ztest_stand_in_fail": lambda config: config.get("CONFIG_ZTEST") == "y",
}


def heap_size(config: dict[str, str]) -> int:
    added = sum(int(v) for k, v in config.items() if k.startswith("CONFIG_HEAP_MEM_POOL_ADD_SIZE_"))
    return max(int(config.get("CONFIG_HEAP_MEM_POOL_SIZE", "0")), added)


def _missing() -> str | None:
    missing = harness.missing()
    if missing is not None:
        return missing
    if not (Path(os.environ["EXECUTORCH_ROOT"]) / "zephyr" / "CMakeLists.txt").is_file():
        return "EXECUTORCH_ROOT has no zephyr/CMakeLists.txt (ExecuTorch's Zephyr module)"
    return None


@dataclass
class Configured:
    build: Path
    config: dict[str, str]
    result: subprocess.CompletedProcess


def prj_conf(app: Path) -> dict[str, str]:
    """The application's prj.conf as symbol (without CONFIG_) → value."""
    values = {}
    for line in (app / "prj.conf").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, value = line.split("=", 1)
            values[name.removeprefix("CONFIG_")] = value
    return values


def read_config(path: Path) -> dict[str, str]:
    """A .config as Zephyr's import_kconfig reads it (quotes stripped, unset symbols absent)."""
    found = re.findall(r"^(CONFIG_\w+)=(.*)$", path.read_text(), flags=re.M)
    return {name: value.strip('"') for name, value in found}


def configure(
    app: Path,
    core: str,
    build: Path,
    level: str,
    *,
    python: str = sys.executable,
    conf: dict[str, str] | None = None,
    **extra: str,
) -> Configured:
    """Kconfig for ``app`` on ``core``'s SoC (its prj.conf, or ``conf``, with ``extra``;
    refused assignments fail, as Zephyr stops on them), then CMake through the stand-in package
    at optimisation ``level``, with ``python`` as Zephyr's Python and cortex-m-nn's."""
    build.mkdir(parents=True, exist_ok=True)
    generated, nodes = DEVICETREE.get(app.name, ({}, {}))
    assignments = {**(prj_conf(app) if conf is None else conf), **generated, **extra}
    tree = kconfig_tree.configure(build, SOCS[core], **assignments)
    assert not tree.refused, f"Kconfig refuses {tree.refused} (Zephyr would stop here)"
    tree.kconf.write_config(str(build / ".config"))
    tree.kconf.write_autoconf(str(build / "autoconf.h"))
    flatc, include = harness.flatbuffers()
    cpu, _ = CORES[core]
    definitions = {
        "STAND_IN_DOTCONFIG": build / ".config",
        "STAND_IN_CPU_FLAGS": ";".join(cpu),
        "STAND_IN_MODULES": ";".join([
            f"cmsis-nn={os.environ['CMSIS_NN_PATH']}",
            f"executorch={os.environ['EXECUTORCH_ROOT']}",
            f"cortex-m-nn={ROOT}",
        ]),
        "STAND_IN_COMPILE_OPTIONS": ";".join([
            f"-imacros{build / 'autoconf.h'}", level, *zephyr_flags.COMMON,
            *zephyr_flags.WARNINGS, *zephyr_flags.WERROR,
        ]),
        "STAND_IN_C_OPTIONS": ";".join(zephyr_flags.C_ONLY),
        "STAND_IN_CXX_OPTIONS": ";".join(zephyr_flags.CXX),
        "STAND_IN_INCLUDE_DIRECTORIES": PACKAGE / "include",
        "FLATC_EXECUTABLE": flatc,
        "FLATBUFFERS_INCLUDE_DIR": include,
        # ExecuTorch's module looks for CMSIS-NN beside ZEPHYR_BASE, else downloads it.
        "CMSIS_NN_LOCAL_PATH": os.environ["CMSIS_NN_PATH"],
        "PYTHON_EXECUTABLE": python,
        "Python3_EXECUTABLE": python,
        **{k: v for k, v in AN547.items() if k.startswith("STUB_DT_") or k.startswith("BOARD")},
        **nodes,
    }  # fmt: skip
    environment = dict(os.environ, ZEPHYR_BASE=str(PACKAGE), CORTEX_M_NN_PYTHON=python)
    command = ["cmake", "-S", str(app), "-B", str(build / "cmake"), "-Wno-dev"]
    command += [f"-D{name}={value}" for name, value in definitions.items()]
    result = subprocess.run(command, capture_output=True, text=True, env=environment)
    return Configured(build, read_config(build / ".config"), result)


def build_libraries(
    configured: Configured, targets: tuple[str, ...] = ("app", "cortex_m_nn")
) -> subprocess.CompletedProcess:
    """The image's libraries but Zephyr's CMSIS-NN library: by default the application,
    cortex_m_nn and what it links (ExecuTorch's runtime)."""
    command = ["cmake", "--build", str(configured.build / "cmake"), "-j", str(os.cpu_count())]
    return subprocess.run([*command, "--target", *targets], capture_output=True, text=True)


def left_to_zephyr(configured: Configured, core: str) -> set[str]:
    """Symbols the built libraries need that neither they, CMSIS-NN (arm_*) nor the
    toolchain's C and C++ libraries define."""
    archives = [a for a in (configured.build / "cmake").rglob("*.a") if "cmsis-nn" not in a.parts]
    defined, undefined = set(), set()
    for archive in archives:
        listing = subprocess.run(
            ["arm-none-eabi-nm", "-g", str(archive)], capture_output=True, text=True, check=True
        ).stdout
        for kind, name in re.findall(r"^\s*(?:[0-9a-f]+\s+)?([A-Za-z])\s+(\S+)$", listing, re.M):
            (undefined if kind == "U" else defined).add(name)
    cpu, _ = CORES[core]
    for library in ("libc.a", "libm.a", "libstdc++.a", "libgcc.a"):
        path = subprocess.run(
            ["arm-none-eabi-gcc", *cpu, "-mthumb", f"-print-file-name={library}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        listing = subprocess.run(
            ["arm-none-eabi-nm", "-g", "--defined-only", path], capture_output=True, text=True
        ).stdout
        defined.update(re.findall(r"^\s*[0-9a-f]+\s+[A-Za-z]\s+(\S+)$", listing, re.M))
    return {name for name in undefined - defined if not name.startswith("arm_")}


@pytest.fixture(scope="module")
def build_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build directory per application and core, reconfigured per optimisation level (the
    model is compiled once: the module compiles it again only when an input changes)."""
    missing = _missing()
    if missing is not None:
        pytest.skip(missing)
    if shutil.which("arm-none-eabi-nm") is None:
        pytest.skip("arm-none-eabi-nm is not on PATH (Debian: binutils-arm-none-eabi)")
    return tmp_path_factory.mktemp("zephyr-build")


@pytest.mark.parametrize("core", list(SOCS))
@pytest.mark.parametrize("app", list(APPS))
@pytest.mark.parametrize("level", list(zephyr_flags.OPTIMIZATIONS.values()))
def test_generates_compiles_and_leaves_zephyr_only_what_it_has(
    build_root: Path, app: str, core: str, level: str
) -> None:
    configured = configure(APPS[app], core, build_root / f"{app}-{core}", level)
    output = configured.result.stdout + configured.result.stderr
    assert configured.result.returncode == 0, output[-4000:]
    assert "CMake Error" not in output, output[-4000:]
    built = build_libraries(configured)
    assert built.returncode == 0, (built.stdout + built.stderr)[-6000:]
    needed = left_to_zephyr(configured, core)
    unknown = sorted(needed - set(ZEPHYR_SYMBOLS))
    assert not unknown, f"symbols no table entry says Zephyr provides: {unknown}"
    absent = sorted(s for s in needed if not ZEPHYR_SYMBOLS[s](configured.config))
    assert not absent, f"Zephyr does not provide {absent} under this Kconfig"


def test_with_executorchs_own_module_the_image_generates_and_has_its_heap(build_root: Path) -> None:
    """CONFIG_EXECUTORCH=y (ExecuTorch's Zephyr module builds the runtime, for portable
    fallback kernels): ExecuTorch's real top-level CMake runs, its install(EXPORT) must not stop
    generation, its runtime (logging on, its default) compiles under -Werror, and its platform
    layer's k_malloc has a heap. Only ExecuTorch's executorch_core is built: the rest of what
    its module links (kernels_util_all_deps) stops a -Werror build on -Wdouble-promotion
    (docs/zephyr-verification.md), one reason the module builds the runtime itself."""
    root = Path(os.environ["EXECUTORCH_ROOT"])
    submodules = ("third-party/json", "third-party/flatcc", "backends/xnnpack/third-party/FXdiv")
    for submodule in submodules:
        if not (root / submodule / "CMakeLists.txt").is_file():
            pytest.skip(f"EXECUTORCH_ROOT's submodule {submodule} is not initialised")
    pytest.importorskip("torchgen", reason="ExecuTorch's module generates code with torchgen")
    app = APPS["hello_cortex_m_nn"]
    configured = configure(app, "cortex-m55", build_root / "glue", "-Os", EXECUTORCH="y")
    output = configured.result.stdout + configured.result.stderr
    assert configured.result.returncode == 0, output[-4000:]
    built = build_libraries(configured, ("executorch_core",))
    assert built.returncode == 0, (built.stdout + built.stderr)[-6000:]
    needed = left_to_zephyr(configured, "cortex-m55")
    assert "k_malloc" in needed  # ExecuTorch's runtime/platform/default/zephyr.cpp
    absent = sorted(s for s in needed - {"k_malloc"} if s not in ZEPHYR_SYMBOLS)
    assert not absent, f"symbols no table entry says Zephyr provides: {absent}"
    assert ZEPHYR_SYMBOLS["k_malloc"](configured.config), "no system heap: k_malloc is missing"


def test_a_prebuilt_model_builds_with_a_python_without_torch(
    build_root: Path, tmp_path: Path
) -> None:
    """CONFIG_CORTEX_M_NN_MODEL_PTE in a workspace whose Python has no torch (a fresh Zephyr
    workspace's): the module, ExecuTorch's runtime and the kernels configure, generate and
    compile with it."""
    pte = tmp_path / "hello.pte"
    model = f"{APPS['hello_cortex_m_nn'] / 'model.py'}:hello"
    assert cli.main([model, "--target", "cortex-m55", "-o", str(pte), "-q"]) == 0
    conf = {"CORTEX_M_NN": "y", "CORTEX_M_NN_MODEL_PTE": f'"{pte}"', "STD_CPP17": "y"}
    bare = str(python_without_torch(tmp_path))
    configured = configure(
        APPS["hello_cortex_m_nn"], "cortex-m55", build_root / "prebuilt", "-Os", python=bare,
        conf=conf,
    )  # fmt: skip
    output = configured.result.stdout + configured.result.stderr
    assert configured.result.returncode == 0, output[-4000:]
    assert f"cortex-m-nn: Python {bare}" in output
    built = build_libraries(configured, ("cortex_m_nn",))
    assert built.returncode == 0, (built.stdout + built.stderr)[-6000:]
