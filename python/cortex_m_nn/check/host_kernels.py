"""The kernels on the host: build ``kernels/`` as a shared library, load it into ExecuTorch's
Python runtime, and refuse programs compiled for different kernels.

The host build compiles CMSIS-NN's portable C path (the ``scalar`` ISA) from the user's
CMSIS-NN checkout (``CMSIS_NN_PATH``) and links the ExecuTorch wheel's ``libexecutorch.so``,
so loading it with ``RTLD_GLOBAL`` registers our operators in the registry that
``executorch.runtime`` uses. One kernel build per process: ExecuTorch refuses a second
registration of the same operator names.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

from cortex_m_nn.core.abi import (
    METADATA_METHOD,
    METADATA_PREFIX,
    KernelAbi,
    Rounding,
    decode_metadata,
)

__all__ = ["KernelAbi", "ProgramMismatch", "RuntimeUnavailable", "build", "check_program", "load"]

CMSIS_NN_VARIABLE = "CMSIS_NN_PATH"
LIBRARY_NAME = "libcortex_m_nn_kernels.so"


class RuntimeUnavailable(Exception):
    """No runtime with cortex_m_nn kernels can run here; the message says what is missing."""


class ProgramMismatch(Exception):
    """A program was compiled for other kernels (ISA, rounding or operator version)."""


def kernels_source_dir() -> Path:
    """``kernels/`` of the checkout this package runs from."""
    path = Path(__file__).resolve().parents[3] / "kernels"
    if not (path / "CMakeLists.txt").is_file():
        raise RuntimeUnavailable(
            "the kernels/ sources are not next to this package; use a source checkout "
            "(pip install -e .) to build the host kernels"
        )
    return path


def build(
    build_dir: Path,
    cmsis_nn_path: Path | None = None,
    rounding: Rounding = Rounding.DOUBLE,
    sanitize: bool = False,
) -> Path:
    """Configure and build the host kernels library in ``build_dir``; returns its path.

    ``sanitize`` instruments it with AddressSanitizer and UBSan (``CORTEX_M_NN_SANITIZE``): a
    process loading it must preload the ASan runtime (``LD_PRELOAD``; docs/testing.md,
    Kernels)."""
    source = kernels_source_dir()
    cmsis_nn = cmsis_nn_path or os.environ.get(CMSIS_NN_VARIABLE)
    if not cmsis_nn:
        raise RuntimeUnavailable(f"{CMSIS_NN_VARIABLE} is not set (a CMSIS-NN checkout)")
    if not (Path(cmsis_nn) / "Include" / "arm_nnfunctions.h").is_file():
        raise RuntimeUnavailable(f"{CMSIS_NN_VARIABLE}={cmsis_nn} is not a CMSIS-NN checkout")
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeUnavailable("cmake is not installed (needed to build the host kernels)")
    build_dir.mkdir(parents=True, exist_ok=True)
    configure = [
        cmake,
        "-S",
        str(source),
        "-B",
        str(build_dir),
        "-DCORTEX_M_NN_HOST=ON",
        f"-DCMSIS_NN_PATH={cmsis_nn}",
        f"-DCORTEX_M_NN_ROUNDING={rounding.value}",
        f"-DPython3_EXECUTABLE={sys.executable}",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DCORTEX_M_NN_SANITIZE={'ON' if sanitize else 'OFF'}",
    ]
    for command in (configure, [cmake, "--build", str(build_dir), "-j", str(os.cpu_count() or 1)]):
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
            raise RuntimeError(f"building the host kernels failed: {' '.join(command)}\n{tail}")
    return build_dir / LIBRARY_NAME


_loaded: dict[str, KernelAbi] = {}


def load(library: Path) -> KernelAbi:
    """Register the kernels of ``library`` with ExecuTorch (once per process); its ABI."""
    key = str(Path(library).resolve())
    if key in _loaded:
        return _loaded[key]
    if _loaded:
        raise RuntimeUnavailable(
            f"another kernels library is already loaded ({next(iter(_loaded))}); "
            "ExecuTorch registers one set of cortex_m_nn kernels per process"
        )
    handle = ctypes.CDLL(key, mode=ctypes.RTLD_GLOBAL)
    handle.cortex_m_nn_kernels_abi.restype = ctypes.c_char_p
    abi = KernelAbi.parse(handle.cortex_m_nn_kernels_abi().decode())
    _loaded[key] = abi
    return abi


def program_abi(program: object) -> KernelAbi:
    """The ABI an ``executorch.runtime`` Program was compiled for (its metadata method)."""
    values = {}
    if METADATA_METHOD in program.method_names:
        values = decode_metadata(str(program.load_method(METADATA_METHOD).execute([])[0]))
    names = [f"{METADATA_PREFIX}{name}" for name in ("isa", "rounding", "ops_version")]
    missing = [name.removeprefix(METADATA_PREFIX) for name in names if name not in values]
    if missing:
        raise ProgramMismatch(
            f"the program records no {', '.join(missing)} (method {METADATA_METHOD}): it was "
            "not compiled by this cortex-m-compile; compile the model with cortex-m-compile"
        )
    return KernelAbi.from_metadata(values)


def check_program(program: object, kernels: KernelAbi) -> None:
    """Raise ProgramMismatch naming the fix when ``program`` was compiled for other kernels."""
    problem = program_abi(program).mismatch(kernels)
    if problem is not None:
        raise ProgramMismatch(problem)
