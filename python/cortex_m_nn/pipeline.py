"""The pipeline: model → export → PT2E quantize (calibrated) → lower → ExecuTorch ``.pte``.

The steps, in order (``compile_model`` runs them; ``Stages`` keeps what each made):

1. ``export``: ``torch.export`` of the model (a ``ModelSource``, loaded by the caller);
2. ``functional_form``: in-place operators become functional, no-op copies and aliases go,
   operators without a rule become exactly equivalent ones or their decomposition; a write
   into a model input nothing else sees is dropped with a note, other mutations are refused;
3. ``quantize``: PT2E prepare with ``CortexMQuantizer``, calibrate, convert;
4. ``lower``: onto ``cortex_m_nn`` operators (the passes of ``passes.pipeline.PASSES``);
   fallbacks fail the compile unless allowed (``unsupported_message``);
5. ``program_io``: the graph the program serialises — the lowered graph, or with ``--io
   int8`` the same without its boundary quantize/dequantize (``program_io.int8_io``);
6. ``to_program``: the graph in ExecuTorch's execution dialect (``execution_graph`` for a
   fully lowered graph; otherwise ``torch.export``, ``to_edge`` via ``edge.to_edge_program``
   and ``to_executorch``), memory planned, emitted with the ``metadata`` and serialised, and
   the memory plan read back.

Each stage hands the next a new artefact; nothing goes back. The lowered graph is a plain
``GraphModule`` whose ``cortex_m_nn`` operators run their bit-exact references when called,
which is how ``verify`` checks it against the PT2E-quantized model.
"""

from __future__ import annotations

import copy
import time
import warnings
from dataclasses import dataclass, field, replace

import torch
from executorch.exir import ExecutorchBackendConfig
from torch.export.graph_signature import OutputKind, TensorArgument
from torch.fx import GraphModule
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from tqdm import tqdm

import cortex_m_nn.ops  # noqa: F401  (registers the cortex_m_nn operators)
from cortex_m_nn.core.abi import ProgramAbi, Rounding, encode_metadata
from cortex_m_nn.core.errors import CompileError, mark_stage, stage
from cortex_m_nn.core.options import IoType, QuantizationOptions, prepared_for_training
from cortex_m_nn.core.target import Target
from cortex_m_nn.frontend.calibration import Calibration, require_finite
from cortex_m_nn.frontend.functional import NOTES, functional_form
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.frontend.states import has_states
from cortex_m_nn.lower.fallbacks import unsupported_message
from cortex_m_nn.lower.passes import lower
from cortex_m_nn.lower.records import REMOVED, LoweringResult, OpRecord
from cortex_m_nn.plan import paths
from cortex_m_nn.plan.memory_plan import MemoryPlan, analyse, constants
from cortex_m_nn.plan.placement import memory_planning_pass
from cortex_m_nn.plan.schedule import fastest_program, smallest
from cortex_m_nn.quantize import CortexMQuantizer, qat
from cortex_m_nn.quantize.bias_correction import correct_biases
from cortex_m_nn.quantize.equalize import equalize, fold_batch_norms
from cortex_m_nn.quantize.gru import quantize_grus, split_grus
from cortex_m_nn.quantize.recurrent import quantize_lstms, split_lstms
from cortex_m_nn.serialize import execution_graph
from cortex_m_nn.serialize.edge import to_edge_program
from cortex_m_nn.serialize.program_io import ProgramIo, float_io, int8_io
from cortex_m_nn.serialize.pte import (
    METADATA_PREFIX,
    planned_buffer_bytes,
    pte_operators,
    runtime_overhead,
)

__all__ = [
    "METADATA_PREFIX",
    "CompiledProgram",
    "Stages",
    "compile_model",
    "compile_quantized",
    "metadata",
    "planned_buffer_bytes",
    "pte_operators",
]


