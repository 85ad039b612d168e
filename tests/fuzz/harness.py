"""What every fuzz case shares: running the CLI in this process under a time limit, the property
its outcome must have, and the hypothesis settings (bounded for CI, scaled by an environment
variable for long local runs).

The property (issue 13): ``cortex-m-compile`` either exits 0, having written its outputs (a
compile always passes ``--verify``, so exit 0 means the program verified), or exits 2 (the
user's input is at fault) or 3 (an internal error) with exactly one line on stderr and nothing
written in the output directory, not even a temporary file. Never a traceback, another exit
status or a hang.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings

from cortex_m_nn.cli import main as cli

#: Multiplies every fuzz test's example count (default 1: the CI budget, ≤ 60 s in all).
SCALE_VARIABLE = "CORTEX_M_NN_FUZZ_EXAMPLES"

#: Seconds one case may take. A compile of the fuzzed models takes about a second (a few on
#: a loaded machine); reading a corrupted file, milliseconds.
CASE_TIMEOUT = 120

#: (kind, outcome) → cases run in this process; written out by conftest.py when asked.
OUTCOMES: Counter[tuple[str, str]] = Counter()


def scale() -> int:
    """``$CORTEX_M_NN_FUZZ_EXAMPLES`` (1: the CI run)."""
    return int(os.environ.get(SCALE_VARIABLE, "1"))


def fuzz_settings(examples: int) -> settings:
    """``examples`` per run, times ``$CORTEX_M_NN_FUZZ_EXAMPLES``; no deadline (compiles vary
    with the machine's load), no example database. The CI run is deterministic (derandomize:
    the same cases every time); a scaled-up run draws new cases each time."""
    return settings(
        max_examples=examples * scale(),
        deadline=None,
        derandomize=scale() == 1,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=False,
    )


@dataclass(frozen=True)
class Seeds:
    """The valid files the cases corrupt (conftest.py's ``seeds`` fixture)."""

    factory: str  # path/tiny.py:tiny, the model the calibration files are for
    pt2: bytes
    pt: bytes
    npz: bytes
    pte: bytes


class CaseTimeout(BaseException):
    """A case ran past CASE_TIMEOUT (a BaseException: the CLI's own ``except Exception`` must
    not turn it into an exit status)."""


@contextlib.contextmanager
def time_limit(seconds: int):
    """Raise CaseTimeout in the main thread after ``seconds`` (SIGALRM, an interval timer).

    Limits: the signal handler runs between Python bytecodes, so a hang inside one long C++
    call (a torch kernel, a deadlock in native code) is only caught when that call returns;
    the subprocess cases (test_subprocess.py) have a hard timeout for that. Off the main thread
    (signals cannot be set there) the case runs without a limit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise CaseTimeout(f"the case ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Outcome:
    status: int
    stdout: str
    stderr: str


def run_cli(argv: list[object]) -> Outcome:
    """``cortex_m_nn.cli.main.main(argv)`` in this process, its stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    with time_limit(CASE_TIMEOUT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main([str(a) for a in argv])
    return Outcome(status, out.getvalue(), err.getvalue())


def files_in(directory: Path) -> set[str]:
    """Every file and directory below ``directory`` (hidden ones too), relative to it."""
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*")}


def check(kind: str, outcome: Outcome, output_dir: Path, written: set[str]) -> None:
    """Assert the property; ``written``: what ``output_dir`` holds after a success."""
    err = outcome.stderr
    assert "Traceback" not in err, f"{kind}: a traceback reached stderr:\n{err}"
    found = files_in(output_dir)
    if outcome.status == 0:
        OUTCOMES[kind, "0"] += 1
        assert found == written, f"{kind}: exit 0 wrote {sorted(found)}, not {sorted(written)}"
        return
    lines = err.splitlines()
    assert outcome.status in (2, 3), f"{kind}: exit status {outcome.status}; stderr:\n{err}"
    assert len(lines) == 1, f"{kind}: exit {outcome.status} with {len(lines)} lines:\n{err}"
    prefix = "error: " if outcome.status == 2 else "internal error in "
    assert f": {prefix}" in lines[0], f"{kind}: exit {outcome.status} with {lines[0]!r}"
    assert not found, f"{kind}: exit {outcome.status} left {sorted(found)}: {lines[0]}"
    OUTCOMES[kind, str(outcome.status)] += 1
    if outcome.status == 3:
        OUTCOMES[kind, f"3: {lines[0][:160]}"] += 1
