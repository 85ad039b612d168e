"""``--weights auto --min-snr-db X``: int4 or int8 weights per layer, measured.

The criterion, the samples and the machinery are the searches' (``search.layers``): the
model's output SNR against the float model of the lowered program, on calibration samples its
ranges were not fitted to. What it minimises is the flash: the weight bytes the report counts
(weights, biases, multipliers and shifts). The search:

1. compile ``--weights int4``; its layers of case s4 are the candidates; compile and measure
   them all in int4 (``int4_layers``), and all in int8; if all int4 reaches X, keep it;
2. if all int8 does not reach X, no choice does: refused with both numbers;
3. measure each candidate's sensitivity: the SNR with that layer alone back in int8 (its
   loss: what that regains) and the weight bytes that costs (its saving);
4. revert layers to int8 in order of loss per byte saved, recompiling after each, until
   the SNR reaches X;
5. take back any reverted layer (least loss per byte first) the target holds with in int4;
6. keep, of every program measured that reaches X (all int8 among them), the one with the
   fewest weight bytes (then the fewest int4 layers).

Greedy, so the fewest bytes over all layer sets is not guaranteed, but every number it decides
on is measured on the program itself. ``QuantizationOptions.int4_layers`` records the choice;
the report lists each candidate with its weight precision, its measured loss and saving, and
why. Activations stay int8 (the s4 kernels take int8 activations): ``--weights auto`` does not
combine with ``--precision auto`` or ``--activations int16``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

from cortex_m_nn.core.abi import ProgramAbi
from cortex_m_nn.core.cmsis_nn import Case
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.options import Activations, QuantizationOptions, Weights
from cortex_m_nn.frontend.calibration import Calibration
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.search.layers import Choice, LayerSearch, SearchPlan, explain


@dataclass
class WeightChoice(Choice):
    """One layer with an int4 case: what the search measured and chose."""

    PRECISIONS: ClassVar[tuple[str, str]] = ("int4", "int8")
    MEASURED: ClassVar[dict[str, str]] = {"loss_db_alone": "loss_db", "saved_bytes": "saved_bytes"}

    #: SNR (dB) regained with this layer alone back in int8 (the others int4)
    loss_db: float = 0.0
    #: weight bytes its int4 weights save (measured: that program's minus all int4's)
    saved_bytes: int = 0

    int4 = property(lambda self: self.chosen)


@dataclass
class WeightPlan(SearchPlan):
    """The search's outcome, for the report; its size is the weight bytes."""

    NUMBERS: ClassVar[tuple[str, ...]] = (
        "weight_bytes",
        "int8_snr_db",
        "int4_snr_db",
        "int8_weight_bytes",
        "int4_weight_bytes",
        "compiles",
    )

    int8_snr_db: float = 0.0
    int4_snr_db: float = 0.0
    int8_weight_bytes: int = 0
    int4_weight_bytes: int = 0

    weight_bytes = property(lambda self: self.size)


def weight_bytes(program) -> int:
    """The weight bytes the report counts: weights, biases, multipliers and shifts."""
    return sum(r.weight_bytes for r in program.records)


def _candidates(program) -> list[WeightChoice]:
    """The layers an all-int4 compile runs in CMSIS-NN's int4-weight case."""
    return [WeightChoice(r.name, r.source_op) for r in program.records if r.case is Case.S4]


def choose(
    source: ModelSource,
    abi: ProgramAbi,
    calibration: Calibration,
    options: QuantizationOptions,
    min_snr_db: float,
    progress: Callable[[str], None] | None = None,
) -> tuple[QuantizationOptions, WeightPlan]:
    """The int4 layers (``options.int4_layers``) of fewest weight bytes that reach
    ``min_snr_db`` (see the module docstring); CompileError when even all int8 does not."""
    if options.activations is not Activations.INT8 or options.int16_layers:
        raise CompileError(
            "--weights auto chooses int4 per layer with int8 activations (the s4 kernels'): "
            "leave --activations at int8 and --precision at uniform"
        )
    base = replace(options, weights=Weights.INT8, int4_layers=())
    search = LayerSearch(
        source,
        abi,
        calibration,
        lambda layers: replace(base, int4_layers=tuple(sorted(layers))),
        weight_bytes,
    )
    layers = _candidates(search.compile(replace(base, weights=Weights.INT4)))
    full = frozenset(layer.name for layer in layers)
    int8, int4 = search.snr(frozenset()), search.snr(full)
    plan = WeightPlan(
        min_snr_db,
        layers=layers,
        int8_snr_db=int8,
        int4_snr_db=int4,
        int8_weight_bytes=search.sizes[frozenset()],
        int4_weight_bytes=search.sizes[full],
    )
    say = progress or (lambda message: None)
    say(
        f"weights: int8 {int8:.1f} dB {plan.int8_weight_bytes:,} B, int4 {int4:.1f} dB "
        f"{plan.int4_weight_bytes:,} B, target {min_snr_db:.1f} dB"
    )
    if int4 >= min_snr_db:
        for layer in layers:
            layer.chosen, layer.why = True, "all int4 reaches the target"
        return search.finish(plan, base, "int4_layers", full), plan
    if int8 < min_snr_db:
        raise CompileError(
            f"--min-snr-db {min_snr_db:g} cannot be reached with --weights auto: every layer's "
            f"weights in int8 give {int8:.1f} dB against the float model on calibration "
            f"samples their ranges were not fitted to (all int4: {int4:.1f} dB); lower the "
            "target or use --weights int8 with --precision auto"
        )
    chosen = _greedy(search, layers, full, min_snr_db)
    return search.finish(plan, base, "int4_layers", chosen), plan


def _greedy(
    search: LayerSearch, layers: list[WeightChoice], full: frozenset[str], min_snr_db: float
) -> frozenset[str]:
    """Steps 3 to 6: sensitivities, reverts by loss per byte, take-backs, the fewest bytes."""
    for layer in layers:
        alone = full - {layer.name}
        layer.loss_db = search.snr(alone) - search.snr(full)
        layer.saved_bytes = search.sizes[alone] - search.sizes[full]
    ranked = sorted(layers, key=lambda c: (-c.loss_db / max(c.saved_bytes, 1), c.name))
    names = [layer.name for layer in ranked]
    greedy = full - search.greedy(names, lambda reverted: full - reverted, min_snr_db)
    best = search.smallest(min_snr_db)
    explain(
        layers,
        best,
        greedy,
        "fewest bytes",
        "the target holds with it in int4",
        "in int4 the target failed (measured)",
    )
    return best
