"""``--precision auto --min-snr-db X``: int8 or int16 activations per layer, measured.

The criterion is the model's output SNR against the float model of the lowered program (its
bit-exact references: what the device computes) on calibration samples its ranges were not
fitted to: the search calibrates every program it measures on the even-numbered calibration
samples and measures on the odd-numbered ones (with fewer than 4 samples, on all of them), so
a layer is not chosen for a gain that only the fitted samples show. The program itself is
then calibrated on all the samples. The search:

1. compile all int8; if that reaches X, every layer stays int8;
2. compile every op that has an int16 case in int16 (``--activations int16``); if that does
   not reach X, no choice does: refused with both numbers;
3. measure each such layer's sensitivity: the SNR with that layer alone in int16;
4. add layers in order of measured gain per byte of their activations (what int16 doubles in
   the arena), recompiling after each, until the SNR reaches X;
5. take back any chosen layer (least gain per byte first) the target holds without;
6. measure the candidates' full set too (every layer in int16), and keep, of every program
   measured that reaches X, the one of smallest planned arena (then fewest int16 layers: the
   s16 kernels take about twice the instructions).

Greedy, so the smallest arena over all layer sets is not guaranteed, but the program kept
has the smallest arena of those measured, never more than all int16's, and every number it
decides on is measured on the program itself, not estimated.
``QuantizationOptions.int16_layers`` records the choice; the report lists each layer with its
precision, its measured gain and why.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
from torch.fx import GraphModule

from cortex_m_nn.core.abi import KernelAbi
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.options import Activations, QuantizationOptions
from cortex_m_nn.frontend.calibration import Calibration
from cortex_m_nn.frontend.model_source import ModelSource


@dataclass
class LayerChoice:
    """One layer with an int16 case: what the search measured and chose."""

    name: str
    op: str
    #: bytes of its input and output activations (what int16 doubles)
    activation_bytes: int
    #: SNR gain (dB) with this layer alone in int16
    gain_db: float = 0.0
    int16: bool = False
    why: str = ""


@dataclass
class PrecisionPlan:
    """The search's outcome, for the report."""

    min_snr_db: float
    int8_snr_db: float
    int16_snr_db: float
    snr_db: float
    layers: list[LayerChoice] = field(default_factory=list)
    compiles: int = 0
    #: the chosen program's planned arena as the search compiled it (fitted on half the
    #: samples: the final program's may differ by a few bytes of scratch)
    arena_bytes: int = 0
    #: every program the search measured: (its int16 layers, SNR dB, planned arena bytes)
    measured: list[tuple[tuple[str, ...], float, int]] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "min_snr_db": self.min_snr_db,
            "snr_db": self.snr_db,
            "int8_snr_db": self.int8_snr_db,
            "int16_snr_db": self.int16_snr_db,
            "compiles": self.compiles,
            "arena_bytes": self.arena_bytes,
            "layers": [
                {
                    "name": c.name,
                    "op": c.op,
                    "precision": "int16" if c.int16 else "int8",
                    "gain_db_alone": c.gain_db,
                    "activation_bytes": c.activation_bytes,
                    "why": c.why,
                }
                for c in self.layers
            ],
        }


def output_snr(lowered: GraphModule, abi: KernelAbi, module: torch.nn.Module, samples) -> float:
    """SNR (dB) of the lowered graph's outputs (its references, the ABI's rounding) against
    the float model's, over ``samples``."""
    from torch.utils._pytree import tree_leaves

    from cortex_m_nn.frontend.states import fresh, reset_states
    from cortex_m_nn.ops.library import run_references

    signal = noise = 0.0
    lowered = fresh(lowered)  # a model with states (SVDF): the samples as one sequence
    reset_states(module)
    with torch.no_grad():
        for sample in samples:
            ours = run_references(lowered, sample, abi.rounding)
            floats = tree_leaves(module(*[x.clone() for x in sample]))
            for mine, real in zip(ours, floats, strict=True):
                signal += float(real.double().pow(2).sum())
                noise += float((real.double() - mine.double()).pow(2).sum())
    if noise == 0:
        return math.inf
    return 10 * math.log10(signal / noise) if signal else -math.inf


def split(calibration: Calibration) -> tuple[Calibration, list]:
    """(the calibration the search fits ranges on, the samples it measures on): even- and
    odd-numbered samples; all of them for both below 4 samples."""
    samples = calibration.samples
    if len(samples) < 4:
        return calibration, samples
    return replace(calibration, samples=samples[0::2]), samples[1::2]


