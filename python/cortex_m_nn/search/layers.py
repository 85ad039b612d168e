"""The search both per-layer precision choices run (``activations``: int16 activations per
layer, ``weights``: int4 weights per layer): compile a layer set, measure its program, choose.

The criterion is the model's output SNR against the float model of the lowered program (its
bit-exact references: what the device computes) on calibration samples its ranges were not
fitted to: every program the search measures is calibrated on the even-numbered calibration
samples and measured on the odd-numbered ones (with fewer than 4 samples, on all of them), so
a layer is not chosen for a gain that only the fitted samples show. A choice reads each
layer's dtype case from its report row (``OpRecord.case``), never from a function's name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import ClassVar

import torch
from torch.fx import GraphModule

from cortex_m_nn.core.abi import ProgramAbi
from cortex_m_nn.core.options import QuantizationOptions
from cortex_m_nn.frontend.calibration import Calibration
from cortex_m_nn.frontend.model_source import ModelSource

#: Every program a search measured: (its layers, SNR dB, the size it minimises).
Measured = list[tuple[tuple[str, ...], float, int]]


@dataclass
class Choice:
    """One candidate layer: whether the search gave it the precision it searches, and why."""

    #: (the precision searched, the other) as the report names them
    PRECISIONS: ClassVar[tuple[str, str]] = ("", "")
    #: the report's key → the attribute holding what the search measured of this layer
    MEASURED: ClassVar[dict[str, str]] = {}

    name: str
    op: str
    chosen: bool = False
    why: str = ""

    def row(self) -> dict[str, object]:
        precision = self.PRECISIONS[0] if self.chosen else self.PRECISIONS[1]
        measured = {key: getattr(self, name) for key, name in self.MEASURED.items()}
        return {
            "name": self.name,
            "op": self.op,
            "precision": precision,
            **measured,
            "why": self.why,
        }


@dataclass
class SearchPlan:
    """A search's outcome, for the report: the target, what the chosen program reaches, its
    size, and every program measured."""

    #: the search's own numbers (attributes), in the report's order
    NUMBERS: ClassVar[tuple[str, ...]] = ()

    min_snr_db: float
    snr_db: float = 0.0
    #: the chosen program's size as the search compiled it (fitted on half the samples)
    size: int = 0
    compiles: int = 0
    layers: list = field(default_factory=list)
    measured: Measured = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        numbers = {name: getattr(self, name) for name in self.NUMBERS}
        layers = [layer.row() for layer in self.layers]
        return {"min_snr_db": self.min_snr_db, "snr_db": self.snr_db, **numbers, "layers": layers}


def output_snr(lowered: GraphModule, abi: ProgramAbi, module: torch.nn.Module, samples) -> float:
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
        abi: ProgramAbi,
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

    def finish(
        self, plan: SearchPlan, base: QuantizationOptions, field_name: str, chosen: frozenset[str]
    ) -> QuantizationOptions:
        """``plan`` completed with the chosen set's numbers; the options that compile it
        (``base`` with ``field_name``, e.g. ``int16_layers``, the chosen layers)."""
        plan.snr_db = self.snr(chosen)
        plan.size = self.sizes[chosen]
        plan.measured = self.table()
        plan.compiles = self.compiles
        return replace(base, **{field_name: tuple(sorted(chosen))})


def explain(
    layers: list[Choice],
    best: frozenset[str],
    greedy: frozenset[str],
    smallest: str,
    kept: str,
    left: str,
) -> None:
    """Mark each layer chosen or not, with why: ``smallest`` (what the kept program has the
    least of) when the smallest program measured is not the greedy one, else ``kept`` or
    ``left``, what the greedy steps measured."""
    for layer in layers:
        layer.chosen = layer.name in best
        if best != greedy:
            precision = layer.PRECISIONS[0] if layer.chosen else layer.PRECISIONS[1]
            layer.why = f"{precision} in the {smallest} reaching it"
        else:
            layer.why = kept if layer.chosen else left
