"""The CMSIS-Pack: cortex-m-nn's firmware side as pack components, for CMSIS-Toolbox and Keil.

``cortex-m-compile pack`` writes ``CortexMNN.cortex-m-nn.<version>.pack`` (a zip) and the same
tree unpacked beside it. Its description (``.pdsc``) is made from the lists every other build
uses: ``cmake/sources.cmake`` (the API, the embedded model, the kernels' support), one kernel
component per operator of ``operators.yaml`` (``kernels/op_<name>.cpp``), and ExecuTorch's own
runtime source list (``EXECUTORCH_CORE_SRCS`` in its ``build_variables.bzl``, read as
``cmake/executorch_runtime.cmake`` reads it), whose files and program-schema headers (``flatc``)
the pack carries. CMSIS-NN is ARM's own pack (``ARM::CMSIS:NN Lib``), required, not carried.

A project selects the API, the ExecuTorch runtime and the kernels its program calls (``embed``
lists them under ``kernels:``; ``embed --registration`` writes the program's kernel
registration). Everything of ours comes from the tree named (``--tree``): its files, its
operators and its version.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from pathlib import Path

from cortex_m_nn.core.operators import Operator, load_yaml

VENDOR = "CortexMNN"
NAME = "cortex-m-nn"
CLASS = "Machine Learning"
GROUP = "cortex-m-nn"
KERNEL_GROUP = "cortex-m-nn kernels"
EXECUTORCH_GROUP = "ExecuTorch"
#: The oldest CMSIS-NN release the pack accepts (ARM::CMSIS-NN, this version or newer).
CMSIS_NN_VERSION = "7.0.0"
SCHEMA_VERSION = "1.7.60"
#: The cores cortex-m-nn compiles for, as the pack schema names them (Dcore).
CORES = (
    "Cortex-M0", "Cortex-M0+", "Cortex-M3", "Cortex-M4", "Cortex-M7", "Cortex-M23",
    "Cortex-M33", "Cortex-M35P", "Cortex-M52", "Cortex-M55", "Cortex-M85",
)  # fmt: skip
#: What ExecuTorch's runtime is compiled with (cmake/executorch_runtime.cmake's definitions:
#: no log strings, no flatbuffers verifier, flatbuffers' checks end in et_pal_abort).
RUNTIME_DEFINES = (
    "C10_USING_CUSTOM_GENERATED_MACROS",
    "FLATBUFFERS_MAX_ALIGNMENT=1024",
    "FLATBUFFERS_ASSERT=CORTEX_M_NN_FLATBUFFERS_CHECK",
    "FLATBUFFERS_ASSERT_INCLUDE=<cortex_m_nn/flatbuffers_check.h>",
    "ET_LOG_ENABLED=0",
    "ET_ENABLE_PROGRAM_VERIFICATION=0",
)


class PackError(ValueError):
    """A tree or an ExecuTorch checkout the pack cannot be made from; the message says why."""


def tree_root() -> Path:
    """The cortex-m-nn tree this package sits in (a checkout, or an installed CMake package)."""
    return Path(__file__).resolve().parents[3]


def read_source_lists(root: Path) -> dict[str, tuple[str, ...]]:
    """``cmake/sources.cmake``'s lists: name → paths relative to the tree."""
    path = root / "cmake" / "sources.cmake"
    if not path.is_file():
        raise PackError(
            f"{root} is not a cortex-m-nn tree (no cmake/sources.cmake): name one with --tree"
        )
    text = re.sub(r"#[^\n]*", "", path.read_text())
    lists = {}
    for name, body in re.findall(r"set\((CORTEX_M_NN_\w+)\s+([^)]*)\)", text):
        lists[name] = tuple(body.split())
    return lists


@dataclass(frozen=True)
class Tree:
    """A cortex-m-nn tree: its source lists, version and operators."""

    root: Path
    lists: dict[str, tuple[str, ...]]
    version: str
    ops_version: int
    operators: tuple[Operator, ...]


