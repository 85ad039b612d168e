"""``--weights auto --min-snr-db X``: int4 or int8 weights per layer, measured.

The criterion and the samples are those of ``--precision auto`` (``mixed_precision``): the
model's output SNR against the float model of the lowered program, every program the search
measures calibrated on the even-numbered calibration samples and measured on the odd-numbered
ones, with the same search machinery (``mixed_precision.LayerSearch``). What it minimises is
the flash: the weight bytes the report counts (weights, biases, multipliers and shifts). The
search:

1. compile ``--weights int4``; its ``_s4`` layers are the candidates; compile and measure
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
from dataclasses import dataclass, field, replace

from cortex_m_nn.core.abi import KernelAbi
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.options import Activations, QuantizationOptions, Weights
from cortex_m_nn.frontend.calibration import Calibration
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.search.activations import LayerSearch


@dataclass
class WeightChoice:
    """One layer with an int4 case: what the search measured and chose."""

    name: str
    op: str
    #: SNR (dB) regained with this layer alone back in int8 (the others int4)
    loss_db: float = 0.0
    #: weight bytes its int4 weights save (measured: that program's minus all int4's)
    saved_bytes: int = 0
    int4: bool = False
    why: str = ""


@dataclass
class WeightPlan:
    """The search's outcome, for the report."""

    min_snr_db: float
    int8_snr_db: float
    int4_snr_db: float
    int8_weight_bytes: int
    int4_weight_bytes: int
    snr_db: float = 0.0
    weight_bytes: int = 0
    layers: list[WeightChoice] = field(default_factory=list)
    compiles: int = 0
    #: every program the search measured: (its int4 layers, SNR dB, weight bytes)
    measured: list[tuple[tuple[str, ...], float, int]] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "min_snr_db": self.min_snr_db,
            "snr_db": self.snr_db,
            "weight_bytes": self.weight_bytes,
            "int8_snr_db": self.int8_snr_db,
            "int4_snr_db": self.int4_snr_db,
            "int8_weight_bytes": self.int8_weight_bytes,
            "int4_weight_bytes": self.int4_weight_bytes,
            "compiles": self.compiles,
            "layers": [
                {
                    "name": c.name,
                    "op": c.op,
                    "precision": "int4" if c.int4 else "int8",
                    "loss_db_alone": c.loss_db,
                    "saved_bytes": c.saved_bytes,
                    "why": c.why,
                }
                for c in self.layers
            ],
        }


def weight_bytes(program) -> int:
    """The weight bytes the report counts: weights, biases, multipliers and shifts."""
    return sum(r.weight_bytes for r in program.records)


def _candidates(program) -> list[WeightChoice]:
    """The layers an all-int4 compile runs on an ``_s4`` kernel."""
    return [
        WeightChoice(r.name, r.source_op)
        for r in program.records
        if "_s4" in (r.cmsis_function or "")
    ]


def choose(
    source: ModelSource,
    abi: KernelAbi,
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
    plan = WeightPlan(min_snr_db, int8, int4, search.sizes[frozenset()], search.sizes[full])
    plan.layers = layers
    say = progress or (lambda message: None)
    say(
        f"weights: int8 {int8:.1f} dB {plan.int8_weight_bytes:,} B, int4 {int4:.1f} dB "
        f"{plan.int4_weight_bytes:,} B, target {min_snr_db:.1f} dB"
    )
    if int4 >= min_snr_db:
        for layer in layers:
            layer.int4, layer.why = True, "all int4 reaches the target"
        return _done(base, plan, search, full)
    if int8 < min_snr_db:
        raise CompileError(
            f"--min-snr-db {min_snr_db:g} cannot be reached with --weights auto: every layer's "
            f"weights in int8 give {int8:.1f} dB against the float model on calibration "
            f"samples their ranges were not fitted to (all int4: {int4:.1f} dB); lower the "
            "target or use --weights int8 with --precision auto"
        )
    return _done(base, plan, search, _greedy(search, layers, full, min_snr_db))


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
    for layer in layers:
        layer.int4 = layer.name in best
        if best != greedy:
            layer.why = f"{'int4' if layer.int4 else 'int8'} in the fewest bytes reaching it"
        elif layer.int4:
            layer.why = "the target holds with it in int4"
        else:
            layer.why = "in int4 the target failed (measured)"
    return best


def _done(
    base: QuantizationOptions, plan: WeightPlan, search: LayerSearch, chosen: frozenset[str]
) -> tuple[QuantizationOptions, WeightPlan]:
    plan.snr_db = search.snr(chosen)
    plan.weight_bytes = search.sizes[chosen]
    plan.measured = search.table()
    plan.compiles = search.compiles
    return replace(base, int4_layers=tuple(sorted(chosen))), plan
