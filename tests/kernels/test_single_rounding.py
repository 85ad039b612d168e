"""The kernels built with CMSIS-NN's single rounding agree with the references' single
rounding. One kernel build per process, so the operator tests run again in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cortex_m_nn.check.harness import KERNELS_LIBRARY_VARIABLE
from cortex_m_nn.check.host_kernels import KernelAbi

from .conftest import ROUNDING_VARIABLE

HERE = Path(__file__).parent
#: the operators that requantize with arm_nn_requantize (the others never round this way)
REQUANTIZING = [
    "test_convolutions.py::test_bit_exact[conv2d]",
    "test_convolutions.py::test_bit_exact[depthwise_conv2d]",
    "test_linear.py",
    "test_elementwise.py::test_bit_exact[add]",
]


def test_single_rounding_build(kernels: KernelAbi) -> None:
    if kernels.rounding == "single":
        pytest.skip("this run already tests the single-rounding build")
    env = {k: v for k, v in os.environ.items() if k != KERNELS_LIBRARY_VARIABLE}
    env[ROUNDING_VARIABLE] = "single"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:logging",
            *(str(HERE / f) for f in REQUANTIZING),
        ],
        cwd=HERE.parents[1],
        env=env,
        capture_output=True,
        text=True,
    )
    tail = "\n".join(result.stdout.splitlines()[-15:])
    assert result.returncode == 0, tail
    assert "skipped" not in result.stdout.splitlines()[-1], tail
