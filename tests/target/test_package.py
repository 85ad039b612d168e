"""The CMake package and the CMSIS-Pack on target: the runner is built through the installed
package (every test of tests/target; here, that it was), samples/bare_metal builds with it and
runs bit exact under QEMU at -Os and unoptimised, a program for another core is refused when the
image is configured; the CMSIS-Pack written from EXECUTORCH_ROOT holds what it describes, and
the csolution example's components, compiled from it, run the same model bit exact."""

from __future__ import annotations

import os
import re
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
import yaml
from elftools.elf.elffile import ELFFile
from tests.target import harness

from cortex_m_nn.cli import main as cli
from cortex_m_nn.embed import cmsis_pack

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


def test_add_model_gives_the_program_s_facts(prefix: Path, tmp_path: Path) -> None:
    from cortex_m_nn.embed.pte_source import model_facts

    models = tmp_path / "models"
    models.mkdir()
    harness.write_model(harness.compile_for("ds_cnn", M55), models)
    names = ("CORTEX_M_NN_MODEL_BYTES", "CORTEX_M_NN_ARENA_BYTES",
             "CORTEX_M_NN_METHOD_ALLOCATOR_BYTES", "CORTEX_M_NN_MODEL_CORE")  # fmt: skip
    output = _configure(
        prefix,
        tmp_path,
        f'cortex_m_nn_add_model(app PTE "{models / "ds_cnn.pte"}" METHOD_MARGIN 10)\n'
        + "".join(f'message(STATUS "{n}=${{{n}}}")\n' for n in names),
    )
    facts = model_facts((models / "ds_cnn.pte").read_bytes(), 10)
    assert f"CORTEX_M_NN_MODEL_BYTES={facts.pte_bytes}" in output
    assert f"CORTEX_M_NN_ARENA_BYTES={facts.arena_bytes}" in output
    assert f"CORTEX_M_NN_METHOD_ALLOCATOR_BYTES={facts.method_allocator_bytes}" in output
    assert "CORTEX_M_NN_MODEL_CORE=cortex-m55" in output


def _configure(prefix: Path, tmp_path: Path, body: str, ok: bool = True) -> str:
    """Configure a project that embeds with ``body`` after the runtime, for the M55."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.24)\nproject(other C CXX)\n"
        "find_package(cortex_m_nn CONFIG REQUIRED)\n"
        "cortex_m_nn_runtime(TARGET cortex-m55)\n"
        f"add_executable(app main.cpp)\n{body}"
    )
    (project / "main.cpp").write_text("int main() { return 0; }\n")
    configure = [
        "cmake", "-S", str(project), "-B", str(tmp_path / "build"),
        f"-DCMAKE_TOOLCHAIN_FILE={prefix / harness.PACKAGE_CMAKE / harness.TOOLCHAIN.name}",
        "-DCORTEX_M_NN_CPU=cortex-m55", *_definitions(prefix),
    ]  # fmt: skip
    done = subprocess.run(configure, capture_output=True, text=True)
    assert (done.returncode == 0) == ok, done.stdout + done.stderr
    return " ".join((done.stdout + done.stderr).split())


def test_a_program_for_another_core_is_refused_at_configure(prefix: Path, tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    harness.write_model(harness.compile_for("ds_cnn", harness.CORES["m33"]), models)
    output = _configure(
        prefix, tmp_path, f'cortex_m_nn_add_model(app PTE "{models / "ds_cnn.pte"}")\n', ok=False
    )
    assert "app's model was compiled for cortex-m33+dsp" in output
    assert "recompile it with cortex-m-compile --target cortex-m55+mve" in output


# --- the CMSIS-Pack -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pack, written from EXECUTORCH_ROOT as a user writes it; its unpacked tree."""
    output = tmp_path_factory.mktemp("pack")
    flatc, include = harness.flatbuffers()
    arguments = ["pack", "--output-dir", str(output), "--flatc", str(flatc), "-q"]
    assert cli.main([*arguments, "--flatbuffers-include", str(include)]) == 0
    archive = output / f"{cmsis_pack.pack_name(cmsis_pack.read_tree(harness.REPO).version)}.pack"
    with zipfile.ZipFile(archive) as zipped:
        names = set(zipped.namelist())
    tree = output / cmsis_pack.pack_name(cmsis_pack.read_tree(harness.REPO).version)
    assert names == {p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()}
    return tree


