"""Packaging and workspace files: pins, Zephyr module, west manifest and west command."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
from pathlib import Path

import pytest
import yaml
from tests.zephyr.test_yaml import MODULE, MODULE_BUILD, MODULE_SETTINGS

import cortex_m_nn
from cortex_m_nn.cli import main as cli
from cortex_m_nn.cli import subcommands

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _load_yaml(relative: str):
    return yaml.safe_load((ROOT / relative).read_text())


def _requirements(pyproject: dict) -> dict[str, str]:
    """Dependency name -> its version specifier, spaces removed."""
    result = {}
    for requirement in pyproject["project"]["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(.*)", requirement.strip())
        assert match, requirement
        result[match.group(1).lower()] = match.group(2).replace(" ", "")
    return result


# --- pyproject.toml ------------------------------------------------------------------------


def test_project_metadata(pyproject):
    project = pyproject["project"]
    assert project["name"] == "cortex-m-nn"
    assert project["requires-python"] == ">=3.10"
    assert "version" in project["dynamic"]
    attr = pyproject["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "cortex_m_nn.version.__version__"
    assert cortex_m_nn.__version__ == "0.1.0"
    assert project["scripts"] == {"cortex-m-compile": "cortex_m_nn.cli.main:main"}


def test_dependency_pins(pyproject):
    requirements = _requirements(pyproject)
    # torch exactly: a range would let pip pick a newer (CUDA) build; executorch 1.5.1 is
    # built against torch 2.13.0.
    assert requirements["torch"] == "==2.13.0"
    assert requirements["executorch"] == "==1.5.1"
    assert set(requirements["torchao"].split(",")) == {">=0.18", "<0.19"}
    for name in ("west", "pyelftools", "kconfiglib", "tqdm", "numpy", "pyyaml", "matplotlib"):
        assert name in requirements, name
    assert requirements["flatbuffers"] == ""  # the .pte reader (serialize/pte_format.py), unpinned
    assert set(requirements) == {
        "torch",
        "torchao",
        "executorch",
        "west",
        "pyelftools",
        "kconfiglib",
        "tqdm",
        "numpy",
        "pyyaml",
        "matplotlib",
        "flatbuffers",
        "ruamel.yaml.clib",
    }


def test_executorch_parses_its_yaml_with_the_c_parser():
    """ruamel.yaml.clib is what makes importing ExecuTorch's edge dialect 1.8 s quicker."""
    from ruamel.yaml import YAML

    assert YAML(typ="safe").Parser.__module__ == "ruamel.yaml.clib._ruamel_yaml"


def test_test_extras(pyproject):
    extras = pyproject["project"]["optional-dependencies"]
    names = {re.split(r"[<>=!~;\[ ]", requirement)[0] for requirement in extras["test"]}
    assert {"pytest", "pytest-xdist", "hypothesis", "ruff"} <= names
    assert set(extras["dev"]) == set(extras["test"])
    # pytest 9.2 stops xdist 3.8 grouping tests (pytest-dev/pytest-xdist#1386): stay below
    (pytest,) = [r for r in extras["test"] if re.match(r"pytest[<>=]", r)]
    assert "<9.2" in pytest, pytest


