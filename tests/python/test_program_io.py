"""``--io int8``: programs whose inputs and outputs are int8, without boundary kernels.

One case table feeds every check: the program's graph and ``.pte`` (int8 tensors of the stored
shape, no quantize/dequantize kernel, the quantization recorded and read back), its numerics
(the int8 outputs are the float program's outputs re-quantized by hand, on inputs quantized by
hand), and what the report, test vector and firmware header say.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from tests.python import models
from torch import nn

from cortex_m_nn.check import vector as test_vector
from cortex_m_nn.check.verify import verify_program
from cortex_m_nn.core.abi import ProgramAbi
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.options import IoType
from cortex_m_nn.core.target import Target
from cortex_m_nn.embed import pte_source as embed
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.ops.library import run_references
from cortex_m_nn.pipeline import CompiledProgram, compile_model
from cortex_m_nn.report import compile_report as report
from cortex_m_nn.serialize.io_spec import IoQuantization, read_io
from cortex_m_nn.serialize.pte import forward_plan, pte_metadata, pte_operators

INT8 = 1  # ExecuTorch's ScalarType::Char


class TwoHeads(nn.Module):
    """Two inputs (an image and a vector), two outputs (a map and scores)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.linear = nn.Linear(6, 3)

    def forward(self, image: torch.Tensor, vector: torch.Tensor) -> tuple:
        return torch.relu(self.conv(image)), self.linear(vector)


def two_heads() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        return TwoHeads().eval(), (torch.randn(1, 3, 6, 5), torch.randn(2, 6))


