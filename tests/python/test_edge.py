"""``edge.to_edge_program``: the programs it serialises are ExecuTorch's ``to_edge``'s, byte for
byte, whether it skips the decomposition (a fully lowered graph) or not (a float fallback)."""

from __future__ import annotations

import operator
from collections.abc import Callable

import pytest
import torch
from executorch.exir import to_edge
from tests.python.models import conv_stack, pools, split, with_rms_norm

import cortex_m_nn.pipeline as compile_module
import cortex_m_nn.serialize.edge as edge
from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.ops.library import operator as cortex_m_nn_operator
from cortex_m_nn.serialize import execution_graph

#: model, whether it lowers completely (so the decomposition is skipped)
CASES = {
    "conv_stack": (conv_stack, True),
    "pools": (pools, True),
    "split_with_fallback": (split, False),
    "rms_norm_fallback": (with_rms_norm, False),
}


def _plain_to_edge(program: torch.export.ExportedProgram, methods: dict) -> object:
    return to_edge(program, constant_methods=methods, compile_config=edge.CONFIG)


def _never(*args: object, **kwargs: object) -> object:
    raise AssertionError("to_edge ran: the decomposition was not skipped")


@pytest.mark.parametrize("name", list(CASES))
def test_same_bytes_as_to_edge(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    factory, complete = CASES[name]
    compiled, _ = check_dialect(*factory(), allow_fallback=not complete)
    fallbacks = [r for r in compiled.records if not r.lowered]
    assert bool(fallbacks) != complete, fallbacks
    # a fully lowered graph would go straight to the execution dialect: take this path
    monkeypatch.setattr(execution_graph, "unsupported", lambda graph: "forced")
    if complete:  # the skip is taken: to_edge itself must not run
        monkeypatch.setattr(edge, "to_edge", _never)
    ours = compiled.pte
    monkeypatch.undo()
    with monkeypatch.context() as patch:
        patch.setattr(execution_graph, "unsupported", lambda graph: "forced")
        patch.setattr(compile_module, "to_edge_program", _plain_to_edge)
        compiled._serialised = None
        theirs = compiled.pte
    assert ours == theirs


NEEDS: dict[str, tuple[Callable[[], object], bool]] = {
    "getitem": (lambda: operator.getitem, False),
    "cortex_m_nn.conv2d": (lambda: cortex_m_nn_operator("conv2d"), False),
    "aten.view (core)": (lambda: torch.ops.aten.view.default, False),
    "aten.permute (core)": (lambda: torch.ops.aten.permute.default, False),
    "aten.reshape (implicit autograd)": (lambda: torch.ops.aten.reshape.default, True),
    "aten.conv2d (decomposed to convolution)": (lambda: torch.ops.aten.conv2d.default, True),
    "aten.linalg_vector_norm (not core)": (lambda: torch.ops.aten.linalg_vector_norm.default, True),
    "aten.reflection_pad2d (core, in the table)": (
        lambda: torch.ops.aten.reflection_pad2d.default,
        True,
    ),
    "a Python function": (lambda: torch.nn.functional.relu, True),
}


@pytest.mark.parametrize("name", list(NEEDS))
def test_needs_decomposition(name: str) -> None:
    target, expected = NEEDS[name]
    assert edge.needs_decomposition(target()) is expected