def read_tree(root: Path) -> Tree:
    lists = read_source_lists(root)
    package = root / "python" / "cortex_m_nn"
    found = re.search(r'__version__ = "([0-9.]+)"', (package / "version.py").read_text())
    if found is None:
        raise PackError(f"{package / 'version.py'} names no __version__")
    ops_version, operators = load_yaml(package / "ops" / "operators.yaml")
    return Tree(root, lists, found.group(1), ops_version, tuple(operators))


@dataclass(frozen=True)
class Runtime:
    """ExecuTorch's runtime subset: sources by component, the version, and how many operators
    its primitive-operator source registers (all of them, when linked)."""

    version: str
    core: tuple[str, ...]
    registry: str
    prim_ops: tuple[str, ...]
    prim_count: int = 0


def executorch_runtime(root: Path) -> Runtime:
    """ExecuTorch's own lists, filtered as ``cmake/executorch_runtime.cmake`` filters them:
    the minimal platform layer only, the kernel registry apart (sized per program)."""
    variables = root / "shim_et" / "xplat" / "executorch" / "build" / "build_variables.bzl"
    if not variables.is_file():
        raise PackError(f"{root} is not an ExecuTorch checkout (no {variables.name}): name one")
    names: dict[str, object] = {}
    exec(compile(variables.read_text(), str(variables), "exec"), names)  # noqa: S102
    core = [s for s in names["EXECUTORCH_CORE_SRCS"] if not _default_pal(s)]  # type: ignore[attr-defined]
    core.append("runtime/platform/default/minimal.cpp")
    registry = "runtime/kernel/operator_registry.cpp"
    if registry not in core:
        raise PackError(f"EXECUTORCH_CORE_SRCS has no {registry}: this ExecuTorch is too new")
    core.remove(registry)
    version_file = root / "version.txt"
    version = version_file.read_text().strip() if version_file.is_file() else "0.0.0"
    prims = tuple(names["EXECUTORCH_SRCS"])  # type: ignore[arg-type]
    registered = sum(
        len(re.findall(r'Kernel\(\s*"', (root / source).read_text(errors="replace")))
        for source in prims
        if (root / source).is_file()
    )
    return Runtime(version, tuple(core), registry, prims, registered)


def _default_pal(source: str) -> bool:
    return re.fullmatch(r"runtime/platform/default/[^/]*\.cpp", source) is not None


# --- the description ----------------------------------------------------------------------------


def _file(files: ET.Element, category: str, name: str, language: str | None = None) -> None:
    attributes = {"category": category, "name": name}
    if language:
        attributes["language"] = language
    ET.SubElement(files, "file", attributes)


def _source(files: ET.Element, name: str) -> None:
    _file(files, "source", name, "cpp" if name.endswith(".cpp") else "c")


def _component(parent: ET.Element, group: str, sub: str, version: str, condition: str,
               description: str) -> ET.Element:  # fmt: skip
    component = ET.SubElement(parent, "component", {
        "Cclass": CLASS, "Cgroup": group, "Csub": sub, "Cversion": version,
        "condition": condition,
    })  # fmt: skip
    ET.SubElement(component, "description").text = description
    return ET.SubElement(component, "files")


def _component_filter(group: str, sub: str) -> dict[str, str]:
    return {"Cclass": CLASS, "Cgroup": group, "Csub": sub}


#: The conditions: id, description, what each accepts (any one) and requires (all).
CONDITIONS: tuple[tuple[str, str, list[dict[str, str]], list[dict[str, str]]], ...] = (
    ("Cortex-M core", "A Cortex-M core cortex-m-nn compiles for",
     [{"Dcore": core} for core in CORES], []),
    ("ExecuTorch runtime", "ExecuTorch's runtime core on that core",
     [], [{"condition": "Cortex-M core"}, _component_filter(EXECUTORCH_GROUP, "Runtime core")]),
    ("Kernel support", "CMSIS-NN and ExecuTorch's runtime",
     [], [{"condition": "ExecuTorch runtime"}, {"Cclass": "CMSIS", "Cgroup": "NN Lib"}]),
    ("Kernel", "The kernels' support", [], [_component_filter(GROUP, "Kernel support")]),
    ("API", "The kernels' support and ExecuTorch's kernel registry",
     [], [{"condition": "Kernel"}, _component_filter(EXECUTORCH_GROUP, "Kernel registry")]),
    ("Embedded model", "The API", [], [_component_filter(GROUP, "API")]),
)  # fmt: skip


