"""A few corrupted files through a real ``cortex-m-compile`` process: what torch's and
ExecuTorch's own loggers and warnings print goes to the process's stderr, which the in-process
cases cannot see. A refusal is still one line and no traceback (a hard timeout here: a hang in
native code cannot outlive it)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.fuzz import mutations
from tests.fuzz.harness import Seeds, scale

import cortex_m_nn

pytestmark = pytest.mark.xdist_group("fuzz")

#: A real process imports torch and ExecuTorch (seconds on a loaded machine) before compiling.
PROCESS_TIMEOUT = 300


def _member_corrupted(member: str, offset: int) -> Callable[[bytes], bytes]:
    """The archive with ``member``'s byte at ``offset`` overwritten (checksums recomputed)."""

    def corrupt(data: bytes) -> bytes:
        entries = mutations.members(data)
        edited = []
        for name, content in entries:
            if name.endswith(member):
                content = content[:offset] + b"\xff" + content[offset + 1 :]
            edited.append((name, content))
        return mutations.rezip(edited)

    return corrupt


#: name → (seed file, its corruption, the command's arguments before the file). The first two
#: (torch.export's deserialiser, which logs before it raises) run in CI; every one runs when
#: $CORTEX_M_NN_FUZZ_EXAMPLES scales the suite up (each process takes seconds to start).
CASES = {
    "pt2-bad-json": ("pt2", _member_corrupted("frontend/models/model.json", 40), []),
    "pt2-bad-sample-inputs": ("pt2", _member_corrupted("sample_inputs/model.pt", 100), []),
    "truncated-pt2": ("pt2", lambda d: d[: len(d) // 2], []),
    "pt-bad-pickle": ("pt", _member_corrupted("data.pkl", 20), ["calibration"]),
    "npz-truncated": ("npz", lambda d: d[:-30], ["calibration"]),
    "pte-flipped": ("pte", lambda d: d[:8] + bytes([d[8] ^ 0x40]) + d[9:], ["embed"]),
}


def _argv(kind: list[str], given_file: Path, output_dir: Path, seeds: Seeds) -> list[str]:
    if kind == ["embed"]:
        return ["embed", str(given_file), "--output-dir", str(output_dir), "-q"]
    model = seeds.factory if kind == ["calibration"] else str(given_file)
    argv = [model, "-o", str(output_dir / "model.pte"), "--verify", "-q"]
    return argv + (["--calibration", str(given_file)] if kind else [])


LONG_RUNS = "only with $CORTEX_M_NN_FUZZ_EXAMPLES > 1 (each process starts torch)"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.skipif(i >= 2 and scale() == 1, reason=LONG_RUNS))
        for i, name in enumerate(CASES)
    ],
)
def test_real_process(seeds: Seeds, tmp_path: Path, name: str) -> None:
    seed, corrupt, kind = CASES[name]
    given_file = tmp_path / f"given.{seed}"
    given_file.write_bytes(corrupt(getattr(seeds, seed)))
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    python = str(Path(cortex_m_nn.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([python, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "cortex_m_nn.cli.main", *_argv(kind, given_file, output_dir, seeds)],
        capture_output=True,
        text=True,
        env=env,
        timeout=PROCESS_TIMEOUT,
        check=False,
    )
    assert "Traceback" not in result.stderr, result.stderr
    if result.returncode == 0:
        return
    assert result.returncode in (2, 3), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert not list(output_dir.iterdir())
