"""The module's Zephyr and Twister files against Zephyr's rules.

The rules are written here from Zephyr's own schemas (nothing copied): scripts/zephyr_module.py
(METADATA_SCHEMA, module.yml), scripts/schemas/twister/testsuite-schema.yaml (sample.yaml,
testcase.yaml) and scripts/schemas/snippet-schema.yaml with scripts/snippets.py (snippet.yml).
Board names are the ones checked in Zephyr's boards/ (docs/zephyr-verification.md), and every
Kconfig symbol a .conf file assigns must exist in our Kconfig or the checked stand-ins.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from .kconfig_tree import STUBS

ROOT = Path(__file__).resolve().parents[2]

#: Board targets the samples support (boards/*/board.yml and the SoCs' cluster names).
BOARDS = {
    "mps3/corstone300/fvp",
    "mps3/corstone300/an547",
    "ensemble_e8_dk/ae822fa0e5597ls0/rtss_hp",
    "ensemble_e8_dk/ae822fa0e5597ls0/rtss_he",
    "rpi_pico2/rp2350a/m33",
}

# --- zephyr/module.yml (scripts/zephyr_module.py, METADATA_SCHEMA) -------------------------

MODULE = {"name": str, "build": dict, "tests": list, "samples": list, "boards": list}
MODULE_BUILD = {
    "cmake": str,
    "kconfig": str,
    "cmake-ext": bool,
    "kconfig-ext": bool,
    "sysbuild-cmake": str,
    "sysbuild-kconfig": str,
    "sysbuild-cmake-ext": bool,
    "sysbuild-kconfig-ext": bool,
    "depends": list,
    "settings": dict,
}
MODULE_SETTINGS = (
    "board_root",
    "dts_root",
    "snippet_root",
    "soc_root",
    "arch_root",
    "module_ext_root",
    "sca_root",
)


def _typed(mapping: dict, rules: dict, where: str) -> None:
    assert isinstance(mapping, dict), where
    for key, value in mapping.items():
        assert key in rules, f"{where}: unknown key {key}"
        assert isinstance(value, rules[key]), f"{where}.{key} must be {rules[key].__name__}"


def test_module_yml_follows_zephyr_module_schema() -> None:
    module = yaml.safe_load((ROOT / "zephyr/module.yml").read_text())
    _typed(module, MODULE, "module.yml")
    _typed(module["build"], MODULE_BUILD, "module.yml build")
    settings = module["build"]["settings"]
    _typed(settings, dict.fromkeys(MODULE_SETTINGS, str), "module.yml build.settings")
    for name, value in settings.items():
        assert (ROOT / value).is_dir(), name
    assert (ROOT / module["build"]["cmake"] / "CMakeLists.txt").is_file()
    assert (ROOT / module["build"]["kconfig"]).is_file()
    assert all(isinstance(d, str) for d in module["build"]["depends"])
    # zephyr_module.py names the module's Kconfig symbol ZEPHYR_<NAME>_MODULE from its name.
    assert re.sub("[^a-zA-Z0-9]", "_", module["name"]).upper() == "CORTEX_M_NN"
    for root in module["samples"]:
        assert list((ROOT / root).glob("*/sample.yaml")), root
    for root in module["tests"]:
        assert list((ROOT / root).rglob("testcase.yaml")), root
    assert (ROOT / settings["snippet_root"] / "snippets").is_dir()


#: What Zephyr looks for under each root a module declares: scripts/list_boards.py
#: (find_v2_boards: `(root / 'boards').rglob('board.yml')`; v1 boards would be
#: boards/<arch>/<board>/*_defconfig) and scripts/snippets.py (<root>/snippets/*/snippet.yml).
#: A root without them is silently ignored.
ROOT_CONTENTS = {
    "board_root": "boards/**/board.yml",
    "snippet_root": "snippets/*/snippet.yml",
}


def test_module_roots_hold_what_zephyr_looks_for() -> None:
    settings = yaml.safe_load((ROOT / "zephyr/module.yml").read_text())["build"]["settings"]
    for name, value in settings.items():
        if name in ROOT_CONTENTS:
            assert list((ROOT / value).glob(ROOT_CONTENTS[name])), f"{name}: {value} is empty"
    # boards/ holds the snippet's per-board fragments, which are not board definitions.
    assert not list((ROOT / "boards").rglob("board.yml"))
    assert "board_root" not in settings


# --- sample.yaml / testcase.yaml (scripts/schemas/twister/testsuite-schema.yaml) -----------

_SEQ = list
SCENARIO = {
    "arch_exclude": object,
    "arch_allow": object,
    "vendor_exclude": _SEQ,
    "vendor_allow": _SEQ,
    "testcases": _SEQ,
    "build_only": bool,
    "build_on_all": bool,
    "depends_on": object,
    "extra_args": object,
    "extra_configs": _SEQ,
    "extra_conf_files": _SEQ,
    "extra_overlay_confs": _SEQ,
    "extra_dtc_overlay_files": _SEQ,
    "extra_sections": object,
    "expect_reboot": bool,
    "required_snippets": _SEQ,
    "filter": str,
    "levels": _SEQ,
    "integration_platforms": _SEQ,
    "integration_toolchains": _SEQ,
    "ignore_faults": bool,
    "ignore_qemu_crash": bool,
    "harness": str,
    "harness_config": dict,
    "min_ram": int,
    "min_flash": int,
    "modules": _SEQ,
    "platform_exclude": object,
    "platform_allow": object,
    "platform_type": _SEQ,
    "platform_key": _SEQ,
    "simulation_exclude": _SEQ,
    "tags": object,
    "timeout": int,
    "toolchain_exclude": object,
    "toolchain_allow": object,
    "type": str,
    "skip": bool,
    "slow": bool,
    "sysbuild": bool,
}
HARNESS_CONFIG = {"type": str, "fixture": str, "ordered": bool, "regex": _SEQ, "record": dict}
#: testsuite-schema.yaml: the key of a scenario.
SCENARIO_NAME = re.compile(r"^[a-zA-Z0-9_]+")

SUITES = sorted(
    [*ROOT.glob("samples/*/sample.yaml"), *(ROOT / "tests" / "zephyr").rglob("testcase.yaml")]
)


def _merged(suite: dict, name: str) -> dict:
    """A scenario as Twister sees it: common, then the scenario's own keys."""
    return {**suite.get("common", {}), **suite["tests"][name]}


