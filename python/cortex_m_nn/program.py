"""The front door: compile a PyTorch model for a Cortex-M core and hold the program.

    import cortex_m_nn

    program = cortex_m_nn.compile(model, (example,), target="cortex-m33", verify=True)
    program.save("model.pte")
    print(program.report)            # the report the command line prints; .report.data: its JSON
    outputs = program.run(example)   # what the device computes for it, bit for bit

:func:`compile` takes the command line's options one for one (``--calibration-method mse`` is
``calibration_method="mse"``, ``--no-equalize`` is ``equalize=False``): :class:`Options` holds
them with the command line's defaults, and ``cortex-m-compile`` is a thin layer over
:func:`build`, so the two give the same bytes.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cortex_m_nn.core import options as choices
from cortex_m_nn.core.errors import CompileError, stage
from cortex_m_nn.core.options import IoType, QuantizationOptions
from cortex_m_nn.core.outputs import write_all
from cortex_m_nn.core.target import DEFAULT_TARGET, Target

if TYPE_CHECKING:
    import torch

    from cortex_m_nn.check.verify import Verification
    from cortex_m_nn.core.abi import ProgramAbi
    from cortex_m_nn.frontend.calibration import Calibration
    from cortex_m_nn.frontend.model_source import ModelSource
    from cortex_m_nn.pipeline import CompiledProgram
    from cortex_m_nn.plan import fit
    from cortex_m_nn.plan.boards import Board
    from cortex_m_nn.plan.memory_plan import MemoryPlan

_DEFAULT_QUANTIZATION = QuantizationOptions()


@dataclass(frozen=True)
class Options:
    """What to compile for and how: the command line's options (their ``dest`` names), with
    its defaults. ``target`` None: the board's core, else ``cortex-m55``."""

    target: str | None = None
    calibration_method: str = _DEFAULT_QUANTIZATION.ranges.value
    skip_nonfinite_samples: bool = False
    equalize: bool = _DEFAULT_QUANTIZATION.equalize
    bias_correction: bool = _DEFAULT_QUANTIZATION.bias_correction
    linear_weights: str = _DEFAULT_QUANTIZATION.linear_weights.value
    precision: str = "uniform"
    min_snr_db: float | None = None
    activations: str = _DEFAULT_QUANTIZATION.activations.value
    weights: str = _DEFAULT_QUANTIZATION.weights.value
    int4_ranges: str = _DEFAULT_QUANTIZATION.int4_ranges.value
    io: str = IoType.FLOAT.value
    #: fast, small, or auto: small where fast does not fit the RAM budget (fast without one)
    memory: str = "auto"
    verify: bool = False
    allow_fallback: bool = False
    rounding: str = "double"
    board: str | None = None
    flash: str | None = None
    ram: str | None = None

    @classmethod
    def of(cls, values: dict[str, object]) -> Options:
        """Options from ``values`` (name → value); an unknown name is refused naming the known."""
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise CompileError(
                f"unknown option {', '.join(unknown)}; the options are {', '.join(sorted(known))}"
            )
        return cls(**values)  # type: ignore[arg-type]

    def check(self) -> None:
        """Refuse what cannot work (before anything is loaded): an unknown target, board or
        size, a target that is not the board's core, options that exclude each other."""
        budget = self.budget()
        resolve_target(self.target, budget.board if budget else None)
        if self.weights == "auto":
            self._check_weights_auto()
        if self.precision == "auto" and self.min_snr_db is None:
            raise CompileError(
                "--precision auto needs --min-snr-db (the output SNR to reach, in dB)"
            )
        if self.precision == "auto" and self.activations != "int8":
            raise CompileError(
                "--precision auto chooses int8 or int16 per layer: leave --activations at int8"
            )
        if "auto" not in (self.precision, self.weights) and self.min_snr_db is not None:
            raise CompileError(
                "--min-snr-db is the target of --precision auto or --weights auto: add one of them"
            )
        if self.min_snr_db is not None and not math.isfinite(self.min_snr_db):
            raise CompileError(f"--min-snr-db {self.min_snr_db} is not a finite number of dB")

    def _check_weights_auto(self) -> None:
        """``--weights auto``: a target, int8 activations, and not ``--precision auto`` too."""
        if self.min_snr_db is None:
            raise CompileError("--weights auto needs --min-snr-db (the output SNR to reach, in dB)")
        if self.precision == "auto":
            raise CompileError(
                "--weights auto and --precision auto each search for --min-snr-db on their own: "
                "use one (the s4 kernels take int8 activations only)"
            )
        if self.activations != "int8":
            raise CompileError(
                "--weights auto chooses int4 weights per layer with int8 activations (the s4 "
                "kernels'): leave --activations at int8"
            )

    def budget(self) -> fit.Budget | None:
        """The memories ``board``, ``flash`` and ``ram`` give (None: no fit check)."""
        from cortex_m_nn.plan import fit

        return fit.budget(self.board, self.flash, self.ram)

    def quantization(self) -> QuantizationOptions:
        """The quantizer's options (``weights="auto"`` starts its search from int8)."""
        weights = "int8" if self.weights == "auto" else self.weights
        return QuantizationOptions(
            ranges=choices.RangeMethod(self.calibration_method),
            equalize=self.equalize,
            bias_correction=self.bias_correction,
            linear_weights=choices.LinearWeights(self.linear_weights),
            activations=choices.Activations(self.activations),
            weights=choices.Weights(weights),
            int4_ranges=choices.Int4Ranges(self.int4_ranges),
        )


