"""cortex-m-nn's Kconfig on the symbol sets of real Cortex-M SoCs (kconfiglib).

The expected code path of each core comes from how Zephyr builds it, not from our Kconfig:
``cmake/gcc-m-cpu.cmake`` gives -mcpu (cortex-m33+nodsp without ARMV8_M_DSP, cortex-m55+nomve
without ARMV8_1_M_MVEI) and ``cmake/compiler/gcc/target_arm.cmake`` the float ABI (none
without CONFIG_FPU, hard or softfp with it); CMSIS-NN then follows the compiler's macros.
``test_isa_matches_what_gcc_predefines`` checks that chain with the real arm-none-eabi-gcc.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cortex_m_nn.core.target import Core

from .kconfig_tree import ROOT, SOCS, STUBS, configure, kconfiglib, top_kconfig

#: SoC profile -> the ISA the kernels are built for by default (FPU on where MVE exists).
DEFAULT_ISA = {
    "m0": "scalar",
    "m3": "scalar",
    "m4": "dsp",
    "m7": "dsp",
    "m33": "dsp",
    "m33-nodsp": "scalar",
    "m55": "mve",
    "m55-nomve": "dsp",
    "m85": "mve",
}
ISAS = ("mve", "dsp", "scalar")


@pytest.mark.parametrize("soc", sorted(DEFAULT_ISA))
def test_default_isa_follows_the_core(tmp_path: Path, soc: str) -> None:
    configured = configure(tmp_path, soc)
    assert configured.refused == {}
    assert configured.value("CORTEX_M_NN") == "y"
    assert configured.isa == DEFAULT_ISA[soc]


@pytest.mark.parametrize(
    ("soc", "isa"),
    [(soc, isa) for soc in sorted(DEFAULT_ISA) for isa in ISAS if isa != DEFAULT_ISA[soc]],
)
def test_an_isa_the_compiler_will_not_build_is_refused(tmp_path: Path, soc: str, isa: str) -> None:
    symbol = f"CORTEX_M_NN_ISA_{isa.upper()}"
    configured = configure(tmp_path, soc, **{symbol: "y"})
    assert symbol in configured.refused
    assert configured.isa == DEFAULT_ISA[soc]  # the build keeps the path the core has


@pytest.mark.parametrize("soc", sorted(DEFAULT_ISA))
def test_the_default_isa_can_be_assigned(tmp_path: Path, soc: str) -> None:
    symbol = f"CORTEX_M_NN_ISA_{DEFAULT_ISA[soc].upper()}"
    assert configure(tmp_path, soc, **{symbol: "y"}).refused == {}


@pytest.mark.parametrize("soc", ["m55", "m85"])
def test_mve_turns_the_fpu_on(tmp_path: Path, soc: str) -> None:
    configured = configure(tmp_path, soc)
    assert configured.value("FPU") == "y"
    assert configured.value("FP_HARDABI") == "y"
    assert configured.value("CORTEX_M_NN_MVE_WITHOUT_FPU") == "n"
    assert configured.value("CORTEX_M_NN_MVE_SOFT_ABI") == "n"


@pytest.mark.parametrize("soc", ["m4", "m7", "m33", "m55-nomve"])
def test_the_fpu_is_left_alone_without_mve(tmp_path: Path, soc: str) -> None:
    assert configure(tmp_path, soc).value("FPU") == "n"


@pytest.mark.parametrize("soc", ["m55", "m85"])
def test_mve_without_the_fpu_falls_back_to_dsp_and_warns(tmp_path: Path, soc: str) -> None:
    configured = configure(tmp_path, soc, FPU="n")
    assert configured.refused == {}
    assert configured.isa == "dsp"
    assert configured.value("CORTEX_M_NN_MVE_WITHOUT_FPU") == "y"  # CMake prints the warning
    refused = configure(tmp_path, soc, FPU="n", CORTEX_M_NN_ISA_MVE="y").refused
    assert "CORTEX_M_NN_ISA_MVE" in refused


def test_mve_with_the_soft_float_abi_is_noted(tmp_path: Path) -> None:
    configured = configure(tmp_path, "m55", FP_SOFTABI="y")
    assert configured.refused == {}
    assert configured.isa == "mve"  # -mfloat-abi=softfp keeps MVE
    assert configured.value("CORTEX_M_NN_MVE_SOFT_ABI") == "y"


def test_not_available_without_a_cortex_m_core(tmp_path: Path) -> None:
    assert "CORTEX_M_NN" in configure(tmp_path, "none").refused


def test_not_available_without_the_modules(tmp_path: Path) -> None:
    configured = configure(tmp_path, "m55", TEST_WORKSPACE_HAS_MODULES="n")
    assert "CORTEX_M_NN" in configured.refused
    dependencies = kconfiglib.expr_str(configured.kconf.syms["CORTEX_M_NN"].direct_dep)
    for needed in ("CPU_CORTEX_M", "ZEPHYR_EXECUTORCH_MODULE", "ZEPHYR_CMSIS_NN_MODULE"):
        assert needed in dependencies


@pytest.mark.parametrize("soc", ["m0", "m33-nodsp", "m55"])
def test_selects_cmsis_nn_and_cpp_and_leaves_executorchs_module_off(
    tmp_path: Path, soc: str
) -> None:
    configured = configure(tmp_path, soc)
    # The module builds ExecuTorch's runtime itself: ExecuTorch's Zephyr module stays off and
    # no system heap is asked for (docs/zephyr-verification.md, findings 1-3).
    assert configured.value("EXECUTORCH") == "n"
    assert configured.value("HEAP_MEM_POOL_ADD_SIZE_CORTEX_M_NN") == "0"
    for name in (
        "CPP",
        "REQUIRES_FULL_LIBCPP",
        "CMSIS_NN",
        "CMSIS_NN_ACTIVATION",
        "CMSIS_NN_BASICMATH",
        "CMSIS_NN_CONCATENATION",
        "CMSIS_NN_CONVOLUTION",
        "CMSIS_NN_FULLYCONNECTED",
        "CMSIS_NN_LSTM",
        "CMSIS_NN_NNSUPPORT",
        "CMSIS_NN_POOLING",
        "CMSIS_NN_SOFTMAX",
        "CMSIS_NN_SVD",
    ):
        assert configured.value(name) == "y", name


def test_rounding_defaults_to_cmsis_nn_default(tmp_path: Path) -> None:
    assert configure(tmp_path, "m55").value("CORTEX_M_NN_ROUNDING_DOUBLE") == "y"
    single = configure(tmp_path, "m55", CORTEX_M_NN_ROUNDING_SINGLE="y")
    assert single.refused == {}
    assert single.value("CORTEX_M_NN_ROUNDING_DOUBLE") == "n"


def test_a_pte_and_a_model_source_exclude_each_other(tmp_path: Path) -> None:
    both = configure(
        tmp_path, "m55", CORTEX_M_NN_MODEL_PTE='"model.pte"', CORTEX_M_NN_MODEL_SOURCE='"ds_cnn"'
    )
    assert set(both.refused) == {"CORTEX_M_NN_MODEL_SOURCE"}
    source = configure(
        tmp_path,
        "m55",
        CORTEX_M_NN_MODEL_SOURCE='"model.py:make"',
        CORTEX_M_NN_MODEL_CALIBRATION='"samples.npz"',
        CORTEX_M_NN_TEST_VECTOR="y",
        CORTEX_M_NN_MODEL_ALLOW_FALLBACK="y",
        CORTEX_M_NN_MODEL_IO_INT8="y",
    )
    assert source.refused == {}
    # Calibration, fallbacks, int8 I/O and test vectors only mean something when compiling a
    # source (a .pte carries its own I/O types).
    pte_only = configure(
        tmp_path,
        "m55",
        CORTEX_M_NN_MODEL_PTE='"model.pte"',
        CORTEX_M_NN_TEST_VECTOR="y",
        CORTEX_M_NN_MODEL_IO_INT8="y",
    )
    assert set(pte_only.refused) == {"CORTEX_M_NN_TEST_VECTOR", "CORTEX_M_NN_MODEL_IO_INT8"}


def test_kernel_registry_is_sized_unless_portable_operators_register(tmp_path: Path) -> None:
    configured = configure(tmp_path, "m55")
    assert configured.value("CORTEX_M_NN_KERNEL_REGISTRY_SIZED") == "y"
    assert configured.value("CORTEX_M_NN_KERNEL_REGISTRY_EXTRA") == "0"
    # ExecuTorch's module (for fallbacks) builds its portable operators unless told not to
    module = configure(tmp_path, "m55", EXECUTORCH="y", EXECUTORCH_BUILD_PORTABLE_OPS="n")
    assert module.value("CORTEX_M_NN_KERNEL_REGISTRY_SIZED") == "y"
    portable = configure(tmp_path, "m55", EXECUTORCH="y", EXECUTORCH_BUILD_PORTABLE_OPS="y")
    assert portable.value("CORTEX_M_NN_KERNEL_REGISTRY_SIZED") == "n"


def test_executorchs_module_gets_the_heap_its_platform_layer_needs(tmp_path: Path) -> None:
    """ExecuTorch's Zephyr PAL calls k_malloc, which Zephyr has only with a system heap
    (kernel/mempool.c); the module adds to it through Zephyr's HEAP_MEM_POOL_ADD_SIZE_ sum."""
    module = configure(tmp_path, "m55", EXECUTORCH="y")
    assert int(module.value("HEAP_MEM_POOL_ADD_SIZE_CORTEX_M_NN")) > 0
    assert module.value("CORTEX_M_NN_EXECUTORCH_LOGGING") == "n"  # ExecuTorch's own option