@dataclass
class Stages:
    """Every intermediate artefact, for tests, ``--verify`` and ``--intermediates``."""

    #: the exported graph in functional form (what PT2E quantized)
    exported: GraphModule | None = None
    quantized: GraphModule | None = None
    lowering: LoweringResult | None = None
    #: the graph the .pte serialises and what its inputs and outputs hold
    io: ProgramIo | None = None
    #: the report's rows: the lowering's, with what ``--io int8`` removed marked so
    records: list[OpRecord] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Serialised:
    """What serialising gives: the ``.pte``, the memory plan of ``forward`` read back from the
    executorch-dialect graph, and the graph's text in the edge and execution dialects."""

    pte: bytes
    memory: MemoryPlan
    edge_text: str
    executorch_text: str


@dataclass
class CompiledProgram:
    """A lowered model; its ``.pte`` (with the memory plan read back from it) is made by
    ``compile_quantized`` or, when that deferred it, on first use."""

    model: ModelSource
    #: the kernel ABI (core, ISA, rounding, operator version) the program was compiled for
    abi: ProgramAbi
    calibration: Calibration
    stages: Stages
    #: how the quantizer calibrated (ranges, float-model preparations)
    options: QuantizationOptions = field(default_factory=QuantizationOptions)
    #: the memory schedule: ``fast`` (each tensor its own bytes while it lives) or ``small``
    #: (outputs may also take their dead inputs' bytes, ``plan.overlap``)
    schedule: str = "fast"
    #: with ``small``: the RAM (arena and method allocator) the program may take; a path that
    #: saves RAM at a cost in instructions is kept only where it is needed to fit in it
    #: (``plan.schedule``). None: the least RAM.
    ram_budget: int | None = None
    _serialised: Serialised | None = field(default=None, repr=False)

    @property
    def serialised(self) -> Serialised:
        """The program serialised (on first use when ``compile_quantized`` deferred it)."""
        if self._serialised is None:
            with _Timer(self.stages.seconds)("serialise"):
                self._serialised = to_program(
                    self.io, self.model, self.abi, self.schedule, self.ram_budget
                )
            paths.name_functions(self.records, self.io.graph, self.abi.target)
        return self._serialised

    @property
    def pte(self) -> bytes:
        """The serialised ExecuTorch program."""
        return self.serialised.pte

    @property
    def target(self) -> Target:
        return self.abi.target

    @property
    def rounding(self) -> Rounding:
        return self.abi.rounding

    @property
    def records(self) -> list[OpRecord]:
        return self.stages.records

    @property
    def notes(self) -> list[str]:
        """What the report says about rewrites of the model before quantization (a write
        into a model input made functional: ``passes.functional``)."""
        exported = self.stages.exported
        return list(exported.meta.get(NOTES, [])) if exported is not None else []

    @property
    def lowered(self) -> GraphModule:
        return self.stages.lowering.graph_module

    @property
    def io(self) -> ProgramIo:
        """What the program's inputs and outputs hold, and the graph it serialises."""
        return self.stages.io

    @property
    def arena_bytes(self) -> int:
        """Bytes of the memory-planned buffers of ``forward`` (activations and scratch)."""
        return planned_buffer_bytes(self.pte)

    @property
    def operators(self) -> list[str]:
        return pte_operators(self.pte)

    @property
    def memory(self) -> MemoryPlan:
        """The memory plan of ``forward``, read back from the serialised program."""
        return self.serialised.memory


def metadata(abi: ProgramAbi, io: ProgramIo | None = None) -> dict[str, str]:
    """The constant method in which the .pte records how it was compiled (kernels built
    differently refuse it) and, for int8 inputs and outputs, their quantization."""
    return encode_metadata({**abi.metadata(), **(io.metadata() if io is not None else {})})