def _components(description: Path) -> dict[tuple[str, str, str], list[ET.Element]]:
    return {
        (c.get("Cclass"), c.get("Cgroup"), c.get("Csub") or ""): list(c.iter("file"))  # type: ignore[misc]
        for c in ET.parse(description).getroot().iter("component")
    }


def test_the_pack_holds_every_file_its_description_names(pack: Path) -> None:
    description = pack / f"{cmsis_pack.VENDOR}.{cmsis_pack.NAME}.pdsc"
    for files in _components(description).values():
        for entry in files:
            assert (pack / entry.get("name", "")).exists(), entry.get("name")
    schema = os.environ.get("CMSIS_PACK_SCHEMA")
    if schema:  # the schema test without a checkout is tests/python/test_cmsis_pack.py's
        xmlschema = pytest.importorskip("xmlschema")
        assert not list(xmlschema.XMLSchema(schema).iter_errors(str(description)))


def _selected(pack: Path, cproject: dict) -> tuple[list[Path], list[Path], list[Path]]:
    """What CMSIS-Toolbox compiles for the cproject's components of this pack: sources, include
    paths (an include entry, and a header's directory) and pre-included headers. ARM's
    components (CMSIS-NN's pack) are left to the caller."""
    ours = _components(pack / f"{cmsis_pack.VENDOR}.{cmsis_pack.NAME}.pdsc")
    sources: list[Path] = []
    includes: list[Path] = []
    pre: list[Path] = []
    for entry in cproject["project"]["components"]:
        match = re.fullmatch(r"(\w+)::([^:]+):([^:]+)(?::(.+))?", entry["component"])
        assert match, entry
        if match.group(1) == "ARM":
            continue
        for file in ours[(match.group(2), match.group(3), match.group(4) or "")]:
            path, category = pack / file.get("name", ""), file.get("category")
            if category == "source":
                sources.append(path)
            elif category == "include":
                includes.append(path)
            elif category == "header":
                includes.append(path.parent)
            elif category == "preIncludeGlobal":
                pre.append(path)
    return sources, list(dict.fromkeys(includes)), pre


def _quoted(paths: list[Path], prefix: str = "") -> str:
    return " ".join(f'"{prefix}{path}"' for path in paths)


