"""The kernel tests need a host build of kernels/: from CORTEX_M_NN_KERNELS_LIB, or built here
from the CMSIS-NN checkout in CMSIS_NN_PATH (cached in pytest's cache directory), with the
rounding CORTEX_M_NN_KERNELS_ROUNDING names (double unless set). Parallel workers build it
once, under a file lock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from filelock import FileLock

from cortex_m_nn import host_kernels
from cortex_m_nn.host_kernels import KernelAbi
from cortex_m_nn.ops.arithmetic import Rounding
from cortex_m_nn.testing import KERNELS_LIBRARY_VARIABLE

ROUNDING_VARIABLE = "CORTEX_M_NN_KERNELS_ROUNDING"


@pytest.fixture(scope="session")
def kernels(request: pytest.FixtureRequest) -> KernelAbi:
    library = os.environ.get(KERNELS_LIBRARY_VARIABLE)
    if not library:
        if not os.environ.get(host_kernels.CMSIS_NN_VARIABLE):
            pytest.skip(
                f"{host_kernels.CMSIS_NN_VARIABLE} is not set: the kernel tests build kernels/ "
                "against a CMSIS-NN checkout"
            )
        rounding = Rounding(os.environ.get(ROUNDING_VARIABLE, Rounding.DOUBLE.value))
        build_dir = Path(request.config.cache.mkdir(f"host-kernels-{rounding.value}"))
        with FileLock(build_dir.with_suffix(".lock")):  # one build when workers share it
            library = str(host_kernels.build(build_dir, rounding=rounding))
        os.environ[KERNELS_LIBRARY_VARIABLE] = library
    return host_kernels.load(Path(library))
