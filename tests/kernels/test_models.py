"""Whole programs compiled by our pipeline, run by executorch.runtime with our kernels:
outputs bit-identical to the lowered graph's references; mismatched programs refused."""

from __future__ import annotations

import pytest
import torch
from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
from executorch.runtime import Runtime
from tests.python import models

from cortex_m_nn.check.harness import check_implementation
from cortex_m_nn.check.host_kernels import KernelAbi, ProgramMismatch, check_program
from cortex_m_nn.core.options import IoType
from cortex_m_nn.core.target import Core, Isa, Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource, load_model
from cortex_m_nn.ops.arithmetic import Rounding
from cortex_m_nn.pipeline import CompiledProgram, compile_model


def compile_for(
    source: ModelSource,
    kernels: KernelAbi,
    isa: str | None = None,
    io: IoType = IoType.FLOAT,
    schedule: str = "fast",
) -> CompiledProgram:
    return compile_model(
        source,
        Target(Core.M55, Isa(isa or kernels.isa)),
        synthetic(source.example_inputs, count=16),
        rounding=Rounding(kernels.rounding),
        progress=False,
        io=io,
        schedule=schedule,
    )


def samples(source: ModelSource, count: int = 8) -> list[tuple[torch.Tensor, ...]]:
    """Fresh inputs, half of them scaled ×3 so saturation paths run too."""
    gen = torch.Generator().manual_seed(11)
    return [
        tuple(
            torch.randn(x.shape, generator=gen) * (3.0 if i % 2 else 1.0)
            for x in source.example_inputs
        )
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def ds_cnn() -> ModelSource:
    return load_model(None)


def test_ds_cnn_end_to_end(kernels: KernelAbi, ds_cnn: ModelSource) -> None:
    compiled = compile_for(ds_cnn, kernels)
    check_implementation(compiled, samples(ds_cnn))


@pytest.mark.parametrize("io", list(IoType), ids=[t.value for t in IoType])
@pytest.mark.parametrize("factory", [models.conv_stack, models.pools], ids=["conv_stack", "pools"])
def test_small_models_end_to_end(kernels: KernelAbi, factory, io: IoType) -> None:
    """Float inputs and outputs, and int8 ones (--io int8: no boundary kernels)."""
    module, example = factory()
    source = ModelSource(factory.__name__, module, example)
    compiled = compile_for(source, kernels, io=io)
    assert [spec is None for spec in compiled.io.inputs] == [io is IoType.FLOAT]
    check_implementation(compiled, samples(source))


@pytest.mark.parametrize(
    "name", ["overlap_guard", "ds_cnn", "conv_stack", "pools", "mobilenet_v1_025", "stage_guard"]
)
def test_small_schedule_end_to_end(kernels: KernelAbi, name: str) -> None:
    """Outputs over the consumed part of their inputs (the small schedule, plan.overlap) and
    first layers run in strips (plan.patch) on the host's CMSIS-NN code path: bit exact on
    random inputs, which a kernel reading a byte after writing over it, or a strip computed
    from the wrong rows or pads, would not be. The guard model's plan shares bytes; the
    stage guard runs a stage in strips."""
    from tests.target.models import MODELS

    if name == "ds_cnn":
        source = load_model(None)
    elif name in MODELS:
        source = ModelSource(name, *MODELS[name]())
    else:
        factory = getattr(models, name)
        source = ModelSource(name, *factory())
    compiled = compile_for(source, kernels, io=IoType.INT8, schedule="small")
    assert compiled.memory.conflicts() == []
    if name == "overlap_guard":
        assert compiled.memory.overlapping(), "the guard model's plan shares no bytes"
    if name == "stage_guard":
        assert compiled.memory.stage is not None, "no stage runs in strips"
    check_implementation(compiled, samples(source))


@pytest.mark.parametrize("damage", ["shifted", "outside", "template"])
def test_a_damaged_stage_program_computes_wrong_or_is_refused(
    kernels: KernelAbi, damage: str
) -> None:
    """The control of the stage call (plan.fold): its kernel computes from exactly the bytes
    its program names. With one step's input view moved 16 bytes within the scratch the
    outputs differ from the layer-by-layer references; with a view reaching past its tensor,
    or a step naming a template the program does not have, the kernel refuses the call."""
    import dataclasses

    from tests.target.models import MODELS

    from cortex_m_nn.ops.library import run_references
    from cortex_m_nn.ops.stage import SCRATCH, decode, encode
    from cortex_m_nn.pipeline import serialise_graph
    from cortex_m_nn.plan import patch

    source = ModelSource("stage_guard", *MODELS["stage_guard"]())
    compiled = compile_for(source, kernels, io=IoType.INT8, schedule="small")
    chosen = patch.choose(compiled.io.graph, compiled.target)
    assert chosen is not None
    steps = decode(getattr(chosen.graph, patch.PROGRAM).tolist())
    index = next(
        i
        for i, s in enumerate(steps)
        if s.operator == "conv2d" and s.arguments[0].source == SCRATCH
        and s.arguments[0].offset >= 16
    )  # fmt: skip
    view = steps[index].arguments[0]
    moved = view.offset - 16 if damage == "shifted" else 1 << 30
    arguments = (dataclasses.replace(view, offset=moved), *steps[index].arguments[1:])
    steps[index] = dataclasses.replace(steps[index], arguments=arguments)
    words = encode(steps)
    if damage == "template":
        words = encode(decode(getattr(chosen.graph, patch.PROGRAM).tolist()))
        words[words[3]] = words[1]  # the first step names template T of T
    setattr(chosen.graph, patch.PROGRAM, torch.tensor(words, dtype=torch.int32))
    pte = serialise_graph(chosen.graph, compiled.io, source, compiled.abi, "small").pte
    method = Runtime.get().load_program(pte).load_method("forward")
    inputs = list(compiled.io.program_inputs(source.example_inputs))
    if damage != "shifted":
        with pytest.raises(RuntimeError):
            method.execute(inputs)
        return
    got = method.execute(inputs)
    expected = run_references(compiled.io.graph, tuple(inputs), Rounding(kernels.rounding))
    assert not all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))