def test_the_csolution_example_builds_from_the_pack_and_runs_bit_exact(
    pack: Path, tmp_path: Path
) -> None:
    """The csolution example's components, resolved in the pack's description as CMSIS-Toolbox
    resolves them, compiled with its files and settings (CMSIS-NN by its own build, as the
    toolbox takes it from ARM's pack): the same PASS as the CMake sample."""
    csolution = SAMPLE / "csolution"
    cproject = yaml.safe_load((csolution / "bare_metal.cproject.yml").read_text())
    model = tmp_path / "model"
    pte = model / "model.pte"
    vector = model / "cortex_m_nn_test_vector.h"
    hello = harness.REPO / "samples" / "hello_cortex_m_nn" / "model.py"
    compile_ = [f"{hello}:hello", "--target", "cortex-m55", "-o", str(pte), "-q"]
    assert cli.main([*compile_, "--test-vector", str(vector)]) == 0
    assert cli.main(["embed", str(pte), "--output-dir", str(model), "--registration", "-q"]) == 0
    sources, includes, pre = _selected(pack, cproject)
    for group in cproject["project"]["groups"]:
        for entry in group["files"]:
            path = Path(entry["file"])
            sources.append(model / path.name if path.parts[0] == "model" else csolution / path)
    defines = [f"{k}={v}" for item in cproject["project"]["define"] for k, v in item.items()]
    misc = cproject["project"]["misc"][0]
    linker = csolution / cproject["project"]["linker"][0]["script"]
    project = tmp_path / "project"
    project.mkdir()
    both, cpp = " ".join(misc["C-CPP"]), ";".join(misc["CPP"])
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.24)\nproject(bare_metal C CXX)\n"
        "set(CMAKE_CXX_STANDARD 17)\nset(CMAKE_C_STANDARD 11)\n"
        f"add_compile_options({both})\n"
        f"add_executable(bare_metal {_quoted(sources)})\n"
        # ARM::CMSIS:NN Lib: all of CMSIS-NN's objects, as the pack's sources would be
        f'add_subdirectory("{os.environ["CMSIS_NN_PATH"]}" cmsis-nn)\n'
        "target_link_libraries(bare_metal PRIVATE -Wl,--whole-archive cmsis-nn "
        "-Wl,--no-whole-archive)\n"
        f"target_include_directories(bare_metal PRIVATE {_quoted([*includes, model])})\n"
        f"target_compile_definitions(bare_metal PRIVATE {' '.join(defines)})\n"
        f"target_compile_options(bare_metal PRIVATE {_quoted(pre, '-include')} "
        f"$<$<COMPILE_LANGUAGE:CXX>:{cpp}>)\n"
        f'target_link_options(bare_metal PRIVATE {" ".join(misc["Link"])} "-T{linker}")\n'
        'set_target_properties(bare_metal PROPERTIES SUFFIX ".elf")\n'
    )
    # the device's flags only (CMSIS-Toolbox's from ARMCM55): no section flags of our own
    toolchain = tmp_path / "device.cmake"
    toolchain.write_text(
        "set(CMAKE_SYSTEM_NAME Generic)\nset(CMAKE_SYSTEM_PROCESSOR arm)\n"
        "set(CMAKE_C_COMPILER arm-none-eabi-gcc)\nset(CMAKE_CXX_COMPILER arm-none-eabi-g++)\n"
        "set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)\n"
        'set(CMAKE_C_FLAGS_INIT "-mcpu=cortex-m55 -mthumb -mfloat-abi=hard")\n'
        'set(CMAKE_CXX_FLAGS_INIT "${CMAKE_C_FLAGS_INIT}")\n'
    )
    build = tmp_path / "build"
    harness.cmake_build(project, build, M55, ["-DCMAKE_BUILD_TYPE=MinSizeRel"], toolchain=toolchain)
    result = harness.run(build / "bare_metal.elf", M55)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "outputs equal the compiler's references\nPASS" in result.stdout
    # the project's flags keep the cases the registration calls and leave out the others: no
    # int16 kernel case, and none of CMSIS-NN's s16 functions, though all of CMSIS-NN was linked
    with (build / "bare_metal.elf").open("rb") as elf:
        symbols = {s.name for s in ELFFile(elf).get_section_by_name(".symtab").iter_symbols()}
    registered = re.findall(r"native::(\w+)\(", (model / "cortex_m_nn_register.cpp").read_text())
    assert registered and all(any(f in name for name in symbols) for f in registered)
    assert not {name for name in symbols if name.startswith("arm_") and "_s16" in name}
    assert not {name for name in symbols if "int16" in name and "cortex_m_nn" in name}


def test_packchk_finds_no_error(pack: Path) -> None:
    """Arm's pack checker (Open-CMSIS-Pack/devtools' packchk, PACKCHK) with the pack schema
    (CMSIS_PACK_SCHEMA) and CMSIS-NN's description as the dependency it requires."""
    packchk, schema = os.environ.get("PACKCHK"), os.environ.get("CMSIS_PACK_SCHEMA")
    if not packchk or not schema:
        pytest.skip("PACKCHK (devtools' packchk) and CMSIS_PACK_SCHEMA (PACK.xsd) are not set")
    description = pack / f"{cmsis_pack.VENDOR}.{cmsis_pack.NAME}.pdsc"
    cmsis_nn = Path(os.environ["CMSIS_NN_PATH"]) / "ARM.CMSIS-NN.pdsc"
    done = subprocess.run(
        [packchk, "-s", schema, "-i", str(cmsis_nn), str(description)],
        capture_output=True, text=True, cwd=pack,
    )  # fmt: skip
    assert done.returncode == 0 and "Found 0 Error(s)" in done.stdout, done.stdout + done.stderr