def _conditions(package: ET.Element) -> None:
    conditions = ET.SubElement(package, "conditions")
    for identifier, text, accepts, requires in CONDITIONS:
        condition = ET.SubElement(conditions, "condition", {"id": identifier})
        ET.SubElement(condition, "description").text = text
        for accept in accepts:
            ET.SubElement(condition, "accept", accept)
        for require in requires:
            ET.SubElement(condition, "require", require)


def _ours(components: ET.Element, tree: Tree) -> None:
    lists, version = tree.lists, tree.version
    files = _component(components, GROUP, "API", version, "API",
                       "The firmware API, include/cortex_m_nn/model.h")  # fmt: skip
    _file(files, "include", "include/")
    for header in lists["CORTEX_M_NN_API_HEADERS"]:
        _file(files, "header", header)
    for source in lists["CORTEX_M_NN_API_SOURCES"]:
        _source(files, source)
    files = _component(components, GROUP, "Embedded model", version, "Embedded model",
                       "The program cortex-m-compile embed wrote (its cortex_m_nn_model.h on the "
                       "include path) as Model::embedded()")  # fmt: skip
    for source in lists["CORTEX_M_NN_EMBEDDED_SOURCES"]:
        _source(files, source)
    files = _component(components, GROUP, "Kernel support", version, "Kernel support",
                       "What every kernel needs: the ABI check, the call mode, our compute "
                       "functions and the kernels' declarations")  # fmt: skip
    _file(files, "include", "kernels/include/")
    _file(files, "include", "generated/")
    _file(files, "header", "generated/cortex_m_nn_operators.h")
    for source in lists["CORTEX_M_NN_KERNEL_SUPPORT_SOURCES"]:
        _source(files, source)
    for op in tree.operators:
        files = _component(components, KERNEL_GROUP, op.name, version, "Kernel",
                           f"The cortex_m_nn::{op.name} kernel, every dtype case")  # fmt: skip
        _source(files, f"kernels/op_{op.name}.cpp")


def _executorch(components: ET.Element, runtime: Runtime) -> None:
    files = _component(components, EXECUTORCH_GROUP, "Runtime core", runtime.version,
                       "Cortex-M core", "ExecuTorch's runtime core (Program, Method, minimal "
                       "platform layer), as cortex-m-nn compiles it")  # fmt: skip
    _file(files, "include", "executorch/")
    _file(files, "include", "executorch/executorch/runtime/core/portable_type/c10/")
    _file(files, "include", "flatbuffers/include/")
    _file(files, "include", "cmake/include/")
    _file(files, "preIncludeGlobal", "executorch/cortex_m_nn_executorch_config.h")
    for source in runtime.core:
        _source(files, f"executorch/executorch/{source}")
    files = _component(components, EXECUTORCH_GROUP, "Kernel registry", runtime.version,
                       "ExecuTorch runtime", "ExecuTorch's kernel registry: define "
                       "MAX_KERNEL_NUM as the kernels the image registers (else 2000): the "
                       "program's cortex-m-nn kernels, plus the primitive operators' count "
                       "when that component is selected")  # fmt: skip
    _source(files, f"executorch/executorch/{runtime.registry}")
    if not runtime.prim_ops:
        return
    files = _component(components, EXECUTORCH_GROUP, "Primitive operators", runtime.version,
                       "ExecuTorch runtime", "ExecuTorch's executorch_prim:: operators, for "
                       f"programs that call them (embed lists them): registers all "
                       f"{runtime.prim_count}")  # fmt: skip
    for source in runtime.prim_ops:
        _source(files, f"executorch/executorch/{source}")