def resolve_target(text: str | None, board: Board | None) -> Target:
    """``--target``, defaulting to the board's core; it must be the board's core."""
    if text is None:
        return Target.for_core(board.core) if board is not None else DEFAULT_TARGET
    target = Target.parse(text)
    if board is not None and target.core is not board.core:
        raise CompileError(
            f"--target {target} does not match --board {board.name}, a {board.core.value}: "
            f"pass --target {board.core.value}[+isa] or leave --target out"
        )
    return target


@dataclass(frozen=True)
class Report:
    """The compile report: ``str(report)`` is the text the command line prints, ``data`` the
    document ``--report-json`` writes."""

    data: dict

    def __str__(self) -> str:
        from cortex_m_nn.report import compile_report as report

        return report.to_text(self.data)

    def json(self) -> str:
        from cortex_m_nn.report import compile_report as report

        return report.to_json(self.data)


@dataclass(frozen=True)
class Program:
    """A compiled program: its ``.pte``, report and memory plan, and its references."""

    compiled: CompiledProgram
    report: Report
    verification: Verification | None = None

    @property
    def pte(self) -> bytes:
        return self.compiled.pte

    @property
    def memory(self) -> MemoryPlan:
        return self.compiled.memory

    @property
    def abi(self) -> ProgramAbi:
        """What the program was compiled for: core, ISA, rounding, operator version."""
        return self.compiled.abi

    def save(self, path: str | Path) -> Path:
        """Write the ``.pte`` to ``path`` (whole, or not at all)."""
        path = Path(path)
        write_all({path: self.pte})
        return path

    def run(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        """The program's outputs for one sample (the model's inputs, as the example inputs
        were given), computed by the lowered program's bit-exact references with the
        program's own rounding: what its kernels compute on the device. Outputs are floats,
        or int8 for a program compiled with ``io="int8"``."""
        from cortex_m_nn.check.vector import reference_outputs

        return reference_outputs(self.compiled, tuple(inputs))

    def require_passed(self) -> Program:
        """This program, or CompileError when ``verify`` found an operator off the PT2E
        reference or the fit check found it too large for its board."""
        from cortex_m_nn.plan import fit

        verification = self.verification
        if verification is not None and not verification.passed:
            name, lsb = next(iter(verification.exceeding.items()), ("", verification.max_lsb))
            allowed = verification.allowed.get(name, self.report.data["verify"]["max_lsb_allowed"])
            raise CompileError(
                f"verification failed: an operator ({name}) differs from the PT2E reference "
                f"by {lsb} LSB (allowed {allowed}); nothing written"
            )
        if self.report.data.get("fit") is not None:
            fit.require_fit(self.report.data["fit"])
        return self


def compile(  # noqa: A001 - the package's verb: cortex_m_nn.compile(model, example_inputs)
    model: torch.nn.Module | str | Path | None,
    example_inputs: Sequence[torch.Tensor] | torch.Tensor | None = None,
    *,
    calibration: str | Path | Sequence[Sequence[torch.Tensor]] | None = None,
    **options: object,
) -> Program:
    """Compile ``model`` (a module with its ``example_inputs``, or what the command line takes:
    a built-in model name, a ``.pt2`` file or ``path/file.py:factory``, None for the default)
    with ``options`` (:class:`Options`). ``calibration``: a ``.pt``/``.npz`` file, or samples
    (each a tuple of the model's inputs); None: a synthetic set. Raises CompileError for
    anything the user must fix, verification and the fit check included."""
    chosen = Options.of(options)
    chosen.check()
    source = model_source(model, example_inputs)
    samples = calibration_samples(source, calibration, chosen.skip_nonfinite_samples)
    return build(source, samples, chosen).require_passed()


def prepare_qat(
    model: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor] | torch.Tensor,
    *,
    calibration: str | Path | Sequence[Sequence[torch.Tensor]] | None = None,
    **options: object,
) -> torch.fx.GraphModule:
    """``model`` prepared for quantization-aware training with the options ``compile`` takes
    (:class:`Options`): exported, batch norms folded into their layers as the lowering folds
    them, and every pattern the quantizer annotates given fake quantizers with the device's
    ranges (``cortex_m_nn.quantize.qat``). Train the returned graph (switch it with torchao's
    ``move_exported_model_to_train`` / ``_to_eval``), then compile it with the same options:
    ``cortex_m_nn.compile(trained, example_inputs, **options)`` converts it with the ranges it
    learned, calibrating nothing again. ``calibration`` (as for ``compile``): with it, the
    float model is equalized as post-training quantization equalizes it (``equalize``, on by
    default) before training starts; without it, training starts from the weights as they are."""
    import torch

    from cortex_m_nn.pipeline import trainable

    chosen = Options.of(options)
    chosen.check()
    if "auto" in (chosen.precision, chosen.weights):
        raise CompileError(
            "prepare_qat takes fixed precisions: choose precision and weights (int8, int16, "
            'int4, or the layers a compile with "auto" reported), not "auto"'
        )
    if not isinstance(model, torch.nn.Module):
        raise CompileError("prepare_qat takes a module (with its example_inputs)")
    source = model_source(model, example_inputs)
    samples = None if calibration is None else calibration_samples(source, calibration).samples
    return trainable(source, chosen.quantization(), samples)


