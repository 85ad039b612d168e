"""``--precision auto --min-snr-db X``: int8 or int16 activations per layer, measured.

The criterion and the samples are the searches' (``search.layers``): the model's output SNR
against the float model of the lowered program, on calibration samples its ranges were not
fitted to. The program itself is then calibrated on all the samples. The search:

1. compile all int8; if that reaches X, every layer stays int8;
2. compile every op that has an int16 case in int16 (``--activations int16``); its layers
   that compute in int16 themselves (report rows of case s16, views and pools that follow
   their input left out) are the candidates; if that does not reach X, no choice does:
   refused with both numbers;
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

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

import torch

from cortex_m_nn.core.abi import ProgramAbi
from cortex_m_nn.core.cmsis_nn import Case
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.options import Activations, QuantizationOptions
from cortex_m_nn.frontend.calibration import Calibration
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.search.layers import Choice, LayerSearch, SearchPlan, explain


@dataclass
class LayerChoice(Choice):
    """One layer with an int16 case: what the search measured and chose."""

    PRECISIONS: ClassVar[tuple[str, str]] = ("int16", "int8")
    MEASURED: ClassVar[dict[str, str]] = {
        "gain_db_alone": "gain_db",
        "activation_bytes": "activation_bytes",
    }

    #: bytes of its input and output activations (what int16 doubles)
    activation_bytes: int = 0
    #: SNR gain (dB) with this layer alone in int16
    gain_db: float = 0.0

    int16 = property(lambda self: self.chosen)


@dataclass
class PrecisionPlan(SearchPlan):
    """The search's outcome, for the report; its size is the planned arena (fitted on half the
    samples: the final program's may differ by a few bytes of scratch)."""

    NUMBERS: ClassVar[tuple[str, ...]] = ("int8_snr_db", "int16_snr_db", "compiles", "arena_bytes")

    int8_snr_db: float = 0.0
    int16_snr_db: float = 0.0

    arena_bytes = property(lambda self: self.size)


def _candidates(program) -> list[LayerChoice]:
    """The layers an all-int16 compile computes in int16 by their own choice (convolutions,
    linear layers, softmax, element-wise ops; pools and views follow their inputs)."""
    exported = program.stages.exported
    nodes = {n.name: n for n in exported.graph.nodes}
    found = []
    for record in program.records:
        node = nodes.get(record.name)
        if record.case is not Case.S16 or node is None or not _computes(node):
            continue
        choice = LayerChoice(record.name, record.source_op)
        choice.activation_bytes = _activation_bytes(node)
        found.append(choice)
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
    abi: ProgramAbi,
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
    plan = PrecisionPlan(min_snr_db, layers=layers, int8_snr_db=int8, int16_snr_db=int16)
    say(f"precision: int8 {int8:.1f} dB, int16 {int16:.1f} dB, target {min_snr_db:.1f} dB")
    if int8 >= min_snr_db:
        for layer in layers:
            layer.why = "int8 reaches the target"
        return search.finish(plan, base, "int16_layers", frozenset()), plan
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
    explain(
        layers,
        best,
        greedy,
        "smallest arena",
        "the target fails without it",
        "the target holds without it",
    )
    return search.finish(plan, base, "int16_layers", best), plan