def test_memory_defaults(tmp_path: Path) -> None:
    configured = configure(tmp_path, "m55")
    assert configured.value("CORTEX_M_NN_MODEL_MEMORY") == ""
    assert configured.value("CORTEX_M_NN_ARENA_MEMORY") == ""
    assert configured.value("CORTEX_M_NN_METHOD_ALLOCATOR_MARGIN") == "25"
    assert configured.value("CORTEX_M_NN_FIT_CHECK") == "y"
    assert (
        "CORTEX_M_NN_METHOD_ALLOCATOR_MARGIN"
        in configure(tmp_path, "m55", CORTEX_M_NN_METHOD_ALLOCATOR_MARGIN="1000").refused
    )


def test_every_symbol_of_ours_has_the_prefix_and_help(tmp_path: Path) -> None:
    kconf = kconfiglib.Kconfig(str(top_kconfig(tmp_path)), warn_to_stderr=False)
    ours = [
        sym
        for sym in kconf.unique_defined_syms
        if any(Path(node.filename).resolve() == ROOT / "Kconfig" for node in sym.nodes)
    ]
    assert len(ours) > 10
    for sym in ours:
        # the heap's prefix is Zephyr's (kernel/CMakeLists.txt sums HEAP_MEM_POOL_ADD_SIZE_*)
        assert sym.name.removeprefix("HEAP_MEM_POOL_ADD_SIZE_").startswith("CORTEX_M_NN"), sym.name
        assert all(node.help for node in sym.nodes), f"{sym.name} has no help"


