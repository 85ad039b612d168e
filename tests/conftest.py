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

This file imports neither torch nor the compiler at module level: the xdist controller loads
it too, and only the workers run tests (importing torch and ExecuTorch takes seconds).
"""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.quantized_models import QuantizedModels

    from cortex_m_nn.pipeline import CompiledProgram


@pytest.fixture(scope="session")
def quantized_models() -> QuantizedModels:
    from tests.quantized_models import QuantizedModels

    return QuantizedModels()


@pytest.fixture(scope="session")
def ds_cnn_compiled(quantized_models: QuantizedModels) -> CompiledProgram:
    """DS-CNN for cortex-m55 (double rounding, no fallback), compiled once per session."""
    from cortex_m_nn.frontend.models import ds_cnn

    return quantized_models.get("ds_cnn", ds_cnn).lower("cortex-m55")


def _cache_cia_operators() -> None:
    """Remember torch's CompositeImplicitAutograd operator set per registry state."""
    import torch
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


def pytest_collection(session: pytest.Session) -> None:
    """Before the test modules import torch, in the process that runs them (an xdist worker,
    or the only process with ``-n 0``): one thread per worker, torch's CIA answers cached."""
    import torch

    if os.environ.get("PYTEST_XDIST_WORKER"):
        torch.set_num_threads(1)
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
    if path.startswith("coverage/") and "core" in params:
        return f"coverage-{params['name']}"  # one export and calibration for both cores
    if path.startswith("target/") and "core_build" in params:
        return f"target-{params['core_build']}"
    if path == "zephyr/test_host_apps.py":
        return "host-apps"
    if _uses_module_fixture(item):
        return f"module-{path}"  # computed once, not once per worker
    return None


def _uses_module_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a module-scoped fixture (compiles shared by the module's tests)."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    return any(defs[-1].scope == "module" for defs in definitions)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse to run when xdist's ``--dist loadgroup`` ignores the groups (it did, silently,
    with pytest 9.2: pytest-dev/pytest-xdist#1386): every worker would redo the shared work.

    Then move everything imported so far (torch, ExecuTorch, the tests) out of the garbage
    collector's sight: its full collections would otherwise walk those millions of objects
    again and again while the tests build graphs (a tenth of the suite's time)."""
    gc.collect()
    gc.freeze()
    if not getattr(session.config.option, "loadgroup", False):  # xdist workers under loadgroup
        return
    for item in session.items:
        if any(item.iter_markers("xdist_group")) and "@" not in item.nodeid:
            raise pytest.UsageError(
                f"pytest-xdist did not put {item.nodeid} in its xdist_group; install the "
                "pytest version pyproject.toml's test extra names"
            )