def description(tree: Tree, runtime: Runtime, url: str = "") -> str:
    """The pack's ``.pdsc``."""
    xsi = "http://www.w3.org/2001/XMLSchema-instance"
    ET.register_namespace("xs", xsi)
    package = ET.Element("package", {
        "schemaVersion": SCHEMA_VERSION,
        f"{{{xsi}}}noNamespaceSchemaLocation": "https://raw.githubusercontent.com/Open-CMSIS-Pack/"
        f"Open-CMSIS-Pack-Spec/v{SCHEMA_VERSION}/schema/PACK.xsd",
    })  # fmt: skip
    ET.SubElement(package, "vendor").text = VENDOR
    ET.SubElement(package, "name").text = NAME
    ET.SubElement(package, "description").text = (
        "PyTorch models on Cortex-M: cortex-m-nn's kernels on CMSIS-NN, its firmware API and "
        "ExecuTorch's runtime core"
    )
    ET.SubElement(package, "url").text = url
    releases = ET.SubElement(package, "releases")
    ET.SubElement(
        releases, "release", {"version": tree.version}
    ).text = f"cortex-m-nn {tree.version} with ExecuTorch {runtime.version}'s runtime"
    keywords = ET.SubElement(package, "keywords")
    for word in ("PyTorch", "ExecuTorch", "CMSIS-NN", "Machine Learning"):
        ET.SubElement(keywords, "keyword").text = word
    requirements = ET.SubElement(ET.SubElement(package, "requirements"), "packages")
    cmsis_nn = {"vendor": "ARM", "name": "CMSIS-NN", "version": CMSIS_NN_VERSION}
    ET.SubElement(requirements, "package", cmsis_nn)
    _conditions(package)
    components = ET.SubElement(package, "components")
    _ours(components, tree)
    _executorch(components, runtime)
    ET.indent(package)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(package, "unicode") + "\n"


# --- the pack's files ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """Where the pack's files come from."""

    tree: Path
    executorch: Path
    flatc: Path
    flatbuffers_include: Path


def find_flatc(given: str | None) -> Path:
    """``given``, else the executorch wheel's flatc (the version its schema was written with),
    else ``flatc`` on PATH."""
    if given:
        return Path(given)
    try:
        import executorch

        wheel = Path(list(executorch.__path__)[0]) / "data" / "bin" / "flatc"
        if wheel.is_file():
            return wheel
    except ImportError:
        pass
    found = shutil.which("flatc")
    if found is None:
        raise PackError("no flatc: install the executorch wheel or name one with --flatc")
    return Path(found)


def _copy(source: Path, destination: Path) -> None:
    if not source.is_file():
        raise PackError(f"{source} does not exist")
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, destination)


def _copy_headers(source: Path, destination: Path) -> None:
    for header in sorted(source.rglob("*.h")):
        _copy(header, destination / header.relative_to(source))


def _our_files(tree: Tree, out: Path) -> None:
    from cortex_m_nn.embed.kernel_codegen import header

    root = tree.root
    for name in ("CORTEX_M_NN_API_SOURCES", "CORTEX_M_NN_API_HEADERS",
                 "CORTEX_M_NN_EMBEDDED_SOURCES", "CORTEX_M_NN_KERNEL_SUPPORT_SOURCES"):  # fmt: skip
        for path in tree.lists[name]:
            _copy(root / path, out / path)
    for op in tree.operators:
        _copy(root / "kernels" / f"op_{op.name}.cpp", out / "kernels" / f"op_{op.name}.cpp")
    _copy_headers(root / "kernels" / "include", out / "kernels" / "include")
    _copy_headers(root / "kernels" / "compute", out / "kernels" / "compute")
    _copy_headers(root / "cmake" / "include", out / "cmake" / "include")
    (out / "generated").mkdir(parents=True, exist_ok=True)
    declarations = header(tree.ops_version, list(tree.operators))
    (out / "generated" / "cortex_m_nn_operators.h").write_text(declarations)


