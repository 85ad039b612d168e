"""The kernel tests need a host build of kernels/: from CORTEX_M_NN_KERNELS_LIB, or built here
from the CMSIS-NN checkout in CMSIS_NN_PATH (cached in pytest's cache directory), with the
rounding CORTEX_M_NN_KERNELS_ROUNDING names (double unless set). Parallel workers build it
once, under a file lock.

CORTEX_M_NN_KERNELS_SANITIZE=1 builds it with AddressSanitizer and UBSan (its own cache
directory); Python is not instrumented, so the ASan runtime must be preloaded (docs/testing.md,
Kernels): the tests skip, saying what to set, when it is not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from filelock import FileLock

from cortex_m_nn.check import host_kernels
from cortex_m_nn.check.harness import KERNELS_LIBRARY_VARIABLE
from cortex_m_nn.check.host_kernels import KernelAbi
from cortex_m_nn.ops.arithmetic import Rounding

ROUNDING_VARIABLE = "CORTEX_M_NN_KERNELS_ROUNDING"
SANITIZE_VARIABLE = "CORTEX_M_NN_KERNELS_SANITIZE"
#: libstdc++ after libasan: ASan then finds the C++ runtime's __cxa_throw (torch throws)
SANITIZE_ENVIRONMENT = (
    'LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" '
    "ASAN_OPTIONS=detect_leaks=0"
)


def sanitize_requested() -> bool:
    """Whether this run asks for the sanitized kernels build."""
    return os.environ.get(SANITIZE_VARIABLE, "") not in ("", "0")


def asan_preloaded() -> bool:
    """Whether the ASan runtime is mapped into this process (LD_PRELOAD)."""
    try:
        return "libasan" in Path("/proc/self/maps").read_text()
    except OSError:
        return "libasan" in os.environ.get("LD_PRELOAD", "")


@pytest.fixture(scope="session")
def kernels(request: pytest.FixtureRequest) -> KernelAbi:
    library = os.environ.get(KERNELS_LIBRARY_VARIABLE)
    if not library:
        if not os.environ.get(host_kernels.CMSIS_NN_VARIABLE):
            pytest.skip(
                f"{host_kernels.CMSIS_NN_VARIABLE} is not set: the kernel tests build kernels/ "
                "against a CMSIS-NN checkout"
            )
        sanitize = sanitize_requested()
        if sanitize and not asan_preloaded():
            pytest.skip(f"{SANITIZE_VARIABLE}=1 needs the ASan runtime: set {SANITIZE_ENVIRONMENT}")
        rounding = Rounding(os.environ.get(ROUNDING_VARIABLE, Rounding.DOUBLE.value))
        name = f"host-kernels-{rounding.value}" + ("-sanitize" if sanitize else "")
        build_dir = Path(request.config.cache.mkdir(name))
        with FileLock(build_dir.with_suffix(".lock")):  # one build when workers share it
            library = str(host_kernels.build(build_dir, rounding=rounding, sanitize=sanitize))
        os.environ[KERNELS_LIBRARY_VARIABLE] = library
    return host_kernels.load(Path(library))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many tampered programs the run tried (test_tampered_programs.py records them)."""
    tried = sum(
        value
        for report in terminalreporter.stats.get("passed", [])
        for name, value in report.user_properties
        if name == "tampered_programs"
    )
    if tried:
        sanitized = " (sanitized kernels)" if sanitize_requested() else ""
        terminalreporter.write_line(f"tampered programs tried: {tried}{sanitized}")
