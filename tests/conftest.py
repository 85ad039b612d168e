"""Session-wide fixtures: models exported and calibrated once, lowered per target
(``tests/quantized_models.py``). The graphs are only read by lowering and verification; a
test that changes a compiled program must copy it first."""

from __future__ import annotations

import pytest
from tests.quantized_models import QuantizedModels

from cortex_m_nn.compile import CompiledProgram
from cortex_m_nn.models import ds_cnn


@pytest.fixture(scope="session")
def quantized_models() -> QuantizedModels:
    return QuantizedModels()


@pytest.fixture(scope="session")
def ds_cnn_compiled(quantized_models: QuantizedModels) -> CompiledProgram:
    """DS-CNN for cortex-m55 (double rounding, no fallback), compiled once per session."""
    return quantized_models.get("ds_cnn", ds_cnn).lower("cortex-m55")