def export(source: ModelSource, batches: bool = False) -> GraphModule:
    """``torch.export`` of the float model; a model it cannot trace is the user's to fix.
    ``batches``: the first dimension of every input any size (training's batches)."""
    inputs, dynamic = source.example_inputs, None
    if batches:
        inputs = tuple(torch.cat([x, x]) for x in inputs)  # a size of 1 would be fixed
        dynamic = tuple({0: torch.export.Dim("batch")} for _ in inputs)
    try:
        with warnings.catch_warnings():  # nn.LSTM's weight list, read as parameters all the same
            warnings.filterwarnings("ignore", "The tensor attributes .* assigned during export")
            program = torch.export.export(source.module, inputs, dynamic_shapes=dynamic)
    except Exception as error:
        hint = "; training takes batches: forward must take any size of every input's dimension 0"
        raise CompileError(
            f"torch.export failed for {source.name}: {type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''}{hint if batches else ''}"
        ) from error
    for index, spec in enumerate(program.graph_signature.output_specs):
        if spec.kind == OutputKind.USER_OUTPUT and not isinstance(spec.arg, TensorArgument):
            raise CompileError(
                f"{source.name} returns {getattr(spec.arg, 'value', spec.arg)!r} as output "
                f"{index}; a compiled model returns tensors only: leave it out of forward's result"
            )
    return program.module()


def quantize(
    source: ModelSource,
    calibration: Calibration,
    progress: bool = True,
    options: QuantizationOptions | None = None,
) -> tuple[GraphModule, GraphModule]:
    """Export, make functional and PT2E-quantize with ``options`` (default: the best
    measured); returns (the float graph in functional form — batch norms folded and
    equalized when the options ask — and the converted quantized graph)."""
    require_finite(calibration)
    options = options or QuantizationOptions()
    if prepared_for_training(source.module):  # trained with fake quantization: its ranges as is
        with stage("convert"):
            qat.check_options(source.module, options)
            reference, converted = qat.convert(source.module, source.example_inputs)
            quantize_lstms(converted, calibration.samples)
            quantize_grus(converted)
            return reference, converted
    with stage("export"):
        exported = export(source)
    with stage("functional form"):
        functional_form(exported)
    with stage("equalize"):
        if options.equalize or options.bias_correction:
            fold_batch_norms(exported)  # both must see the weights PT2E quantizes, BN folded in
        if options.equalize:
            equalize(exported, calibration.samples)
    split_grus(split_lstms(exported))  # a node per LSTM/GRU layer, alike in the float graph
    # the float reference of the report's per-layer SNR: equalizing is exact in float, bias
    # correction is not; prepare_pt2e changes the graph it is given
    float_graph = copy.deepcopy(exported)
    if options.bias_correction:
        with stage("bias correction"):
            correct_biases(exported, calibration.samples, options)
    with stage("calibrate"):
        prepared = prepare_pt2e(exported, CortexMQuantizer(options))
        with torch.no_grad():
            for sample in tqdm(
                calibration.samples, desc="calibrating", unit="sample", disable=not progress
            ):
                prepared(*sample)
        converted = convert_pt2e(prepared)
        quantize_lstms(converted, calibration.samples)  # LSTMs compute as lowered from here
        quantize_grus(converted)  # (and GRUs)
        return float_graph, converted


def trainable(
    source: ModelSource,
    options: QuantizationOptions,
    samples: list[tuple[torch.Tensor, ...]] | None = None,
) -> GraphModule:
    """``source`` prepared for quantization-aware training (``quantize.qat``): exported,
    functional, batch norms folded into their layers (and with ``samples``, equalized as the
    options ask), fake quantizers on every pattern."""
    with stage("export"):
        exported = export(source, batches=True)
    with stage("functional form"):
        functional_form(exported)
    with stage("prepare for training"):
        fold_batch_norms(exported)
        if options.equalize and samples:
            equalize(exported, samples)
        for parameter in exported.parameters():  # the folded, equalized weights train too
            parameter.requires_grad_(parameter.is_floating_point())
        return qat.prepare(split_grus(split_lstms(exported)), options)