class Reshaped(nn.Module):
    """An output that is a view of what the last layer computes (the model ends in a
    reshape)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).reshape(1, 2, 5, 16)


def reshaped() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(6)
        return Reshaped().eval(), (torch.randn(1, 10, 16),)


@dataclass(frozen=True)
class Case:
    factory: Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]
    #: the program's input and output shapes (4-D tensors stored channels-last)
    inputs: list[tuple[int, ...]]
    outputs: list[tuple[int, ...]]


CASES = {
    "conv_stack": Case(models.conv_stack, [(1, 12, 12, 3)], [(1, 5)]),
    "pools": Case(models.pools, [(1, 6, 6, 4)], [(1, 3), (6,)]),
    "two_heads": Case(two_heads, [(1, 6, 5, 3), (2, 6)], [(1, 6, 5, 4), (2, 3)]),
    "reshaped": Case(reshaped, [(1, 10, 16)], [(1, 2, 5, 16)]),
}


@pytest.fixture(scope="module")
def compiled() -> dict[str, CompiledProgram]:
    found = {}
    for name, case in CASES.items():
        module, example = case.factory()
        found[name] = compile_model(
            ModelSource(name, module, example),
            Target.parse("cortex-m55"),
            synthetic(example, count=4),
            progress=False,
            io=IoType.INT8,
        )
    return found


def by_hand(x: torch.Tensor, spec: IoQuantization) -> torch.Tensor:
    """Quantize as the documentation tells a user to (not with the boundary kernel's op)."""
    q = torch.clamp(torch.round(x * (1.0 / spec.scale)) + spec.zero_point, -128, 127)
    q = q.to(torch.int8)
    return q.permute(spec.permutation).contiguous() if spec.permutation else q


@pytest.mark.parametrize("name", list(CASES))
def test_the_program_takes_and_gives_int8(compiled, name: str) -> None:
    program, case = compiled[name], CASES[name]
    plan = forward_plan(program.pte)
    for indices, shapes in ((plan.inputs, case.inputs), (plan.outputs, case.outputs)):
        tensors = [plan.values[i].payload for i in indices]
        assert [t.scalar_type for t in tensors] == [INT8] * len(shapes)
        assert [tuple(t.sizes) for t in tensors] == shapes
    operators = pte_operators(program.pte)
    assert "cortex_m_nn::quantize.out" not in operators
    assert "cortex_m_nn::dequantize.out" not in operators
    assert all(op.startswith("cortex_m_nn::") for op in operators), operators  # no view_copy
    # what the .pte records is what the compile used
    _, inputs, outputs = read_io(pte_metadata(program.pte), len(case.inputs), len(case.outputs))
    assert (inputs, outputs) == (program.io.inputs, program.io.outputs)
    assert [spec.shape for spec in inputs] == case.inputs


@pytest.mark.parametrize("name", list(CASES))
def test_int8_outputs_are_the_float_programs_requantized(compiled, name: str) -> None:
    program = compiled[name]
    io, rounding = program.io, program.abi.rounding
    gen = torch.Generator().manual_seed(1)
    for scale in (1.0, 4.0):  # 4: beyond the calibrated range, saturating
        sample = tuple(
            torch.randn(x.shape, generator=gen) * scale for x in program.model.example_inputs
        )
        inputs = tuple(by_hand(x, spec) for x, spec in zip(sample, io.inputs, strict=True))
        assert all(map(torch.equal, inputs, io.program_inputs(sample)))
        floats = run_references(program.lowered, sample, rounding)
        ints = run_references(io.graph, inputs, rounding)
        for value, q, spec in zip(floats, ints, io.outputs, strict=True):
            assert q.dtype == torch.int8 and tuple(q.shape) == spec.shape
            # the float program gives scale * (q - zero_point), in the model's layout
            assert torch.equal(by_hand(value, spec), q)
    assert verify_program(program).passed


def test_report_test_vector_and_header_say_what_the_program_holds(compiled, tmp_path) -> None:
    program = compiled["two_heads"]
    document = report.as_dict(program, None)
    assert document["io"]["type"] == "int8"
    image = document["io"]["inputs"][0]
    assert image["shape"] == [1, 6, 5, 3] and image["model_shape"] == [1, 3, 6, 5]
    assert image["layout"] == "nhwc" and image["scale"] == program.io.inputs[0].scale
    rows = {r["name"]: r for r in document["operators"]}
    assert all(rows[name]["kernel"] == "removed (no kernel)" for name in program.io.removed)
    text = report.to_text(document)
    assert "inputs and outputs: int8" in text and "input 0: int8 [1, 6, 5, 3] (NHWC" in text

    header = test_vector.for_program(program)
    assert "typedef int8_t cortex_m_nn_test_input_t;" in header
    first = program.io.program_inputs(program.calibration.samples[0])[0]
    body = re.search(r"cortex_m_nn_test_input_0\[\d+\][^=]*= \{(.*?)\};", header, re.S).group(1)
    assert [
        int(v) for v in body.replace("\n", "").split(",") if v.strip()
    ] == first.flatten().tolist()

    facts = embed.model_facts(program.pte)
    model_h = embed.model_header(facts)
    scales = ", ".join(float(s.scale).hex() + "f" for s in program.io.outputs)
    assert "#define CORTEX_M_NN_MODEL_INPUT_INT8 {1, 1}" in model_h
    assert f"#define CORTEX_M_NN_MODEL_OUTPUT_SCALES {{{scales}}}" in model_h


def test_a_float_program_records_nothing_new() -> None:
    """Float I/O: no io metadata (programs are the bytes they were), header tables of zeros."""
    module, example = models.conv_stack()
    program = compile_model(
        ModelSource("conv_stack", module, example),
        ProgramAbi.for_target(Target.parse("cortex-m55")),
        synthetic(example, count=2),
        progress=False,
    )
    assert not [k for k in pte_metadata(program.pte) if k.endswith(("_io", "put_0"))]
    model_h = embed.model_header(embed.model_facts(program.pte))
    assert "#define CORTEX_M_NN_MODEL_INPUT_INT8 {0}" in model_h
    assert "#define CORTEX_M_NN_MODEL_OUTPUT_SCALES {0.0f}" in model_h


class DivisionIn(nn.Module):
    """Its input is read first by a float fallback (a division of two tensors)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x / (2 + x.abs()))


class DivisionOut(DivisionIn):
    """Its output is made by a float fallback."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y / (2 + y.abs())


@pytest.mark.parametrize(
    ("module", "what"), [(DivisionIn, "input 0"), (DivisionOut, "output 0")], ids=["in", "out"]
)
def test_a_boundary_in_float_is_refused(module: type[nn.Module], what: str) -> None:
    example = (torch.randn(2, 8),)
    with pytest.raises(CompileError, match=rf"--io int8: {what} .* or use --io float"):
        compile_model(
            ModelSource(module.__name__, module().eval(), example),
            Target.parse("cortex-m55"),
            synthetic(example, count=2),
            progress=False,
            allow_fallback=True,
            io=IoType.INT8,
        )