def _executorch_files(inputs: Inputs, tree: Tree, runtime: Runtime, out: Path) -> None:
    root, target = inputs.executorch, out / "executorch" / "executorch"
    for source in (*runtime.core, runtime.registry, *runtime.prim_ops):
        _copy(root / source, target / source)
    for directory in ("runtime", "kernels/prim_ops", "schema"):
        _copy_headers(root / directory, target / directory)
    sources = [tree.root / path for path in _our_sources(tree)]
    sources += [root / source for source in (*runtime.core, runtime.registry, *runtime.prim_ops)]
    for header in sorted(_included(root, sources)):
        _copy(root / header, target / header)
    schema = target / "schema"
    schema.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(inputs.flatc), "--cpp", "--cpp-std", "c++11", "--gen-mutable", "--scoped-enums",
         "-o", str(schema), str(root / "schema" / "program.fbs"),
         str(root / "schema" / "scalar_type.fbs")],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise PackError(f"flatc failed on ExecuTorch's schema: {done.stderr.strip()[-300:]}")
    if (root / "LICENSE").is_file():
        _copy(root / "LICENSE", out / "executorch" / "LICENSE")
    flatbuffers = inputs.flatbuffers_include / "flatbuffers"
    _copy_headers(flatbuffers, out / "flatbuffers" / "include" / "flatbuffers")
    config = [
        "/* ExecuTorch's runtime as cortex-m-nn builds it (cmake/executorch_runtime.cmake) */"
    ]
    for define in RUNTIME_DEFINES:
        name, _, value = define.partition("=")
        config.append(f"#define {name} {value}".rstrip())
    (out / "executorch" / "cortex_m_nn_executorch_config.h").write_text("\n".join(config) + "\n")


_EXECUTORCH_INCLUDE = re.compile(r'#\s*include\s*[<"]executorch/([^">]+)[">]')


def _our_sources(tree: Tree) -> list[str]:
    """Every source and header of ours the pack carries (what their includes may need)."""
    found = [path for paths in tree.lists.values() for path in paths]
    found += [
        p.relative_to(tree.root).as_posix() for p in sorted(tree.root.glob("kernels/**/*.[ch]*"))
    ]
    return found


def _included(root: Path, sources: list[Path]) -> set[str]:
    """ExecuTorch's files that ``sources`` include, directly or through one another
    (``#include <executorch/…>``; every branch of a conditional counts)."""
    found: set[str] = set()
    pending = list(sources)
    while pending:
        text = pending.pop().read_text(errors="replace")
        for relative in _EXECUTORCH_INCLUDE.findall(text):
            if relative not in found and (root / relative).is_file():
                found.add(relative)
                pending.append(root / relative)
    return found


def pack_name(version: str) -> str:
    return f"{VENDOR}.{NAME}.{version}"


def _check_inputs(inputs: Inputs) -> None:
    """What the pack is made from, refused in one line before anything is written."""
    if not (inputs.flatc.is_file() and os.access(inputs.flatc, os.X_OK)):
        raise PackError(f"{inputs.flatc} is not a flatc program: name one with --flatc")
    if not (inputs.flatbuffers_include / "flatbuffers" / "flatbuffers.h").is_file():
        raise PackError(
            f"{inputs.flatbuffers_include} has no flatbuffers/flatbuffers.h: name flatbuffers' "
            "include directory with --flatbuffers-include"
        )


def build(inputs: Inputs, output_dir: Path, url: str = "") -> Path:
    """Write the pack's tree (``output_dir/<pack name>/``) and the ``.pack`` beside it;
    returns the ``.pack``. Both are made aside and moved in place at the end, so a failed run
    leaves what was there; a tree an earlier run wrote is replaced, any other refused."""
    tree = read_tree(inputs.tree)
    runtime = executorch_runtime(inputs.executorch)
    _check_inputs(inputs)
    name = pack_name(tree.version)
    out, archive = output_dir / name, output_dir / f"{name}.pack"
    pdsc_name = f"{VENDOR}.{NAME}.pdsc"
    if out.exists() and not (out / pdsc_name).is_file():
        raise PackError(f"{out} exists and is not a pack: remove it or choose another directory")
    output_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=output_dir))
    try:
        _our_files(tree, staging / name)
        _executorch_files(inputs, tree, runtime, staging / name)
        (staging / name / pdsc_name).write_text(description(tree, runtime, url))
        with zipfile.ZipFile(staging / archive.name, "w", zipfile.ZIP_DEFLATED) as zipped:
            for path in sorted((staging / name).rglob("*")):
                if path.is_file():
                    zipped.write(path, path.relative_to(staging / name).as_posix())
        if out.exists():
            shutil.rmtree(out)
        (staging / name).rename(out)
        (staging / archive.name).replace(archive)
    except OSError as error:
        raise PackError(f"writing the pack failed: {error}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return archive