def model_source(
    model: torch.nn.Module | str | Path | None,
    example_inputs: Sequence[torch.Tensor] | torch.Tensor | None,
) -> ModelSource:
    """The model to export: a module and its example inputs, or a model the command line takes."""
    import torch

    from cortex_m_nn.frontend.model_source import ModelSource, load_model

    if isinstance(model, torch.nn.Module):
        if example_inputs is None:
            raise CompileError("a module needs its example_inputs (a tensor or a tuple of them)")
        if isinstance(example_inputs, torch.Tensor):
            example_inputs = (example_inputs,)
        from cortex_m_nn.core.options import prepared_for_training

        if not prepared_for_training(model):  # (a graph prepared for training converts in eval)
            model = model.eval()
        return ModelSource(type(model).__name__, model, tuple(example_inputs))
    if example_inputs is not None:
        raise CompileError("example_inputs go with a module; a named model brings its own")
    return load_model(None if model is None else str(model))


def calibration_samples(
    source: ModelSource,
    calibration: str | Path | Sequence[Sequence[torch.Tensor]] | None,
    skip_nonfinite: bool = False,
) -> Calibration:
    """The samples to calibrate ``source`` on: a file, given samples, or a synthetic set."""
    from cortex_m_nn.frontend import calibration as calibration_files

    if calibration is None:
        return calibration_files.synthetic(source.example_inputs)
    if isinstance(calibration, str | Path):
        return calibration_files.load(Path(calibration), source.example_inputs, skip_nonfinite)
    samples = [tuple(sample) for sample in calibration]
    given = calibration_files.Calibration(samples, f"{len(samples)} samples given", False)
    calibration_files.require_finite(given)
    return given


def build(
    source: ModelSource,
    calibration: Calibration,
    options: Options,
    *,
    progress: bool = False,
    say: Callable[[str], None] | None = None,
) -> Program:
    """Compile, verify (with ``verify``), report and fit-check ``source``; the program is
    returned whatever verification and the fit found (:meth:`Program.require_passed`)."""
    from cortex_m_nn.check.layer_snr import layer_snr
    from cortex_m_nn.check.verify import verify_program
    from cortex_m_nn.core.abi import ProgramAbi, Rounding
    from cortex_m_nn.pipeline import compile_model
    from cortex_m_nn.report import compile_report as report

    budget = options.budget()
    target = resolve_target(options.target, budget.board if budget else None)
    abi = ProgramAbi.for_target(target, Rounding(options.rounding))
    quantization, plan = _searched(options, source, abi, calibration, say)
    compiled = compile_model(
        source,
        abi,
        calibration,
        allow_fallback=options.allow_fallback,
        progress=progress,
        options=quantization,
        io=IoType(options.io),
        schedule="fast" if options.memory == "auto" else options.memory,
    )
    with stage("verify"):
        verification = verify_program(compiled) if options.verify else None
    stages = compiled.stages
    with stage("per-layer SNR"):
        layers = layer_snr(stages.exported, stages.quantized, compiled.calibration.samples)
    fitted = None if budget is None else _fitted(compiled, budget, options)
    if fitted is not None:
        compiled = fitted[0]
    with stage("report"):
        document = report.as_dict(compiled, verification, layers)
        key = "weight_precision" if options.weights == "auto" else "precision"
        document["precision"] = document["weight_precision"] = None
        document[key] = None if plan is None else plan.as_dict()
    if fitted is not None:
        document["fit"], document["memory_schedule"] = fitted[1:]
    return Program(compiled, Report(document), verification)


