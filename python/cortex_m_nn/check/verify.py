"""Numerics of a lowered graph against the PT2E reference and the float model.

Two differences are measured, in output LSB:

* **per operator** (the criterion, ≤ 1 LSB): each lowered operator runs on the PT2E
  reference's own int8 (int16) inputs and its output is compared with the reference's output.
  This isolates every kernel's arithmetic from rounding differences earlier in the graph.
  A kernel that approximates by design (the int16 softmax's interpolated tables) is allowed
  the bound its rule derives (``OpRecord.allowed_lsb``), reported with it.
* The boundary ``dequantize`` operators are checked the same way (their float outputs must
  equal the reference's dequantized values), so a wrong output layout cannot pass.
* Every calibration sample is also run scaled by two, beyond the range the observers saw, so
  saturation paths are exercised too.
* With int8 inputs and outputs (``--io int8``), the program without its boundary operators
  must give, dequantized, exactly the float program's outputs on every sample.
* **end to end** (reported): the model outputs of the lowered graph and the PT2E graph. A
  1-LSB rounding difference upstream can grow downstream (e.g. through an add whose output
  scale is finer than its inputs'), so this is information, not a pass criterion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch.fx import GraphModule, Interpreter, Node
from torch.utils._pytree import tree_leaves

from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.core.families import DEQUANTIZE
from cortex_m_nn.core.options import IoType
from cortex_m_nn.frontend.states import fresh, reset_states
from cortex_m_nn.lower.graph_values import channels_last_order
from cortex_m_nn.lower.records import LoweringResult
from cortex_m_nn.ops.library import ReferenceInterpreter, run_references

if TYPE_CHECKING:
    from cortex_m_nn.pipeline import CompiledProgram

#: Every lowered operator may differ from the PT2E reference by at most this many LSB.
MAX_LSB = 1


@dataclass
class Verification:
    samples: int
    max_lsb: int
    output_lsb: int
    snr_db: float
    per_node: dict[str, int] = field(default_factory=dict)
    #: samples on which the int8-I/O program, dequantized, differs from the float program
    io_mismatches: int = 0
    #: lowered node → the LSB it is allowed where its rule gives a bound of its own
    allowed: dict[str, int] = field(default_factory=dict)

    @property
    def exceeding(self) -> dict[str, int]:
        """Operators (lowered node names) beyond what they are allowed, with their LSB."""
        return {n: d for n, d in self.per_node.items() if d > self.allowed.get(n, MAX_LSB)}

    @property
    def passed(self) -> bool:
        return not self.exceeding and self.io_mismatches == 0


class _Recorder(Interpreter):
    """Runs the PT2E graph and keeps every node's value."""

    def __init__(self, module: GraphModule) -> None:
        super().__init__(module)
        self.values: dict[str, torch.Tensor] = {}

    def run_node(self, node: Node) -> object:
        result = super().run_node(node)
        self.values[node.name] = result
        return result


class _TeacherForced(ReferenceInterpreter):
    """Runs the lowered graph; after each lowered value, compares it with the reference and
    continues from the reference value, so every operator sees the reference's inputs."""

    def __init__(
        self,
        lowering: LoweringResult,
        rounding: Rounding,
        reference: dict[str, torch.Tensor],
        worst: dict[str, int],
        module: GraphModule | None = None,
    ) -> None:
        super().__init__(module or lowering.graph_module, rounding)
        self.sources, self.floats = lowering.value_sources, lowering.float_sources
        self.reference, self.worst = reference, worst

    def _record(self, node: Node, difference: int) -> None:
        self.worst[node.name] = max(self.worst.get(node.name, 0), difference)

    def run_node(self, node: Node) -> object:
        result = super().run_node(node)
        if node.name in self.floats:
            name, scale = self.floats[node.name]
            expected = self.reference[name]
            if result.shape != expected.shape:
                self._record(node, 2**31)
                return result
            self._record(node, lsb_difference(result, expected, scale))
            return result
        source = self.sources.get(node.name)
        if source is None:
            return result
        name, nhwc = source
        expected = self.reference[name]
        if nhwc:
            expected = expected.permute(channels_last_order(expected.dim()))
        expected = expected.contiguous().view(result.shape)
        difference = int((result.to(torch.int32) - expected.to(torch.int32)).abs().max())
        self._record(node, difference)
        return expected.clone()


def output_scales(quantized: GraphModule) -> list[float | None]:
    """Scale of each graph output of the PT2E model (None where it is not dequantized)."""
    output = next(n for n in quantized.graph.nodes if n.op == "output")
    scales: list[float | None] = []
    for node in tree_leaves(output.args[0]):
        is_dequantize = isinstance(node, Node) and node.target in DEQUANTIZE
        scales.append(float(node.args[1]) if is_dequantize else None)
    return scales