def test_no_symbol_is_used_undefined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every symbol our Kconfig names exists in the stand-in tree, so each was looked up in
    # Zephyr (or ExecuTorch) when the stand-in was written.
    monkeypatch.setenv("KCONFIG_WARN_UNDEF", "y")
    kconf = kconfiglib.Kconfig(str(top_kconfig(tmp_path)), warn_to_stderr=False)
    assert kconf.warnings == []


def test_every_stub_names_the_file_it_copies() -> None:
    lines = STUBS.read_text().splitlines()
    verification = (ROOT / "docs" / "zephyr-verification.md").read_text()
    for index, line in enumerate(lines):
        match = re.match(r"^(?:config|choice)\b\s*(\w*)", line)
        if not match or match.group(1).startswith("TEST_"):
            continue
        source = lines[index - 1]
        assert source.startswith("# from: "), f"{line!r} does not name its Zephyr file"
        path = source.removeprefix("# from: ").split()[0]
        if path == "pytorch/executorch":
            path = source.removeprefix("# from: ").split()[1]
        assert path in verification, f"{path} is not in docs/zephyr-verification.md"


# --- the core -> ISA defaults agree with cortex_m_nn.core.target --------------------------------

#: Zephyr CPU symbols the stand-in tree lacks, with the architecture each selects (as Zephyr's
#: arch/arm/core/cortex_m/Kconfig does for its Armv8-M and Armv8.1-M Mainline cores).
MISSING_CPUS = {"CPU_CORTEX_M35P": "ARMV8_M_MAINLINE", "CPU_CORTEX_M52": "ARMV8_1_M_MAINLINE"}


