"""cortex_m_nn::svdf on the host runtime against its reference, both state cases.

The state is what makes SVDF different: each drawn case is a state buffer of the program
(``mutable_state_*``: planned, its drawn initial value loaded once, ``execution_graph``) and
two calls on it per execution; the program runs twice, so four steps of every case, two of
them starting from a state the previous execution left, must equal four reference steps.
"""

from __future__ import annotations

import operator

import pytest
import torch
from executorch.runtime import Runtime
from hypothesis import given
from hypothesis import strategies as st
from tests.python.ops.test_svdf import layer_sizes
from torch.fx import Graph, GraphModule

from cortex_m_nn.check import host_kernels
from cortex_m_nn.check.host_kernels import KernelAbi
from cortex_m_nn.core.abi import ProgramAbi
from cortex_m_nn.ops.arithmetic import quantize_multiplier
from cortex_m_nn.ops.library import FUNCTIONALS
from cortex_m_nn.ops.library import operator as cortex_op
from cortex_m_nn.ops.svdf import STATE_PREFIX, scratch_bytes, svdf_kernel_sums
from cortex_m_nn.pipeline import metadata
from cortex_m_nn.plan.placement import memory_planning_pass
from cortex_m_nn.serialize import execution_graph

from .strategies import (
    CALLS_PER_PROGRAM,
    KERNEL_SETTINGS,
    activation_range,
    generator,
    host_target,
    int8,
)

#: Steps per execution, executions per program.
STEPS, EXECUTIONS = 2, 2


@st.composite
def svdf_cases(draw: st.DrawFn, dtype: torch.dtype) -> dict:
    """One layer: its initial state, constant arguments and the inputs of every step."""
    gen = generator(draw)
    batch, size, memory, rank, units = layer_sizes(draw, size=40, memory=12, units=8)
    filters = rank * units
    info = torch.iinfo(dtype)
    # time weights as TFLite makes them (int16: 10 bits) or wider; no int32 sum can wrap
    bound = 127 if dtype is torch.int8 else draw(st.sampled_from([511, 1800]))
    state = torch.randint(
        info.min, info.max + 1, (batch, filters, memory), generator=gen, dtype=dtype
    )
    weights_time = torch.randint(-bound, bound + 1, (filters, memory), generator=gen, dtype=dtype)
    weights_feature = int8((filters, size), gen, low=-127)
    input_offset, output_offset = draw(st.integers(-128, 127)), draw(st.integers(-128, 127))
    bias = None
    if draw(st.booleans()):
        bias = torch.randint(-(2**20), 2**20, (units,), generator=gen, dtype=torch.int32)
    sums = None
    if dtype is torch.int8 and draw(st.booleans()):
        sums = svdf_kernel_sums(weights_feature, input_offset)
    # the first scale puts a projection of up to 2^10-2^17 into the state's range
    m1, s1 = quantize_multiplier(info.max / 2 ** draw(st.floats(10, 17)))
    m2, s2 = quantize_multiplier(2.0 ** -draw(st.floats(8, 22 if dtype is torch.int8 else 26)))
    low, high = activation_range(draw)
    inputs = [int8((batch, size), gen) for _ in range(STEPS * EXECUTIONS)]
    constants = (weights_feature, weights_time, bias, sums)
    numbers = (rank, input_offset, output_offset, m1, s1, m2, s2, low, high)
    return {"state": state, "constants": constants, "numbers": numbers, "inputs": inputs}


def _program(cases: list[dict], kernels: KernelAbi) -> bytes:
    """Every case's state and constants as buffers, ``STEPS`` calls each per execution."""
    root, graph = torch.nn.Module(), Graph()
    placeholders = [
        [graph.placeholder(f"x{i}_{k}") for k in range(STEPS)] for i in range(len(cases))
    ]
    outputs = []
    for i, case in enumerate(cases):
        root.register_buffer(f"{STATE_PREFIX}_{i}", case["state"].clone())
        constants = []
        for j, tensor in enumerate(case["constants"]):
            if tensor is not None:
                root.register_buffer(f"c{i}_{j}", tensor)
            constants.append(None if tensor is None else graph.get_attr(f"c{i}_{j}"))
        state = graph.get_attr(f"{STATE_PREFIX}_{i}")
        batch, filters, _ = case["state"].shape
        scratch = scratch_bytes(batch, filters, filters // case["numbers"][0])
        for x in placeholders[i]:
            args = (x, state, *constants, *case["numbers"], scratch)
            call = graph.call_function(cortex_op("svdf"), args)
            outputs.append(graph.call_function(operator.getitem, (call, 0)))
    graph.output(tuple(outputs))
    abi = ProgramAbi.for_target(host_target(kernels.isa), kernels.rounding)
    examples = [case["inputs"][k] for case in cases for k in range(STEPS)]
    program = execution_graph.execution_program(GraphModule(root, graph), examples)
    return execution_graph.serialise(program, metadata(abi), memory_planning_pass())


def _references(case: dict, rounding: object) -> list[torch.Tensor]:
    """The reference's outputs of every step, from a copy of the initial state."""
    state = case["state"].clone()
    return [
        FUNCTIONALS["svdf"](rounding, x, state, *case["constants"], *case["numbers"], 0)[0]
        for x in case["inputs"]
    ]


@pytest.mark.parametrize("dtype", [torch.int16, torch.int8], ids=["state-int16", "state-int8"])
@KERNEL_SETTINGS
@given(data=st.data())
def test_svdf_bit_exact(kernels: KernelAbi, dtype: torch.dtype, data: st.DataObject) -> None:
    cases = [data.draw(svdf_cases(dtype)) for _ in range(CALLS_PER_PROGRAM)]
    loaded = Runtime.get().load_program(_program(cases, kernels))
    host_kernels.check_program(loaded, kernels)
    method = loaded.load_method("forward")
    got: list[list[torch.Tensor]] = [[] for _ in cases]
    for execution in range(EXECUTIONS):
        steps = range(execution * STEPS, (execution + 1) * STEPS)
        outputs = method.execute([case["inputs"][k] for case in cases for k in steps])
        for i in range(len(cases)):
            got[i].extend(outputs[i * STEPS : (i + 1) * STEPS])
    for i, case in enumerate(cases):
        for step, (mine, want) in enumerate(
            zip(got[i], _references(case, kernels.rounding), strict=True)
        ):
            shape = tuple(case["state"].shape)
            assert torch.equal(mine, want), f"case {i} (state {shape}, {dtype}) step {step}"