def lsb_difference(lowered: torch.Tensor, reference: torch.Tensor, scale: float | None) -> int:
    """Largest difference in output LSB (exact for dequantized int8 outputs)."""
    if scale is None:  # a float fallback output: measure it in units of its own spread
        scale = float(reference.abs().max()) / 127 or 1.0
    return int(torch.round((lowered.double() - reference.double()).abs().max() / scale).item())


def _force_states(
    forced: GraphModule, reference: GraphModule, sources: dict[str, tuple[str, int, float]]
) -> None:
    """Each state a lowered operator keeps (a streaming GRU's or LSTM's), set to the PT2E
    graph's before the call, quantized: the state is one of the operator's inputs, which
    teacher forcing gives it from the reference (else a stream's differences would carry from
    call to call)."""
    with torch.no_grad():
        for name, (buffer, layer, scale) in sources.items():
            state = reference.get_buffer(buffer)[layer]
            kept = forced.get_buffer(name)
            info = torch.iinfo(kept.dtype)
            kept.copy_((state / scale).round().clamp(info.min, info.max).reshape(kept.shape))


def verify(
    lowering: LoweringResult,
    quantized: GraphModule,
    float_model: torch.nn.Module,
    samples: list[tuple[torch.Tensor, ...]],
    rounding: Rounding = Rounding.DOUBLE,
) -> Verification:
    """Run every sample through the lowered graph (its references with CMSIS-NN's
    ``rounding``), the PT2E reference and the float model. A model with states (SVDF) runs
    the samples as one sequence from zero states in each form (``states``), the graphs' own
    left unchanged."""
    scales = output_scales(quantized)
    forced, end_to_end, quantized = (
        fresh(lowering.graph_module),
        fresh(lowering.graph_module),
        fresh(quantized),
    )
    reset_states(float_model)
    stress = [tuple(x * 2 if x.is_floating_point() else x for x in sample) for sample in samples]
    per_node: dict[str, int] = {}
    output_lsb = 0
    signal = noise = 0.0
    with torch.no_grad():
        for index, sample in enumerate([*samples, *stress]):
            _force_states(forced, quantized, lowering.state_sources)
            recorder = _Recorder(quantized)
            reference = tree_leaves(recorder.run(*sample))
            _TeacherForced(lowering, rounding, recorder.values, per_node, forced).run(*sample)
            if index >= len(samples):  # stress samples: only the per-operator check
                continue
            ours = run_references(end_to_end, sample, rounding)
            # a copy: the float model may write into its inputs (the graphs do not)
            copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in sample]
            floats = tree_leaves(float_model(*copies))
            for mine, ref, scale in zip(ours, reference, scales, strict=True):
                output_lsb = max(output_lsb, lsb_difference(mine, ref, scale))
            for mine, real in zip(ours, floats, strict=True):
                signal += float(real.double().pow(2).sum())
                noise += float((real.double() - mine.double()).pow(2).sum())
    snr = math.inf if noise == 0 else 10 * math.log10(signal / noise) if signal else -math.inf
    worst = max(per_node.values(), default=0)
    allowed = {r.output_node: r.allowed_lsb for r in lowering.records if r.allowed_lsb is not None}
    return Verification(len(samples), worst, output_lsb, snr, per_node, allowed=allowed)


def verify_program(compiled: CompiledProgram) -> Verification:
    """``verify`` a compiled program on its own calibration samples, float model and ABI's
    rounding; for int8 I/O, also its program graph against the lowered graph."""
    samples = compiled.calibration.samples
    verification = verify(
        compiled.stages.lowering,
        compiled.stages.quantized,
        compiled.model.module,
        samples,
        compiled.abi.rounding,
    )
    if compiled.io.type is IoType.INT8:
        verification.io_mismatches = io_mismatches(compiled, samples)
    return verification


def io_mismatches(compiled: CompiledProgram, samples: list[tuple[torch.Tensor, ...]]) -> int:
    """Samples (each also doubled) on which the program graph's outputs, dequantized, differ
    from the lowered graph's: taking the boundary operators out must change nothing."""
    io, rounding = compiled.io, compiled.abi.rounding
    stress = [tuple(x * 2 if x.is_floating_point() else x for x in sample) for sample in samples]
    count = 0
    lowered, graph = fresh(compiled.lowered), fresh(io.graph)
    for sample in [*samples, *stress]:
        floats = run_references(lowered, sample, rounding)
        ints = run_references(graph, io.program_inputs(sample), rounding)
        dequantized = io.float_outputs(ints)
        count += not all(map(torch.equal, floats, dequantized))
    return count