def cpu_symbol(core: Core) -> str:
    """``cortex-m0plus`` -> ``CPU_CORTEX_M0PLUS``."""
    return "CPU_" + core.value.upper().replace("-", "_")


def core_kconfig(directory: Path) -> Path:
    """The tree plus one ``TEST_CORE_*`` symbol per core of core/target.py, each giving its core
    every option the core's architecture allows (DSP, MVE, an FPU), so that the Kconfig's
    default ISA for it is the core's best path."""
    stubs = STUBS.read_text()
    parts = []
    for symbol, architecture in MISSING_CPUS.items():
        if f"config {symbol}\n" not in stubs:
            parts.append(
                f"config {symbol}\n\tbool\n\tselect CPU_CORTEX_M\n\tselect {architecture}\n"
            )
    for core in Core:
        parts.append(
            f'config TEST_CORE_{cpu_symbol(core)}\n\tbool "{core.value}, every option"\n'
            f"\tselect {cpu_symbol(core)}\n\tselect CPU_HAS_FPU\n"
            "\tselect ARMV8_M_DSP if ARMV8_M_MAINLINE\n"
            "\tselect ARMV8_1_M_MVEI if ARMV8_1_M_MAINLINE\n"
        )
    cores = directory / "Kconfig.cores"
    cores.write_text("\n".join(parts))
    top = directory / "Kconfig"
    top.write_text(
        f'source "{STUBS.as_posix()}"\nsource "{cores.as_posix()}"\n'
        f'source "{(ROOT / "Kconfig").as_posix()}"\n'
    )
    return top


@pytest.mark.parametrize("core", list(Core), ids=lambda core: core.value)
def test_kconfig_default_isa_is_the_cores_best_isa(tmp_path: Path, core: Core) -> None:
    kconf = kconfiglib.Kconfig(str(core_kconfig(tmp_path)), warn_to_stderr=False)
    fragment = tmp_path / "prj.conf"
    fragment.write_text(
        f"CONFIG_TEST_CORE_{cpu_symbol(core)}=y\nCONFIG_FPU=y\nCONFIG_CORTEX_M_NN=y\n"
    )
    kconf.load_config(str(fragment), replace=True)
    assert kconf.syms[cpu_symbol(core)].str_value == "y"
    assert kconf.syms["CORTEX_M_NN"].str_value == "y"
    choice = next(c for c in kconf.unique_choices if c.name == "CORTEX_M_NN_ISA")
    isa = choice.selection.name.removeprefix("CORTEX_M_NN_ISA_").lower()
    assert isa == core.best_isa.value, f"Kconfig builds {core.value} for {isa}"