class LayerSearch:
    """Compiles (quantize and lower, no serialisation) and measures layer sets: the options
    ``options_for`` gives a set, the SNR of its program and the ``size`` the search minimises
    (``--precision auto``: the planned arena; ``--weights auto``: the weight bytes)."""

    def __init__(
        self,
        source: ModelSource,
        abi: KernelAbi,
        calibration: Calibration,
        options_for: Callable[[frozenset[str]], QuantizationOptions],
        size: Callable[[object], int],
    ) -> None:
        self.source, self.abi, self.options_for, self.size = source, abi, options_for, size
        self.fit, self.samples = split(calibration)
        self.compiles = 0
        self.measured: dict[frozenset[str], float] = {}
        self.sizes: dict[frozenset[str], int] = {}

    def compile(self, options: QuantizationOptions):
        from cortex_m_nn.pipeline import compile_model

        self.compiles += 1
        return compile_model(
            self.source, self.abi, self.fit, progress=False, options=options, serialise=False
        )

    def measure(self, program) -> float:
        return output_snr(program.lowered, self.abi, self.source.module, self.samples)

    def snr(self, layers: frozenset[str]) -> float:
        if layers not in self.measured:
            program = self.compile(self.options_for(layers))
            self.measured[layers] = self.measure(program)
            self.sizes[layers] = self.size(program)
        return self.measured[layers]

    def smallest(self, min_snr_db: float) -> frozenset[str]:
        """Of the layer sets measured that reach ``min_snr_db``: the smallest size, then the
        fewest layers, then by name (deterministic)."""
        meeting = [s for s, snr in self.measured.items() if snr >= min_snr_db]
        return min(meeting, key=lambda s: (self.sizes[s], len(s), sorted(s)))

    def greedy(
        self,
        ranked: list[str],
        program: Callable[[frozenset[str]], frozenset[str]],
        min_snr_db: float,
    ) -> frozenset[str]:
        """The layers to change from the base program, ``program(changed)`` its layer set:
        changed in ``ranked`` order (most gain per byte first) until the SNR reaches
        ``min_snr_db``, then each change the target holds without taken back (least first)."""
        changed: set[str] = set()
        for name in ranked:
            if self.snr(program(frozenset(changed))) >= min_snr_db:
                break
            changed.add(name)
        for name in reversed(ranked):
            if name in changed and self.snr(program(frozenset(changed - {name}))) >= min_snr_db:
                changed.discard(name)
        return frozenset(changed)

    def table(self) -> list[tuple[tuple[str, ...], float, int]]:
        """Every layer set measured: (its layers, SNR dB, size)."""
        return [(tuple(sorted(s)), snr, self.sizes[s]) for s, snr in self.measured.items()]


def _candidates(program) -> list[LayerChoice]:
    """The layers an all-int16 compile computes in int16 by their own choice (convolutions,
    linear layers, softmax, element-wise ops; pools and views follow their inputs)."""
    exported = program.stages.exported
    nodes = {n.name: n for n in exported.graph.nodes}
    found = []
    for record in program.records:
        function = record.cmsis_function or ""
        node = nodes.get(record.name)
        if "_s16" not in function or node is None or not _computes(node):
            continue
        found.append(LayerChoice(record.name, record.source_op, _activation_bytes(node)))
    return found


def _computes(node: torch.fx.Node) -> bool:
    from cortex_m_nn.core.precision import SHARING_INT16

    return node.op == "call_function" and node.target not in SHARING_INT16


def _activation_bytes(node: torch.fx.Node) -> int:
    """Elements of the node's tensor inputs and output (one more byte each in int16)."""
    total = 0
    values = [node.meta.get("val")]
    values += [a.meta.get("val") for a in node.args if isinstance(a, torch.fx.Node)]
    for value in values:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            total += int(value.numel())  # a SymInt where the export kept a dim symbolic
    return total


def choose(
    source: ModelSource,
    abi: KernelAbi,
    calibration: Calibration,
    options: QuantizationOptions,
    min_snr_db: float,
    progress: Callable[[str], None] | None = None,
) -> tuple[QuantizationOptions, PrecisionPlan]:
    """The int16 layers (``options.int16_layers``) that reach ``min_snr_db`` (see the module
    docstring); CompileError when even all int16 does not."""
    say = progress or (lambda message: None)
    base = replace(options, activations=Activations.INT8, int16_layers=())
    search = LayerSearch(
        source,
        abi,
        calibration,
        lambda layers: replace(base, int16_layers=tuple(sorted(layers))),
        lambda program: program.arena_bytes,
    )
    int8 = search.snr(frozenset())
    everywhere = search.compile(replace(base, activations=Activations.INT16))
    int16 = search.measure(everywhere)
    layers = _candidates(everywhere)
    plan = PrecisionPlan(min_snr_db, int8, int16, int8, layers)
    say(f"precision: int8 {int8:.1f} dB, int16 {int16:.1f} dB, target {min_snr_db:.1f} dB")
    if int8 >= min_snr_db:
        for layer in layers:
            layer.why = "int8 reaches the target"
        return _done(base, plan, search, frozenset())
    if int16 < min_snr_db:
        raise CompileError(
            f"--min-snr-db {min_snr_db:g} cannot be reached: every layer in int16 gives "
            f"{int16:.1f} dB against the float model on calibration samples its ranges were "
            f"not fitted to (int8: {int8:.1f} dB); lower the target or use --activations int16"
        )
    for layer in layers:
        layer.gain_db = search.snr(frozenset({layer.name})) - int8
    ranked = sorted(layers, key=lambda c: (-c.gain_db / max(c.activation_bytes, 1), c.name))
    greedy = search.greedy([layer.name for layer in ranked], lambda chosen: chosen, min_snr_db)
    search.snr(frozenset(layer.name for layer in layers))
    best = search.smallest(min_snr_db)
    for layer in layers:
        layer.int16 = layer.name in best
        if best != greedy:
            layer.why = f"{'int16' if layer.int16 else 'int8'} in the smallest arena reaching it"
        elif layer.int16:
            layer.why = "the target fails without it"
        else:
            layer.why = "the target holds without it"
    return _done(base, plan, search, best)


def _done(
    base: QuantizationOptions, plan: PrecisionPlan, search: LayerSearch, chosen: frozenset[str]
) -> tuple[QuantizationOptions, PrecisionPlan]:
    plan.snr_db = search.snr(chosen)
    plan.arena_bytes = search.sizes[chosen]
    plan.measured = search.table()
    plan.compiles = search.compiles
    return replace(base, int16_layers=tuple(sorted(chosen))), plan