def program_io(lowering: LoweringResult, io: IoType) -> tuple[ProgramIo, list[OpRecord]]:
    """The graph the program serialises for ``io``, and the report's rows: with int8 I/O, the
    rows of the boundary operators it leaves to the caller say so (new rows; the lowering's
    stay as they are)."""
    if io is IoType.FLOAT:
        return float_io(lowering.graph_module), list(lowering.records)
    program = int8_io(lowering.graph_module)
    records = []
    for record in lowering.records:
        if record.output_node in program.removed:
            given = record.source_op == "quantize"
            function = f"(--io int8: {'given' if given else 'read'} as int8)"
            record = replace(record, kernel=REMOVED, cmsis_function=function)
        records.append(record)
    return program, records


#: The edge stage's text when a fully lowered graph skipped it.
DIRECT = (
    "(no edge-dialect graph: every operator is lowered, so the lowered graph was written in\n"
    "ExecuTorch's execution dialect directly; see 5-executorch.txt)\n"
)


def to_program(
    io: ProgramIo,
    source: ModelSource,
    abi: ProgramAbi,
    schedule: str = "fast",
    ram_budget: int | None = None,
) -> Serialised:
    """Serialise the program's graph as an ExecuTorch program: a fully lowered graph straight
    from the execution dialect (``execution_graph``, equal constant arguments stored once),
    any other through ``torch.export``, ``to_edge`` and ``to_executorch``. A fully lowered
    graph's calls take our kernels where the cost model expects them faster
    (``plan.paths.fastest``); its ``small`` schedule searches for the program needing the least
    RAM (or fitting ``ram_budget`` with the fewest extra instructions): kernel paths, first
    layers in strips (``plan.schedule``)."""
    if execution_graph.unsupported(io.graph) is not None:  # the paths the graph carries
        serialised = serialise_graph(io.graph, io, source, abi, schedule)
        serialised.memory.paths = paths.summary(io.graph)
        return serialised
    execution_graph.propagate_values(io.graph, io.program_inputs(source.example_inputs))
    paths.reset(io.graph, abi.target)  # another schedule may have planned the same graph
    if schedule != "small":  # our kernels where the cost model expects them faster
        plan = lambda graph: serialise_graph(graph, io, source, abi, schedule)  # noqa: E731
        serialised = fastest_program(io.graph, abi.target, plan)
        serialised.memory.paths = paths.summary(io.graph)
        return serialised
    return smallest(
        io.graph,
        abi.target,
        lambda graph: serialise_graph(graph, io, source, abi, schedule),
        _ram,
        ram_budget,
    )


def _ram(serialised: Serialised) -> int:
    """The arena and what ExecuTorch's method allocator takes for the program."""
    return serialised.memory.arena_bytes + runtime_overhead(serialised.pte).total


def serialise_graph(
    graph: GraphModule, io: ProgramIo, source: ModelSource, abi: ProgramAbi, schedule: str
) -> Serialised:
    """``graph`` (the program's, or one ``plan.patch`` made of it) serialised and its memory
    plan read back and checked."""
    inputs = io.program_inputs(source.example_inputs)
    planning = memory_planning_pass(abi.target.isa, schedule)
    if execution_graph.unsupported(graph) is None:
        program = execution_graph.execution_program(graph, inputs)
        pte = execution_graph.serialise(program, metadata(abi, io), planning)
        edge_text = DIRECT
    else:
        refuse_states(graph)
        edge = to_edge_program(torch.export.export(graph, inputs), metadata(abi, io))
        edge_text = str(edge.exported_program().graph_module.graph)
        executorch = edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=planning))
        program, pte = executorch.exported_program(), executorch.buffer
    # only the small schedule may share bytes as the overlaps' leads allow
    isa = abi.target.isa if schedule == "small" else None
    memory = analyse(program.graph_module, planned_buffer_bytes(pte), isa)
    conflicts = memory.conflicts()
    if conflicts:  # a planner bug, never the user's: do not hand out a program that corrupts
        raise RuntimeError(f"memory plan gives live tensors the same bytes: {conflicts[:3]}")
    memory.planner = planning.memory_planning_algo.chosen or ""
    memory.constants = constants(program)
    return Serialised(pte, memory, edge_text, str(program.graph_module.graph))