def test_every_core_kconfig_knows_is_a_target_core(tmp_path: Path) -> None:
    kconf = kconfiglib.Kconfig(str(top_kconfig(tmp_path)), warn_to_stderr=False)
    known = {
        name.removeprefix("CPU_").lower().replace("_", "-")
        for name in kconf.syms
        if re.fullmatch(r"CPU_CORTEX_M\d+\w*", name)
    }
    assert len(known) >= 9
    assert known <= {core.value for core in Core}, known - {core.value for core in Core}


# --- the chain Kconfig -> -mcpu/-mfloat-abi -> compiler macros -> CMSIS-NN path -------------


#: cmake/gcc-m-cpu.cmake, for the SoC profiles (core symbol, DSP, MVE-I, MVE-F).
def gcc_m_cpu(configured) -> str:
    value = configured.value
    if value("CPU_CORTEX_M0") == "y":
        return "cortex-m0"
    if value("CPU_CORTEX_M3") == "y":
        return "cortex-m3"
    if value("CPU_CORTEX_M4") == "y":
        return "cortex-m4"
    if value("CPU_CORTEX_M7") == "y":
        return "cortex-m7"
    if value("CPU_CORTEX_M33") == "y":
        return "cortex-m33" if value("ARMV8_M_DSP") == "y" else "cortex-m33+nodsp"
    for core in ("CPU_CORTEX_M55", "CPU_CORTEX_M85"):
        if value(core) == "y":
            name = "cortex-m" + core.removeprefix("CPU_CORTEX_M")
            if value("ARMV8_1_M_MVEF") == "y":
                return name
            if value("ARMV8_1_M_MVEI") == "y":
                return name + "+nomve.fp"
            return name + ("+nomve" if value("ARMV8_M_DSP") == "y" else "+nodsp")
    raise AssertionError("no core")


#: cmake/compiler/gcc/target_arm.cmake: -mfloat-abi only with CONFIG_FPU.
def float_abi(configured) -> list[str]:
    if configured.value("FPU") != "y":
        return []
    return ["-mfloat-abi=hard" if configured.value("FP_HARDABI") == "y" else "-mfloat-abi=softfp"]


def compiler_isa(gcc: str, flags: list[str]) -> str | None:
    """The CMSIS-NN path arm_nn_math_types.h picks for these flags (None: core unknown)."""
    result = subprocess.run(
        [gcc, *flags, "-mthumb", "-dM", "-E", "-"], input="", capture_output=True, text=True
    )
    if result.returncode != 0:
        return None
    macros = result.stdout
    if re.search(r"__ARM_FEATURE_MVE [13]", macros):
        return "mve"
    if "__ARM_FEATURE_DSP 1" in macros:
        return "dsp"
    return "scalar"


@pytest.mark.parametrize(
    ("soc", "assignments"),
    [(soc, {}) for soc in sorted(DEFAULT_ISA)]
    + [("m55", {"FPU": "n"}), ("m55", {"FP_SOFTABI": "y"}), ("m85", {"FPU": "n"})],
)
def test_isa_matches_what_gcc_predefines(tmp_path: Path, soc: str, assignments: dict) -> None:
    gcc = shutil.which("arm-none-eabi-gcc")
    if gcc is None:
        pytest.skip("arm-none-eabi-gcc is not installed (Debian: gcc-arm-none-eabi)")
    configured = configure(tmp_path, soc, **assignments)
    isa = compiler_isa(gcc, [f"-mcpu={gcc_m_cpu(configured)}", *float_abi(configured)])
    if isa is None:
        pytest.skip(f"this arm-none-eabi-gcc does not know -mcpu={gcc_m_cpu(configured)}")
    assert configured.isa == isa


def test_socs_cover_the_issue_list() -> None:
    # M0, M3, M4, M7, M33 with and without DSP, M55 with and without MVE, and M85.
    assert set(DEFAULT_ISA) == set(SOCS) - {"none"}