def _fitted(
    compiled: CompiledProgram, budget: fit.Budget, options: Options
) -> tuple[CompiledProgram, dict, dict]:
    """The program in the first schedule whose RAM fits the budget (``memory="auto"``: fast,
    then small; the schedule given otherwise), its fit report, and the schedules tried."""
    from cortex_m_nn.plan import fit
    from cortex_m_nn.serialize.pte import load_temp_bytes, runtime_overhead

    tried: list[dict] = []
    # (schedule, whether within the budget: auto's small keeps a path costing instructions
    # only where the budget needs it, and is tried again for the least RAM if it misses)
    attempts = [("fast", False), ("small", True)] if options.memory == "auto" else []
    attempts = attempts or [(options.memory, False)]
    for schedule, budgeted in attempts:
        allowed = _ram_budget(budget, compiled.pte) if budgeted else None
        if (schedule, allowed) != (compiled.schedule, compiled.ram_budget):
            compiled = dataclasses.replace(
                compiled, schedule=schedule, ram_budget=allowed, _serialised=None
            )
        stage = compiled.memory.stage or {}
        tried.append(
            {
                "schedule": schedule,
                "arena_bytes": compiled.arena_bytes,
                "lower_bound_bytes": compiled.memory.lower_bound_bytes,
                "kernel_calls": len(compiled.memory.operators),
                "macs_recomputed": stage.get("macs_recomputed", 0),
                "pte_bytes": len(compiled.pte),
            }
        )
        earlier = ", ".join(f"{t['schedule']} {t['arena_bytes']:,} B" for t in tried[:-1])
        found = fit.check(
            budget,
            len(compiled.pte),
            len(set(compiled.operators)),
            compiled.arena_bytes,
            # the method allocator and the load-time temporary allocator, both static
            runtime_overhead(compiled.pte).total + load_temp_bytes(compiled.pte),
            note=f"the smallest arena found is --memory {schedule}'s ({earlier})"
            if earlier
            else "",
        )
        fits = found["ram"] is None or found["ram"]["fits"]
        if fits:
            break
        if budgeted:
            attempts.append((schedule, False))
    why = (
        f"{schedule}: the first schedule whose arena fits {budget.where}'s RAM"
        if fits
        else f"{schedule}: the smallest arena found; none fits {budget.where}'s RAM"
    )
    return compiled, found, {"chosen": schedule, "tried": tried, "why": why}


def _ram_budget(budget: fit.Budget, pte: bytes) -> int | None:
    """The RAM a small schedule may take (arena and method allocator): the budget's less the
    load-time allocator of ``pte`` (the schedule tried before: about the same)."""
    from cortex_m_nn.serialize.pte import load_temp_bytes

    return None if budget.ram is None else budget.ram.size - load_temp_bytes(pte)


def _searched(
    options: Options,
    source: ModelSource,
    abi: ProgramAbi,
    calibration: Calibration,
    say: Callable[[str], None] | None,
) -> tuple[QuantizationOptions, object | None]:
    """The quantizer's options; with ``precision="auto"`` the int16 layers the search chooses
    (``weights="auto"``: the int4 layers), and its plan for the report."""
    quantization = options.quantization()
    if options.weights == "auto":
        from cortex_m_nn.search import weights as weight_precision

        with stage("weight precision per layer"):
            return weight_precision.choose(
                source, abi, calibration, quantization, options.min_snr_db, say
            )
    if options.precision != "auto":
        return quantization, None
    from cortex_m_nn.search.activations import choose

    with stage("precision per layer"):
        return choose(source, abi, calibration, quantization, options.min_snr_db, say)


def stderr_messages(quiet: bool) -> Callable[[str], None] | None:
    """The searches' progress lines: to standard error unless ``quiet``."""
    return None if quiet else lambda message: print(message, file=sys.stderr)