def refuse_states(graph: GraphModule) -> None:
    """CompileError when a graph that must be re-traced keeps states: only the direct path
    (``execution_graph``) plans them with their initial value (docs/svdf.md)."""
    if has_states(graph):
        raise CompileError(
            "this model keeps SVDF states, which only a fully lowered program carries, but "
            f"{execution_graph.unsupported(graph)}: lower the rest of the model (no fallback) "
            "or compile the SVDF layers without it"
        )


def compile_model(
    source: ModelSource,
    target: Target | ProgramAbi,
    calibration: Calibration,
    *,
    allow_fallback: bool = False,
    rounding: Rounding = Rounding.DOUBLE,
    progress: bool = True,
    options: QuantizationOptions | None = None,
    serialise: bool = True,
    io: IoType = IoType.FLOAT,
    schedule: str = "fast",
) -> CompiledProgram:
    """Compile ``source`` for ``target``; raises CompileError for anything the user must fix.
    ``serialise``: as for :func:`compile_quantized`; ``io``: what the program's inputs and
    outputs hold (:mod:`cortex_m_nn.serialize.program_io`); ``schedule``: the memory
    schedule (:class:`CompiledProgram`).

    ``target`` is the program's :class:`~cortex_m_nn.core.abi.ProgramAbi` (what the .pte records
    and the references run with), or a Target and ``rounding``, the requantization rounding
    the kernels' CMSIS-NN is built with, to make it from.
    """
    start = time.perf_counter()
    with stage("quantize"):
        quantized = quantize(source, calibration, progress, options)
    seconds = {"quantize": time.perf_counter() - start}
    return compile_quantized(
        source,
        target,
        calibration,
        quantized,
        allow_fallback=allow_fallback,
        rounding=rounding,
        seconds=seconds,
        options=options,
        serialise=serialise,
        io=io,
        schedule=schedule,
    )


def compile_quantized(
    source: ModelSource,
    target: Target | ProgramAbi,
    calibration: Calibration,
    quantized: tuple[GraphModule, GraphModule],
    *,
    allow_fallback: bool = False,
    rounding: Rounding = Rounding.DOUBLE,
    seconds: dict[str, float] | None = None,
    options: QuantizationOptions | None = None,
    serialise: bool = True,
    io: IoType = IoType.FLOAT,
    schedule: str = "fast",
) -> CompiledProgram:
    """Lower and serialise what ``quantize(source, calibration, options=options)`` returned:
    one export and calibration can be lowered for several targets (the graphs are read, never
    changed). ``serialise=False`` defers ``to_edge``/``to_executorch`` (three quarters of a
    small model's compile) to the first use of the ``.pte`` or its memory plan, for callers
    that check only the lowered graph."""
    abi = target if isinstance(target, ProgramAbi) else ProgramAbi.for_target(target, rounding)
    stages = Stages(seconds=dict(seconds or {}))
    stages.exported, stages.quantized = quantized
    timer = _Timer(stages.seconds)
    with timer("lower"):
        stages.lowering = lower(stages.quantized, abi.target)
    fallbacks = stages.lowering.fallbacks
    if fallbacks and not allow_fallback:
        raise CompileError(unsupported_message(fallbacks))
    stages.io, stages.records = program_io(stages.lowering, io)
    compiled = CompiledProgram(
        source, abi, calibration, stages, options or QuantizationOptions(), schedule
    )
    if serialise:
        compiled.pte  # noqa: B018
    return compiled


class _Timer:
    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds = seconds

    def __call__(self, name: str) -> _Timer:
        self.name = name
        return self

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        self.seconds[self.name] = time.perf_counter() - self.start
        if isinstance(error, Exception):
            mark_stage(error, self.name)