def _prj_conf(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, value = line.split("=", 1)
            values[name.removeprefix("CONFIG_")] = value
    return values


@pytest.mark.parametrize(
    "conf",
    [*sorted(ROOT.glob("samples/*/prj.conf")), ROOT / "tests/zephyr/kernels/prj.conf"],
    ids=lambda p: p.parent.name,
)
def test_each_application_leaves_executorchs_module_off(tmp_path: Path, conf: Path) -> None:
    """Every assignment of the application's prj.conf holds (Zephyr stops otherwise; an
    option of ExecuTorch's module is undefined while it is off), and ExecuTorch's Zephyr module
    stays off: the module builds the runtime (docs/zephyr-verification.md, findings 1-3)."""
    values = _prj_conf(conf)
    overlays = "".join(path.read_text() for path in conf.parent.glob("boards/*.overlay"))
    if '"zephyr,sim-flash"' in overlays:  # the symbol Zephyr generates from the devicetree
        values["DT_HAS_ZEPHYR_SIM_FLASH_ENABLED"] = "y"
    configured = configure(tmp_path, "m55", **values)
    assert not configured.refused, configured.refused
    assert configured.value("EXECUTORCH") == "n"
    assert configured.value("STD_CPP17") == "y"  # ExecuTorch is C++17; Zephyr's default is 11


def test_loading_programs_turns_executorchs_verifier_on(tmp_path: Path) -> None:
    """An image that loads programs (none embedded, a list, or every kernel) builds ExecuTorch's
    flatbuffer verifier by default; an image with only its embedded model does not."""
    embedded = configure(tmp_path, "m55")
    assert embedded.value("CORTEX_M_NN_EMBEDDED_MODEL") == "y"
    assert embedded.value("CORTEX_M_NN_LOADS_PROGRAMS") == "n"
    assert embedded.value("CORTEX_M_NN_PROGRAM_VERIFICATION") == "n"
    for assignments in (
        {"CORTEX_M_NN_EMBEDDED_MODEL": "n"},
        {"CORTEX_M_NN_PROGRAMS": '"kws.pte"'},
        {"CORTEX_M_NN_ALL_KERNELS": "y"},
    ):
        loads = configure(tmp_path, "m55", **assignments)
        assert loads.refused == {}, assignments
        assert loads.value("CORTEX_M_NN_LOADS_PROGRAMS") == "y", assignments
        assert loads.value("CORTEX_M_NN_PROGRAM_VERIFICATION") == "y", assignments
    # with ExecuTorch's module, its own CONFIG_EXECUTORCH_ENABLE_PROGRAM_VERIFICATION decides
    module = configure(tmp_path, "m55", EXECUTORCH="y", CORTEX_M_NN_ALL_KERNELS="y")
    assert module.value("CORTEX_M_NN_PROGRAM_VERIFICATION") == "n"


def test_no_embedded_model_hides_the_model_and_its_memories(tmp_path: Path) -> None:
    alone = configure(
        tmp_path, "m55", CORTEX_M_NN_EMBEDDED_MODEL="n", CORTEX_M_NN_MODEL_SOURCE='"ds_cnn"',
        CORTEX_M_NN_ARENA_MEMORY='"isram"',
    )  # fmt: skip
    assert set(alone.refused) == {"CORTEX_M_NN_MODEL_SOURCE", "CORTEX_M_NN_ARENA_MEMORY"}


def test_the_partition_needs_zephyrs_flash_map(tmp_path: Path) -> None:
    """FLASH_MAP needs a flash driver (here the flash simulator a devicetree sim-flash node
    enables): without it the partition option cannot be set."""
    bare = configure(tmp_path, "m55", CORTEX_M_NN_MODEL_PARTITION="y")
    assert set(bare.refused) == {"CORTEX_M_NN_MODEL_PARTITION"}
    flash = configure(
        tmp_path, "m55", DT_HAS_ZEPHYR_SIM_FLASH_ENABLED="y", FLASH="y", FLASH_MAP="y",
        CORTEX_M_NN_MODEL_PARTITION="y",
    )  # fmt: skip
    assert flash.refused == {}
    assert flash.value("CORTEX_M_NN_MODEL_PARTITION_LABEL") == "model_partition"
