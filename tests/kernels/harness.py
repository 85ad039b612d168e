"""Run batches of single-operator calls through executorch.runtime and compare each output,
bit for bit, with the operator's Python reference."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge
from executorch.runtime import Runtime
from hypothesis import given
from hypothesis import strategies as st

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.check import host_kernels
from cortex_m_nn.core.abi import KernelAbi, ProgramAbi
from cortex_m_nn.core.target import Core, Isa, Target
from cortex_m_nn.ops.library import FUNCTIONALS
from cortex_m_nn.pipeline import metadata

from .strategies import KERNEL_SETTINGS, draw_calls


@dataclass
class Call:
    """``cortex_m_nn::<op>(*args)``; ``inputs`` are the positions passed at run time (the
    activations; a list of tensors there passes each of them), every other tensor becomes a
    constant of the program."""

    op: str
    args: tuple
    inputs: tuple[int, ...] = (0,)
    #: inputs the operator writes (a kept state): passed as a copy of the run-time input,
    #: which the program then returns after the call's output (what the call left in it)
    written: tuple[int, ...] = ()

    def describe(self) -> str:
        def text(a: object) -> str:
            if isinstance(a, torch.Tensor):
                return f"{tuple(a.shape)}:{a.dtype}"
            if isinstance(a, list) and a and isinstance(a[0], torch.Tensor):
                return "[" + ", ".join(text(t) for t in a) + "]"
            return repr(a)

        parts = [text(a) for a in self.args]
        return f"{self.op}({', '.join(parts)})"


class Calls(torch.nn.Module):
    def __init__(self, calls: list[Call]) -> None:
        super().__init__()
        self.calls = calls
        for i, call in enumerate(calls):
            for j, arg in enumerate(call.args):
                if isinstance(arg, torch.Tensor) and j not in call.inputs:
                    self.register_buffer(f"c{i}_{j}", arg.clone())

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        remaining = iter(inputs)
        outputs = []
        for i, call in enumerate(self.calls):
            args: list[object] = []
            for j, arg in enumerate(call.args):
                if j in call.inputs and isinstance(arg, list):
                    args.append([next(remaining) for _ in arg])
                elif j in call.inputs:
                    given = next(remaining)
                    args.append(given.clone() if j in call.written else given)
                elif isinstance(arg, torch.Tensor):
                    args.append(getattr(self, f"c{i}_{j}"))
                else:
                    args.append(arg)
            result = getattr(torch.ops.cortex_m_nn, call.op).default(*args)
            outputs.append(result[0] if isinstance(result, tuple) else result)
            outputs.extend(args[j] for j in call.written)  # type: ignore[misc]
        return tuple(outputs)


def runtime_inputs(calls: list[Call]) -> tuple[torch.Tensor, ...]:
    found: list[torch.Tensor] = []
    for call in calls:
        for j in call.inputs:
            arg = call.args[j]
            found.extend(arg if isinstance(arg, list) else [arg])
    return tuple(found)


def program(calls: list[Call], kernels: KernelAbi, isa: str | None = None) -> bytes:
    """A .pte running ``calls``, compiled for the kernels' ABI (or another ISA)."""
    module = Calls(calls)
    exported = torch.export.export(module, runtime_inputs(calls))
    target = Target(Core.M55, Isa(isa or kernels.isa))
    edge = to_edge(
        exported,
        compile_config=EdgeCompileConfig(_check_ir_validity=True),
        constant_methods=metadata(ProgramAbi.for_target(target, kernels.rounding)),
    )
    return edge.to_executorch(ExecutorchBackendConfig()).buffer


def run(pte: bytes, inputs: tuple[torch.Tensor, ...], kernels: KernelAbi) -> list[torch.Tensor]:
    loaded = Runtime.get().load_program(pte)
    host_kernels.check_program(loaded, kernels)
    return list(loaded.load_method("forward").execute(list(inputs)))


def check_calls(calls: list[Call], kernels: KernelAbi) -> None:
    """Every call's runtime output equals its reference (both under the kernels' rounding)."""
    expected: list[tuple[str, torch.Tensor]] = []
    for call in calls:  # on copies: a reference updates a kept state in place
        copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in call.args]
        result = FUNCTIONALS[call.op](kernels.rounding, *copies)
        expected.append((call.describe(), result[0] if isinstance(result, tuple) else result))
        expected += [(f"{call.describe()}, argument {j} written", copies[j]) for j in call.written]
    actual = run(program(calls, kernels), runtime_inputs(calls), kernels)
    for (what, want), got in zip(expected, actual, strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype, what
        if not torch.equal(got, want):
            diff = (got.to(torch.float64) - want.to(torch.float64)).abs()
            raise AssertionError(
                f"{what}: {int((diff > 0).sum())} of {want.numel()} elements differ "
                f"(max {float(diff.max())})"
            )


#: operator → the strategy of its calls for the kernels' ISA (the scratch sizes depend on it)
CallTable = dict[str, Callable[[str], st.SearchStrategy[Call]]]


def bit_exact_test(table: CallTable) -> Callable[..., None]:
    """A table's one test: per operator, programs of drawn calls whose runtime outputs equal
    their references bit for bit (``check_calls``)."""

    @pytest.mark.parametrize("op", list(table))
    @KERNEL_SETTINGS
    @given(data=st.data())
    def test_bit_exact(kernels: KernelAbi, op: str, data: st.DataObject) -> None:
        check_calls(draw_calls(data, table[op](kernels.isa)), kernels)

    return test_bit_exact