def test_package_layout(pyproject):
    setuptools = pyproject["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"": "python"}
    assert "*.yaml" in setuptools["package-data"]["*"]
    assert (ROOT / "python" / "cortex_m_nn" / "__init__.py").is_file()
    assert Path(cortex_m_nn.__file__).resolve().parent == ROOT / "python" / "cortex_m_nn"


def test_tool_config(pyproject):
    ruff = pyproject["tool"]["ruff"]
    assert ruff["line-length"] == 100
    assert ruff["target-version"] == "py310"
    assert set(ruff["lint"]["select"]) == {"E", "F", "I", "UP", "B", "W"}
    assert pyproject["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]


# --- Zephyr module -------------------------------------------------------------------------

# The keys Zephyr's module schema accepts: tests/zephyr/test_yaml.py (MODULE, MODULE_BUILD, …).


def test_zephyr_module_yml():
    module = _load_yaml("zephyr/module.yml")
    assert set(module) <= set(MODULE)
    assert module["name"] == "cortex-m-nn"
    build = module["build"]
    assert set(build) <= set(MODULE_BUILD)
    assert set(build["settings"]) <= set(MODULE_SETTINGS)
    assert build["cmake"] == "zephyr"
    assert (ROOT / build["cmake"] / "CMakeLists.txt").is_file()
    assert build["kconfig"] == "Kconfig"
    assert (ROOT / build["kconfig"]).is_file()
    # boards/ has no board.yml (board definitions), so the module declares no board_root.
    assert "board_root" not in build["settings"]
    assert (ROOT / build["settings"]["snippet_root"] / "snippets").is_dir()


def test_kconfig_defines_cortex_m_nn(tmp_path):
    kconfiglib = pytest.importorskip("kconfiglib")
    top = tmp_path / "Kconfig"
    # tests/zephyr/kconfig/Kconfig.zephyr stands in for the Zephyr symbols (each copied from
    # the Zephyr file it names); tests/zephyr/test_kconfig.py covers the options in depth.
    stubs = ROOT / "tests" / "zephyr" / "kconfig" / "Kconfig.zephyr"
    top.write_text(f'source "{stubs.as_posix()}"\nsource "{(ROOT / "Kconfig").as_posix()}"\n')
    kconf = kconfiglib.Kconfig(str(top), warn_to_stderr=False)
    symbol = kconf.syms["CORTEX_M_NN"]
    assert symbol.type == kconfiglib.BOOL
    assert symbol.nodes[0].prompt[0] == "cortex-m-nn: PyTorch models on CMSIS-NN"
    assert symbol.nodes[0].help
    assert "CPU_CORTEX_M" in kconfiglib.expr_str(symbol.direct_dep)
    symbol.set_value(2)
    assert symbol.str_value == "n"  # not on a core other than Cortex-M
    kconf.syms["TEST_SOC_M55_MVE"].set_value(2)
    symbol.set_value(2)
    assert symbol.str_value == "y"
    # Every symbol the module defines uses the CORTEX_M_NN prefix, but for its contribution to
    # the system heap, whose prefix Zephyr reads (kernel/CMakeLists.txt sums
    # CONFIG_HEAP_MEM_POOL_ADD_SIZE_*): the name still ends with the module's.
    ours = {
        sym.name
        for sym in kconf.unique_defined_syms
        if any(Path(node.filename).resolve() == ROOT / "Kconfig" for node in sym.nodes)
    }
    assert "CORTEX_M_NN" in ours
    unprefixed = {name for name in ours if not name.startswith("CORTEX_M_NN")}
    assert unprefixed == {"HEAP_MEM_POOL_ADD_SIZE_CORTEX_M_NN"}, unprefixed


def test_cmakelists_is_guarded_by_the_kconfig_option():
    build = _load_yaml("zephyr/module.yml")["build"]
    text = (ROOT / build["cmake"] / "CMakeLists.txt").read_text()
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    assert "if(CONFIG_CORTEX_M_NN)" in code
    assert len(re.findall(r"\bif\(", code)) == len(re.findall(r"\bendif\(", code))


# --- west ----------------------------------------------------------------------------------


def test_west_manifest():
    from west.manifest import ImportFlag, Manifest, validate

    data = _load_yaml("west.yml")
    validate(data)
    manifest = Manifest.from_data(data, import_flags=ImportFlag.IGNORE)
    this = manifest.projects[0]
    assert this.path == "cortex-m-nn"
    assert this.west_commands == ["west_commands/west-commands.yml"]
    for relative in this.west_commands:
        assert (ROOT / relative).is_file()

    projects = {p.name: p for p in manifest.projects[1:]}
    assert set(projects) == {"zephyr", "executorch"}
    zephyr = projects["zephyr"]
    assert zephyr.url == "https://github.com/zephyrproject-rtos/zephyr"
    assert re.fullmatch(r"v\d+\.\d+\.\d+", zephyr.revision), "pin a Zephyr release tag"
    raw_zephyr = next(p for p in data["manifest"]["projects"] if p["name"] == "zephyr")
    allowlist = raw_zephyr["import"]["name-allowlist"]
    assert "cmsis-nn" in allowlist
    executorch = projects["executorch"]
    assert executorch.url == "https://github.com/pytorch/executorch"
    assert executorch.path == "modules/lib/executorch"


def test_west_executorch_matches_python_pin(pyproject):
    data = _load_yaml("west.yml")
    executorch = next(p for p in data["manifest"]["projects"] if p["name"] == "executorch")
    assert executorch["revision"] == "v" + _requirements(pyproject)["executorch"].lstrip("=")


def test_west_commands_yml():
    spec = _load_yaml("west_commands/west-commands.yml")
    (entry,) = spec["west-commands"]
    assert (ROOT / entry["file"]).is_file()
    (command,) = entry["commands"]
    assert command["name"] == "cortex-m-compile"
    assert command["help"]
    module = _load_west_command_module(ROOT / entry["file"])
    command_class = getattr(module, command["class"])
    instance = command_class()
    assert instance.name == command["name"]


def _load_west_command_module(path: Path):
    spec = importlib.util.spec_from_file_location("cortex_m_nn_west_command", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _options(parser: argparse.ArgumentParser) -> list[tuple]:
    """What a user can type: option strings / positionals with their arity and defaults."""
    return sorted(
        (tuple(a.option_strings), a.dest, str(a.nargs), repr(a.default), repr(a.choices))
        for a in parser._actions
    )


def test_west_command_has_the_console_script_options():
    module = _load_west_command_module(ROOT / "west_commands" / "cortex_m_compile.py")
    command = module.CortexMCompile()
    west_top = argparse.ArgumentParser(prog="west")
    west_parser = command.add_parser(west_top.add_subparsers())
    script_parser = cli.add_arguments(argparse.ArgumentParser(prog="cortex-m-compile"))
    assert west_parser is not None
    assert _options(west_parser) == _options(script_parser)
    strings = {s for a in script_parser._actions for s in a.option_strings}
    for option in (
        "--target",
        "--output",
        "--calibration",
        "--report-json",
        "--verify",
        "--allow-fallback",
        "--intermediates",
    ):
        assert option in strings


# --- README and CI -------------------------------------------------------------------------


def test_the_readme_is_a_front_door():
    """What it is, the two commands, the pipeline, the targets, an example and links: the
    reference lives in docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_readme_opens_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    match = re.match(r"```\w*\n(.*?)\n```", text, re.DOTALL)
    assert match, "README.md must open with a code block"
    lines = match.group(1).splitlines()
    assert len(lines) == 2
    setup, tests = lines
    assert "python3 -m venv .venv" in setup
    assert "pip install -e '.[test]'" in setup
    assert "cortex-m-compile --verify" in setup
    assert tests == ".venv/bin/python -m pytest"


def _cli_parsers() -> dict[str, argparse.ArgumentParser]:
    return {
        "cortex-m-compile": cli.add_arguments(argparse.ArgumentParser(prog="cortex-m-compile")),
        "inspect": subcommands.add_inspect_arguments(argparse.ArgumentParser(prog="inspect")),
        "embed": subcommands.add_embed_arguments(argparse.ArgumentParser(prog="embed")),
        "pack": subcommands.add_pack_arguments(argparse.ArgumentParser(prog="pack")),
    }


def _documented(section: str) -> list[str]:
    """The options a section of docs/cli.md documents: its table rows' first cells, each
    ``--option`` in backticks (``--a``, ``--no-a`` or ``-o``, ``--output`` in one cell)."""
    rows = re.findall(r"^\| ([^|]+) \|", section, flags=re.M)
    return [name for row in rows for name in re.findall(r"`(--?[\w-]+)`", row)]


def test_the_cli_page_documents_every_option_once_and_its_synopsis_lists_them():
    """docs/cli.md: each command's options table has a row for every option the parser has,
    once, and none it lacks; the synopsis at the top names every option too."""
    text = (ROOT / "docs" / "cli.md").read_text()
    synopsis = re.search(r"^```\n(cortex-m-compile \[MODEL\].*?)^```", text, re.S | re.M).group(1)
    headings = {
        "cortex-m-compile": "## Command line",
        "inspect": "## Firmware report",
        "embed": "## Embedding a model",
        "pack": "## The CMSIS-Pack",
    }
    for command, parser in _cli_parsers().items():
        start = text.index(headings[command])
        end = text.find("\n## ", start + 1)
        section = text[start : end if end > 0 else None]
        actions = [a for a in parser._actions if a.option_strings and a.dest != "help"]
        documented = _documented(section)
        long_options = sorted(o for a in actions for o in a.option_strings if o.startswith("--"))
        assert sorted(o for o in documented if o.startswith("--")) == long_options, command
        for action in actions:  # by one of its names (``-q`` for ``--quiet``)
            named = [o for o in action.option_strings if re.search(rf"{o}\b", synopsis)]
            assert named, f"the synopsis lacks {action.option_strings}"
    assert "./inspect" in text


def test_ci_script():
    script = ROOT / ".ci" / "run"
    assert os.access(script, os.X_OK)
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert "pip install -e '.[test]'" in text
    assert ".venv/bin/python -m pytest" in text
