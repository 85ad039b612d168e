"""The CMSIS-Pack's description (cortex_m_nn.embed.cmsis_pack) and the csolution example
(samples/bare_metal/csolution), without ExecuTorch's sources: their file lists against the
tree's, and, where the Open-CMSIS-Pack schemas are given, against the schemas. The pack built
from an ExecuTorch checkout, compiled and run: tests/target/test_package.py."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from cortex_m_nn.cli import main as cli
from cortex_m_nn.core.operators import load_yaml
from cortex_m_nn.embed import cmsis_pack

ROOT = Path(__file__).resolve().parents[2]
CSOLUTION = ROOT / "samples" / "bare_metal" / "csolution"
HELLO = ROOT / "samples" / "hello_cortex_m_nn" / "model.py"
#: PACK.xsd of Open-CMSIS-Pack-Spec (schema/PACK.xsd), and the directory of CMSIS-Toolbox's
#: csolution schemas (Open-CMSIS-Pack/devtools, tools/projmgr/schemas).
PACK_SCHEMA = "CMSIS_PACK_SCHEMA"
TOOLBOX_SCHEMAS = "CMSIS_TOOLBOX_SCHEMAS"
#: ExecuTorch's runtime as a stand-in list (the real one comes from a checkout).
RUNTIME = cmsis_pack.Runtime(
    "1.5.0",
    ("runtime/executor/program.cpp",),
    "runtime/kernel/operator_registry.cpp",
    ("kernels/prim_ops/register_prim_ops.cpp",),
    20,
)


@pytest.fixture(scope="module")
def lists() -> dict[str, tuple[str, ...]]:
    return cmsis_pack.read_source_lists(ROOT)


@pytest.fixture(scope="module")
def pdsc() -> str:
    return cmsis_pack.description(cmsis_pack.read_tree(ROOT), RUNTIME)


def components(pdsc_text: str) -> dict[tuple[str, str, str], list[tuple[str, str]]]:
    """(Cclass, Cgroup, Csub) → [(category, name)] of each component."""
    found = {}
    for component in ET.fromstring(pdsc_text).iter("component"):
        key = (component.get("Cclass"), component.get("Cgroup"), component.get("Csub"))
        found[key] = [(f.get("category"), f.get("name")) for f in component.iter("file")]
    return found  # type: ignore[return-value]


def test_the_source_lists_name_every_source_of_the_tree(lists: dict) -> None:
    listed = {path for paths in lists.values() for path in paths}
    for path in listed:
        assert (ROOT / path).is_file(), path
    compute = {p.relative_to(ROOT).as_posix() for p in ROOT.glob("kernels/compute/*.cpp")}
    assert compute <= set(lists["CORTEX_M_NN_KERNEL_SUPPORT_SOURCES"])
    zephyr_only = {"src/flash_partition.cpp", "src/executorch_pal_zephyr.cpp"}
    sources = {p.relative_to(ROOT).as_posix() for p in ROOT.glob("src/*.cpp")} - zephyr_only
    assert sources == set(lists["CORTEX_M_NN_API_SOURCES"] + lists["CORTEX_M_NN_EMBEDDED_SOURCES"])


def test_the_pack_has_our_sources_and_one_component_per_kernel(pdsc: str, lists: dict) -> None:
    found = components(pdsc)
    ours = {key: files for key, files in found.items() if key[1] != cmsis_pack.EXECUTORCH_GROUP}
    named = {name for files in ours.values() for category, name in files if category == "source"}
    _, operators = load_yaml()
    kernels = {f"kernels/op_{op.name}.cpp" for op in operators}
    # as CMSIS-NN's check_pdsc.sh checks its own: every source of the tree listed, no other
    on_disk = {p.relative_to(ROOT).as_posix() for p in ROOT.glob("kernels/op_*.cpp")}
    assert kernels == on_disk
    expected = kernels | {
        path
        for name in ("CORTEX_M_NN_API_SOURCES", "CORTEX_M_NN_EMBEDDED_SOURCES",
                     "CORTEX_M_NN_KERNEL_SUPPORT_SOURCES")
        for path in lists[name]
    }  # fmt: skip
    assert named == expected
    for op in operators:
        assert ours[(cmsis_pack.CLASS, cmsis_pack.KERNEL_GROUP, op.name)] == [
            ("source", f"kernels/op_{op.name}.cpp")
        ]
    runtime = found[(cmsis_pack.CLASS, cmsis_pack.EXECUTORCH_GROUP, "Runtime core")]
    assert ("source", "executorch/executorch/runtime/executor/program.cpp") in runtime
    assert ("preIncludeGlobal", "executorch/cortex_m_nn_executorch_config.h") in runtime


def test_every_condition_a_component_names_exists(pdsc: str) -> None:
    root = ET.fromstring(pdsc)
    conditions = {c.get("id") for c in root.iter("condition")}
    used = {c.get("condition") for c in root.iter("component")}
    used |= {r.get("condition") for r in root.iter("require") if r.get("condition")}
    assert used <= conditions
    assert conditions <= used, f"unused conditions: {conditions - used}"
    cores = {a.get("Dcore") for a in root.iter("accept")}
    assert len(cores) == 11 and "Cortex-M55" in cores and "Cortex-M0+" in cores


def _component_ids(cproject: dict) -> list[str]:
    return [entry["component"] for entry in cproject["project"]["components"]]


def _resolve(identifier: str) -> tuple[str, str, str]:
    """``Vendor::Cclass:Cgroup:Csub`` → (Cclass, Cgroup, Csub)."""
    match = re.fullmatch(r"(?:(\w+)::)?([^:]+):([^:]+)(?::([^:@]+))?", identifier)
    assert match, identifier
    return match.group(2), match.group(3), match.group(4) or ""


@pytest.fixture(scope="module")
def hello_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = tmp_path_factory.mktemp("model")
    pte = model / "model.pte"
    assert cli.main([f"{HELLO}:hello", "--target", "cortex-m55", "-o", str(pte), "-q"]) == 0
    arguments = ["embed", str(pte), "--output-dir", str(model), "--registration", "-q"]
    assert cli.main(arguments) == 0
    return model


def test_the_csolution_example_lists_what_the_model_and_the_pack_have(
    pdsc: str, hello_model: Path
) -> None:
    cproject = yaml.safe_load((CSOLUTION / "bare_metal.cproject.yml").read_text())
    found = components(pdsc)
    ids = [_resolve(i) for i in _component_ids(cproject)]
    ours = [key for key in ids if key[0] == cmsis_pack.CLASS]
    assert all(key in found for key in ours), set(ours) - set(found)
    assert ("CMSIS", "NN Lib", "") in ids
    # the kernels the model calls, and only those, with room for them in the registry
    facts = (hello_model / "cortex_m_nn_model.cmake").read_text()
    kernels = re.search(r'set\(CORTEX_M_NN_MODEL_KERNELS "([^"]*)"\)', facts)
    assert kernels is not None
    called = set(kernels.group(1).split(";"))
    listed = {sub for _, group, sub in ours if group == cmsis_pack.KERNEL_GROUP}
    assert listed == called
    defines = {k: v for entry in cproject["project"]["define"] for k, v in entry.items()}
    assert defines["MAX_KERNEL_NUM"] == len(called)
    # its files: the sample's own, and what embed --registration writes
    for group in cproject["project"]["groups"]:
        for entry in group["files"]:
            path = Path(entry["file"])
            if path.parts[0] == "model":
                assert (hello_model / path.name).is_file(), path
            else:
                assert (CSOLUTION / path).is_file(), path
    assert (CSOLUTION / cproject["project"]["linker"][0]["script"]).is_file()


def _schema_path(variable: str) -> Path:
    value = os.environ.get(variable)
    if not value or not Path(value).exists():
        pytest.skip(f"{variable} is not set to the Open-CMSIS-Pack schema (see this file)")
    return Path(value)


def test_the_description_validates_against_the_pack_schema(pdsc: str) -> None:
    xmlschema = pytest.importorskip("xmlschema")
    schema = xmlschema.XMLSchema(str(_schema_path(PACK_SCHEMA)))
    errors = [f"{e.path}: {e.reason}" for e in schema.iter_errors(pdsc)]
    assert not errors, errors[:5]
    # the control: a language the schema does not have is found
    assert list(schema.iter_errors(pdsc.replace('language="cpp"', 'language="c++"', 1)))


def test_the_csolution_example_validates_against_cmsis_toolbox_schemas() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    referencing = pytest.importorskip("referencing")
    directory = _schema_path(TOOLBOX_SCHEMAS)
    resources = []
    for path in directory.glob("*.json"):
        contents = json.loads(path.read_text())
        resource = referencing.Resource.from_contents(contents)
        resources += [(path.name, resource), (contents.get("$id", path.name), resource)]
    registry = referencing.Registry().with_resources(resources)
    for kind in ("csolution", "cproject"):
        schema = json.loads((directory / f"{kind}.schema.json").read_text())
        document = yaml.safe_load((CSOLUTION / f"bare_metal.{kind}.yml").read_text())
        validator = jsonschema.Draft7Validator(schema, registry=registry)
        assert not [e.message for e in validator.iter_errors(document)], kind
        document[kind.removeprefix("c")]["misspelt"] = 1
        assert list(validator.iter_errors(document)), f"{kind}: the control was not refused"


def test_pack_without_executorch_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EXECUTORCH_ROOT", raising=False)
    assert cli.main(["pack", "--output-dir", str(tmp_path)]) != 0
    assert "--executorch-root DIR" in capsys.readouterr().err
    missing = tmp_path / "no-executorch"
    arguments = ["pack", "--output-dir", str(tmp_path), "--executorch-root", str(missing)]
    assert cli.main(arguments) != 0
    error = capsys.readouterr().err.strip()
    assert "is not an ExecuTorch checkout" in error and "\n" not in error
    assert not list(tmp_path.glob("*.pack"))


def test_the_csolution_names_the_pack_this_tree_writes() -> None:
    csolution = yaml.safe_load((CSOLUTION / "bare_metal.csolution.yml").read_text())
    ours = [p for p in csolution["solution"]["packs"] if p["pack"].startswith(cmsis_pack.VENDOR)]
    version = cmsis_pack.read_tree(ROOT).version
    assert len(ours) == 1 and Path(ours[0]["path"]).name == cmsis_pack.pack_name(version)


def _stand_in_executorch(root: Path) -> None:
    """An ExecuTorch checkout's shape, a few files of each kind (the real one: tests/target)."""
    files = {
        "runtime/executor/program.cpp": "#include <executorch/runtime/core/error.h>\n",
        "runtime/core/error.h": "#pragma once\n",
        "runtime/kernel/operator_registry.cpp": "",
        "runtime/platform/default/minimal.cpp": "",
        "runtime/platform/default/posix.cpp": "",
        "kernels/prim_ops/register_prim_ops.cpp": 'Kernel("a", f), Kernel(\n  "b", g)\n',
        "schema/program.fbs": "namespace executorch_flatbuffer;\ntable Program { a: int; }\n"
        "root_type Program;\n",
        "schema/scalar_type.fbs": "namespace executorch_flatbuffer;\nenum ScalarType : byte "
        "{ Byte = 0 }\n",
        "shim_et/xplat/executorch/build/build_variables.bzl": "EXECUTORCH_CORE_SRCS = ["
        '"runtime/executor/program.cpp", "runtime/kernel/operator_registry.cpp", '
        '"runtime/platform/default/posix.cpp"]\nEXECUTORCH_SRCS = '
        '["kernels/prim_ops/register_prim_ops.cpp"]\n',
        "version.txt": "1.5.0\n",
        "include/flatbuffers/flatbuffers.h": "#pragma once\n",
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def test_pack_replaces_its_own_output_refuses_other_and_leaves_it_on_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    try:
        flatc = cmsis_pack.find_flatc(None)
    except cmsis_pack.PackError:
        pytest.skip("no flatc: the executorch wheel's or one on PATH")
    executorch, output = tmp_path / "executorch", tmp_path / "out"
    _stand_in_executorch(executorch)
    common = ["pack", "--output-dir", str(output), "--executorch-root", str(executorch), "-q"]
    common += ["--flatc", str(flatc), "--flatbuffers-include", str(executorch / "include")]
    assert cli.main(common) == 0
    name = cmsis_pack.pack_name(cmsis_pack.read_tree(ROOT).version)
    pdsc = output / name / f"{cmsis_pack.VENDOR}.{cmsis_pack.NAME}.pdsc"
    assert "registers all 2" in pdsc.read_text()  # the stand-in's two Kernel("…") entries
    assert not (output / name / "executorch/executorch/runtime/platform/default/posix.cpp").exists()
    (output / name / "stale.txt").write_text("from an older pack")
    assert cli.main(common) == 0
    assert not (output / name / "stale.txt").exists()
    # a failing run refuses in one line and leaves the pack it found, and nothing else
    before = sorted(p.relative_to(output) for p in output.rglob("*"))
    assert cli.main([*common, "--flatbuffers-include", str(tmp_path)]) != 0
    error = capsys.readouterr().err.strip()
    assert "has no flatbuffers/flatbuffers.h" in error and "\n" not in error
    assert sorted(p.relative_to(output) for p in output.rglob("*")) == before
    # a directory of that name that is not a pack is refused, untouched
    other = tmp_path / "other"
    (other / name).mkdir(parents=True)
    (other / name / "mine.txt").write_text("keep")
    assert cli.main([*common[:1], "--output-dir", str(other), *common[3:]]) != 0
    assert "exists and is not a pack" in capsys.readouterr().err
    assert (other / name / "mine.txt").read_text() == "keep"
