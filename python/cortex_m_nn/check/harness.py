"""Test harness for users' own models and operators.

``check_dialect`` runs the staged pipeline (quantize → lower → export → to_edge →
to_executorch) and checks which operators exist before and after lowering and that the
lowered graph's numerics agree with the PT2E reference. ``check_implementation`` runs the
same ``.pte`` through a real runtime and requires outputs bit-identical to the lowered
graph's references; it raises ``RuntimeUnavailable`` (tests turn that into a skip with the
reason) when no runtime with our kernels is available.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import torch
from torch.fx import GraphModule

from cortex_m_nn.check import host_kernels
from cortex_m_nn.check.host_kernels import RuntimeUnavailable
from cortex_m_nn.check.verify import Verification, verify_program
from cortex_m_nn.core.abi import KernelAbi, ProgramAbi, Rounding
from cortex_m_nn.core.families import DEQUANTIZE, DEQUANTIZE_PER_CHANNEL, QUANTIZE
from cortex_m_nn.core.graph import op_name
from cortex_m_nn.core.options import QuantizationOptions
from cortex_m_nn.core.target import DEFAULT_TARGET, Target
from cortex_m_nn.frontend.calibration import Calibration, synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.frontend.states import fresh
from cortex_m_nn.ops.library import run_references
from cortex_m_nn.pipeline import CompiledProgram, compile_model

#: Environment variable naming the host build of kernels/ (a shared library).
KERNELS_LIBRARY_VARIABLE = "CORTEX_M_NN_KERNELS_LIB"


def count_operators(graph_module: GraphModule) -> Counter[str]:
    """Operators of a graph by name (``aten.conv2d``, ``cortex_m_nn.conv2d``), without q/dq."""
    skip = QUANTIZE | DEQUANTIZE | DEQUANTIZE_PER_CHANNEL
    return Counter(
        op_name(node.target)
        for node in graph_module.graph.nodes
        if node.op == "call_function"
        and node.target not in skip
        and "getitem" not in str(node.target)
    )


def check_dialect(
    module: torch.nn.Module,
    example_inputs: tuple[torch.Tensor, ...],
    *,
    before: dict[str, int] | None = None,
    after: dict[str, int] | None = None,
    target: Target = DEFAULT_TARGET,
    calibration: Calibration | None = None,
    allow_fallback: bool = False,
    rounding: Rounding = Rounding.DOUBLE,
    options: QuantizationOptions | None = None,
) -> tuple[CompiledProgram, Verification]:
    """Compile and check operators before/after lowering and per-operator numerics (≤ 1 LSB).

    ``before`` counts operators of the PT2E-quantized graph, ``after`` of the lowered graph
    (names as :func:`count_operators` gives them); only the listed names are compared.
    """
    source = ModelSource(type(module).__name__, module.eval(), tuple(example_inputs))
    calibration = calibration or synthetic(source.example_inputs, count=8)
    compiled = compile_model(
        source,
        ProgramAbi.for_target(target, rounding),
        calibration,
        allow_fallback=allow_fallback,
        progress=False,
        serialise=False,  # on first use of compiled.pte: most checks read the graphs only
        options=options,
    )
    for expected, graph, stage in (
        (before, compiled.stages.quantized, "before lowering"),
        (after, compiled.lowered, "after lowering"),
    ):
        if expected is None:
            continue
        counts = count_operators(graph)
        actual = {name: counts.get(name, 0) for name in expected}
        if actual != expected:
            raise AssertionError(f"operators {stage}: expected {expected}, got {actual}")
    verification = verify_program(compiled)
    if not verification.passed:
        raise AssertionError(
            f"lowered graph differs from the PT2E reference by {verification.max_lsb} LSB "
            f"(per operator: {verification.per_node})"
        )
    return compiled, verification


def load_host_kernels() -> KernelAbi:
    """Load the host kernels library named by ``CORTEX_M_NN_KERNELS_LIB``; its ABI."""
    path = os.environ.get(KERNELS_LIBRARY_VARIABLE)
    if not path:
        raise RuntimeUnavailable(
            f"{KERNELS_LIBRARY_VARIABLE} is not set (a host build of kernels/, see "
            "cortex_m_nn.check.host_kernels.build, which needs CMSIS_NN_PATH)"
        )
    if not Path(path).is_file():
        raise RuntimeUnavailable(f"{KERNELS_LIBRARY_VARIABLE}={path} does not exist")
    return host_kernels.load(Path(path))


def check_implementation(
    compiled: CompiledProgram, samples: list[tuple[torch.Tensor, ...]]
) -> None:
    """Run the .pte in ``executorch.runtime`` and require outputs equal to the references
    (``samples`` are float, in the model's layout)."""
    kernels = load_host_kernels()
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(compiled.pte)
    host_kernels.check_program(program, kernels)  # the .pte records compiled.abi
    method = program.load_method("forward")
    io = compiled.io
    graph = fresh(io.graph)  # with states (SVDF): the samples are one sequence, as executed
    for index, sample in enumerate(samples):
        inputs = io.program_inputs(sample)  # int8 for a program with int8 inputs (--io int8)
        expected = run_references(graph, inputs, compiled.abi.rounding)
        actual = method.execute(list(inputs))
        for number, (want, got) in enumerate(zip(expected, actual, strict=True)):
            if not torch.equal(want, got):
                raise AssertionError(
                    f"sample {index}, output {number}: runtime differs from the reference by "
                    f"up to {float((want - got).abs().max())}"
                )