@pytest.mark.parametrize("path", SUITES, ids=lambda p: str(p.relative_to(ROOT)))
def test_suite_yaml_follows_twister_schema(path: Path) -> None:
    suite = yaml.safe_load(path.read_text())
    assert set(suite) <= {"common", "sample", "tests"}, path
    assert isinstance(suite["tests"], dict) and suite["tests"], "tests: is required"
    if "sample" in suite:
        assert set(suite["sample"]) <= {"name", "description"} and suite["sample"]["name"]
    assert path.name == ("sample.yaml" if "sample" in suite else "testcase.yaml")
    for name, scenario in {"common": suite.get("common", {}), **suite["tests"]}.items():
        _typed(scenario, SCENARIO, f"{path.name}: {name}")
        if "harness_config" in scenario:
            _typed(scenario["harness_config"], HARNESS_CONFIG, f"{name}.harness_config")
    for name in suite["tests"]:
        assert SCENARIO_NAME.match(name), name
        assert name.startswith(("sample.cortex_m_nn.", "cortex_m_nn.")), name


@pytest.mark.parametrize("path", SUITES, ids=lambda p: str(p.relative_to(ROOT)))
def test_scenarios_run_on_the_boards(path: Path) -> None:
    suite = yaml.safe_load(path.read_text())
    for name in suite["tests"]:
        scenario = _merged(suite, name)
        allowed = scenario["platform_allow"]
        assert set(allowed) <= BOARDS, set(allowed) - BOARDS
        assert set(scenario["integration_platforms"]) <= set(allowed), name
        assert "mps3/corstone300/an547" in scenario["integration_platforms"]
        assert scenario["modules"] == ["executorch"]
        harness = scenario["harness"]
        assert harness in {"console", "ztest"}
        if harness == "console":
            config = scenario["harness_config"]
            assert config["type"] in {"one_line", "multi_line"}
            assert config["ordered"] is True
            for pattern in config["regex"]:
                re.compile(pattern)  # Twister matches with Python's re
            assert config["regex"][-1] == "PASS"
        for snippet in scenario.get("required_snippets", []):
            assert (ROOT / "snippets" / snippet / "snippet.yml").is_file(), snippet
        for assignment in scenario.get("extra_configs", []):
            assert _symbol(assignment) in known_symbols(), assignment


def test_samples_cover_the_issue_boards() -> None:
    for sample in ("hello_cortex_m_nn", "keyword_spotting"):
        suite = yaml.safe_load((ROOT / "samples" / sample / "sample.yaml").read_text())
        covered = set()
        for name in suite["tests"]:
            covered |= set(_merged(suite, name)["platform_allow"])
        assert covered == BOARDS, sample
    kernels = yaml.safe_load((ROOT / "tests/zephyr/kernels/testcase.yaml").read_text())
    assert kernels["common"]["harness"] == "ztest"
    assert "mps3/corstone300/an547" in kernels["common"]["platform_allow"]