def test_program_for_another_isa_is_refused_at_load(
    kernels: KernelAbi, ds_cnn: ModelSource
) -> None:
    other = "mve" if kernels.isa != "mve" else "dsp"
    compiled = compile_for(ds_cnn, kernels, isa=other)
    program = Runtime.get().load_program(compiled.pte)
    with pytest.raises(ProgramMismatch, match=f"ISA {other}.*kernels: {kernels.isa}"):
        check_program(program, kernels)


def test_mve_program_fails_at_first_call_without_the_load_check(
    kernels: KernelAbi, ds_cnn: ModelSource
) -> None:
    """Kernels refuse what they cannot run even when a loader skips the check."""
    if kernels.isa == "mve":
        pytest.skip("these kernels are an MVE build")
    compiled = compile_for(ds_cnn, kernels, isa="mve")
    method = Runtime.get().load_program(compiled.pte).load_method("forward")
    with pytest.raises(RuntimeError):
        method.execute(list(ds_cnn.example_inputs))


def test_other_operator_version_fails_at_first_call(
    kernels: KernelAbi, ds_cnn: ModelSource
) -> None:
    """A call with another argument list (as an older/newer operator version would pass)."""
    compiled = compile_for(ds_cnn, kernels)
    program = deserialize_pte_binary(compiled.pte)
    plan = next(p for p in program.program.execution_plan if p.name == "forward")
    call = next(
        i.instr_args
        for chain in plan.chains
        for i in chain.instructions
        if hasattr(i.instr_args, "op_index")
        and plan.operators[i.instr_args.op_index].name == "cortex_m_nn::conv2d"
    )
    call.args = call.args[:3] + call.args[4:]  # drop one argument
    tampered = bytes(serialize_pte_binary(program))
    method = Runtime.get().load_program(tampered).load_method("forward")
    with pytest.raises(RuntimeError):
        method.execute(list(ds_cnn.example_inputs))


def test_svdf_stream_end_to_end(kernels: KernelAbi) -> None:
    """A model with states (the zoo's SVDF keyword spotter): eight executions of one loaded
    program, each continuing the states, equal the references' eight steps."""
    from tests.zoo.svdf_kws import svdf_kws

    module, example = svdf_kws()
    source = ModelSource("svdf_kws", module, example)
    check_implementation(compile_for(source, kernels), samples(source))


def test_gru_stream_end_to_end(kernels: KernelAbi) -> None:
    """A streaming GRU (the zoo's keyword spotter, one frame per inference, two layers whose
    state is kept): eight executions of one loaded program, each continuing the states,
    equal the references' eight steps."""
    from tests.zoo.kws_gru import kws_gru_streaming

    module, example = kws_gru_streaming()
    source = ModelSource("kws_gru_streaming", module, example)
    check_implementation(compile_for(source, kernels), samples(source))


def test_lstm_stream_end_to_end(kernels: KernelAbi) -> None:
    """A streaming LSTM (the zoo's keyword spotter, one frame per inference, two layers whose
    hidden and cell states are kept): eight executions of one loaded program, each
    continuing the states, equal the references' eight steps."""
    from tests.zoo.kws_lstm import kws_lstm_streaming

    module, example = kws_lstm_streaming()
    source = ModelSource("kws_lstm_streaming", module, example)
    check_implementation(compile_for(source, kernels), samples(source))
