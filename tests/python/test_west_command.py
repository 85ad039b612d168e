"""``west cortex-m-compile`` in a real (offline) west workspace.

The workspace's manifest repository holds this repository's ``west_commands/`` and a
``west.yml`` made from ours with the projects left out (they would need ``west update``,
i.e. the network): ``west init -l`` then registers our extension command as it would for
a user.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cortex_m_nn.cli import main as cli
from cortex_m_nn.core.target import Core
from cortex_m_nn.pipeline import pte_operators

ROOT = Path(__file__).resolve().parents[2]
WEST = [sys.executable, "-m", "west"]


def _environment(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    # This checkout's package, whether or not it is installed in this Python.
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "python"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    # Keep the user's and the system's west configuration out of the test.
    env["WEST_CONFIG_GLOBAL"] = str(tmp_path / "westconfig-global")
    env["WEST_CONFIG_SYSTEM"] = str(tmp_path / "westconfig-system")
    env.pop("WEST_CONFIG_LOCAL", None)
    env.pop("ZEPHYR_BASE", None)
    return env


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    tmp_path = tmp_path_factory.mktemp("west")
    topdir = tmp_path / "ws"
    manifest_repo = topdir / "cortex-m-nn"
    manifest_repo.mkdir(parents=True)
    shutil.copytree(ROOT / "west_commands", manifest_repo / "west_commands")
    manifest = yaml.safe_load((ROOT / "west.yml").read_text())
    manifest["manifest"] = {"self": manifest["manifest"]["self"]}
    (manifest_repo / "west.yml").write_text(yaml.safe_dump(manifest))
    env = _environment(tmp_path)
    subprocess.run(
        [*WEST, "init", "-l", str(manifest_repo)],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return topdir, env


def _west(workspace, *args: str) -> subprocess.CompletedProcess:
    topdir, env = workspace
    return subprocess.run(
        [*WEST, *args],
        cwd=topdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_west_lists_the_extension_command(workspace):
    result = _west(workspace, "help")
    assert result.returncode == 0, result.stderr
    assert "cortex-m-compile" in result.stdout


def test_help_lists_every_option(workspace):
    result = _west(workspace, "cortex-m-compile", "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: west cortex-m-compile" in result.stdout
    parser = cli.add_arguments(argparse.ArgumentParser(prog="cortex-m-compile"))
    for action in parser._actions:
        for option in action.option_strings:
            assert option in result.stdout, option


def test_unknown_target_is_a_one_line_error(workspace):
    result = _west(workspace, "cortex-m-compile", "--target", "cortex-m99")
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    (line,) = lines
    assert "cortex-m99" in line
    for core in Core:
        assert core.value in line
    assert "Traceback" not in result.stderr

    # Same status and message as the console script.
    script = subprocess.run(
        [sys.executable, "-m", "cortex_m_nn.cli.main", "--target", "cortex-m99"],
        env=workspace[1],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert script.returncode == result.returncode
    assert script.stderr.strip() == line


def test_no_arguments_compiles_the_default_model(workspace):
    """`west cortex-m-compile` alone: DS-CNN for cortex-m55, fully lowered, verified."""
    topdir, _ = workspace
    result = _west(workspace, "cortex-m-compile", "--verify")
    assert result.returncode == 0, result.stderr
    pte = topdir / "ds_cnn.pte"
    assert pte.is_file()
    operators = pte_operators(pte.read_bytes())
    assert "cortex_m_nn::conv2d.out" in operators
    assert "cortex_m_nn::depthwise_conv2d.out" in operators
    assert not [op for op in operators if op.startswith("aten::")], operators
    assert "0 fallbacks" in result.stdout and "PASS" in result.stdout
    assert "Warning" not in result.stderr, result.stderr  # no third-party deprecation chatter


def test_inspect_runs_the_firmware_report(workspace, tmp_path):
    not_elf = tmp_path / "app.elf"
    not_elf.write_text("not an ELF")
    result = _west(workspace, "cortex-m-compile", "inspect", str(not_elf))
    assert result.returncode == 2
    assert "cortex-m-compile inspect: error:" in result.stderr and "ARM ELF" in result.stderr


def test_embed_gets_its_own_options(workspace, tmp_path):
    # --board, --flash, --ram and -q are also compile options: they must reach embed.
    pte = tmp_path / "model.pte"
    pte.write_bytes(b"not a program")
    result = _west(
        workspace, "cortex-m-compile", "embed", str(pte), "--output-dir", str(tmp_path / "out"),
        "--board", "nowhere", "-q",
    )  # fmt: skip
    assert result.returncode == 2
    assert "cortex-m-compile embed: error: unknown board 'nowhere'" in result.stderr


def test_unknown_arguments_are_refused(workspace):
    result = _west(workspace, "cortex-m-compile", "--no-such-option")
    assert result.returncode != 0
    assert "unrecognized arguments: --no-such-option" in result.stderr