# --- snippets/cortex-m-nn/snippet.yml (scripts/schemas/snippet-schema.yaml) -----------------

SNIPPET_APPEND = {"EXTRA_DTC_OVERLAY_FILE", "EXTRA_CONF_FILE", "SB_EXTRA_CONF_FILE"}


def test_snippet_follows_zephyr_snippet_schema() -> None:
    path = ROOT / "snippets/cortex-m-nn/snippet.yml"
    snippet = yaml.safe_load(path.read_text())
    assert set(snippet) <= {"name", "append", "boards"}
    # scripts/snippets.py: SNIPPET_NAME_RE
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", snippet["name"])
    assert set(snippet["boards"]) <= BOARDS
    for board, settings in snippet["boards"].items():
        assert set(settings) == {"append"}, board
        assert set(settings["append"]) <= SNIPPET_APPEND, board
        for value in settings["append"].values():
            # snippets.py: a path relative to the snippet.yml, which must exist.
            assert isinstance(value, str) and (path.parent / value).resolve().is_file(), value


# --- Kconfig fragments: every assigned symbol exists -------------------------------------


def _symbol(assignment: str) -> str:
    return assignment.split("=", 1)[0].removeprefix("CONFIG_")


def known_symbols() -> set[str]:
    """Symbols defined by our Kconfig, the checked Zephyr stand-ins, or listed in the
    verification note as checked (symbols only the samples set, like CONFIG_ZTEST)."""
    names = set()
    for path in (ROOT / "Kconfig", STUBS):
        names |= set(re.findall(r"^(?:menu)?config (\w+)", path.read_text(), re.MULTILINE))
    verification = (ROOT / "docs/zephyr-verification.md").read_text()
    names |= set(re.findall(r"`CONFIG_(\w+)`", verification))
    return names


FRAGMENTS = sorted(
    [
        *ROOT.glob("samples/*/prj.conf"),
        *(ROOT / "tests" / "zephyr").rglob("prj.conf"),
        *ROOT.glob("boards/*.conf"),
    ]
)


@pytest.mark.parametrize("path", FRAGMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_fragments_assign_only_known_symbols(path: Path) -> None:
    known = known_symbols()
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        assert re.fullmatch(r'CONFIG_\w+=(y|n|-?\d+|"[^"]*")', line), line
        assert _symbol(line) in known, f"{path.name}: {line}"


def test_board_fragments_name_memories_the_devicetrees_define() -> None:
    # boards/*.conf place the model and the arena by devicetree node label: the label must
    # be one checked in Zephyr's devicetree (or defined by our overlay of the same board).
    checked = {"isram", "sram0", "ddr4", "itcm", "dtcm", "sram", "sram1", "mram"}
    for path in ROOT.glob("boards/*.conf"):
        overlay = path.with_suffix(".overlay")
        ours = (
            set(re.findall(r"(\w+): memory@", overlay.read_text())) if overlay.is_file() else set()
        )
        for label in re.findall(r'_MEMORY="(\w+)"', path.read_text()):
            assert label in checked | ours, f"{path.name}: {label}"
        if overlay.is_file():
            for node in re.findall(r"\{[^{}]*\}", overlay.read_text()):
                if "zephyr,memory-region" in node:
                    assert 'compatible = "zephyr,memory-region"' in node


#: zephyr,flash of the boards whose fragments place the model elsewhere (the board's .dts).
BOARD_FLASH = {"mps3_corstone300": 0x10000000}  # boards/arm/mps3/mps3_corstone300_an547.dts
#: Beyond this gap between the code and the model, a raw binary of the image is mostly fill.
RAW_BINARY_GAP = 64 * 2**20


def test_a_model_placed_far_from_the_code_builds_no_raw_binary() -> None:
    """objcopy -O binary fills every gap between sections: with the model 1.5 GiB above the
    code, zephyr.bin would be 1.5 GiB. Such a fragment turns CONFIG_BUILD_OUTPUT_BIN off."""
    for name, flash in BOARD_FLASH.items():
        conf = (ROOT / "boards" / f"{name}.conf").read_text()
        overlay = (ROOT / "boards" / f"{name}.overlay").read_text()
        nodes = dict(re.findall(r"(\w+): memory@([0-9a-f]+)", overlay))
        (label,) = re.findall(r'CONFIG_CORTEX_M_NN_MODEL_MEMORY="(\w+)"', conf)
        assert abs(int(nodes[label], 16) - flash) > RAW_BINARY_GAP  # the case this is about
        assert "CONFIG_BUILD_OUTPUT_BIN=n" in conf.splitlines(), name
