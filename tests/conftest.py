"""Session-wide fixtures: models exported and calibrated once, lowered per target
(``tests/quantized_models.py``). The graphs are only read by lowering and verification; a
test that changes a compiled program must copy it first.

The suite runs on pytest-xdist workers (``-n auto --dist loadgroup``, pyproject.toml). Tests
that share an expensive module fixture or a build directory stay on one worker through an
``xdist_group``: a zoo model's tests (one export and calibration), a core's on-target tests
(one runner build), the host applications. Each worker computes with one thread, so two
workers do not fight over the same cores.

Every ``to_edge`` asks torch twice for all CompositeImplicitAutograd operators, walking every
operator namespace (about 0.3 s a time, whatever the model: a third of compiling a small test
model). The answer depends only on the operators registered, so the suite remembers it while
the dispatcher's operator count stays the same (``_cache_cia_operators``). The product does
not: it compiles once per process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
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


if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)


def _cache_cia_operators() -> None:
    """Remember torch's CompositeImplicitAutograd operator set per registry state."""
    import torch._export.utils as export_utils
    import torch.export.decomp_utils as decomp_utils
    import torch.export.exported_program as exported_program

    collect = export_utils._collect_all_valid_cia_ops
    remembered: dict[tuple[int, int], set] = {}

    def cached() -> set:
        key = (len(torch._C._dispatch_get_all_op_names()), len(torch.ops._dir))
        if key not in remembered:
            remembered[key] = collect()
        return remembered[key]

    for module in (export_utils, decomp_utils, exported_program):
        module._collect_all_valid_cia_ops = cached


_cache_cia_operators()

TESTS = Path(__file__).resolve().parent


def _group(item: pytest.Item) -> str | None:
    """The xdist group of a test that must share a worker with others (None: any worker)."""
    path = Path(item.path).resolve().relative_to(TESTS).as_posix()
    params = getattr(getattr(item, "callspec", None), "params", {})
    if path.startswith("zoo/") and "lowered" in params:
        return f"zoo-{params['lowered'][0]}"
    if path.startswith("zoo/") and "name" in params:
        return f"zoo-{params['name']}"
    if path.startswith("target/") and "core_build" in params:
        return f"target-{params['core_build']}"
    if path == "zephyr/test_host_apps.py":
        return "host-apps"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
