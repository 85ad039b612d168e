"""Command line shared by the ``cortex-m-compile`` console script and ``west cortex-m-compile``.

``cortex-m-compile MODEL …`` compiles; ``cortex-m-compile inspect app.elf …`` reports on a
built firmware image; ``cortex-m-compile embed model.pte …`` writes what a firmware build needs
to embed a ``.pte`` (a model file literally named ``inspect`` or ``embed`` is given as
``./inspect``, ``./embed``).
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from cortex_m_nn.command import add_debug_argument, guarded, write_all
from cortex_m_nn.errors import CompileError, stage
from cortex_m_nn.model_spec import require_model_file
from cortex_m_nn.options import (
    Activations,
    Int4Ranges,
    IoType,
    LinearWeights,
    QuantizationOptions,
    RangeMethod,
    Weights,
)
from cortex_m_nn.subcommands import SUBCOMMANDS
from cortex_m_nn.target import DEFAULT_TARGET, Target

if TYPE_CHECKING:
    from cortex_m_nn import fit
    from cortex_m_nn.abi import KernelAbi
    from cortex_m_nn.boards import Board
    from cortex_m_nn.calibration import Calibration
    from cortex_m_nn.compile import CompiledProgram
    from cortex_m_nn.mixed_precision import PrecisionPlan
    from cortex_m_nn.model_source import ModelSource
    from cortex_m_nn.weight_precision import WeightPlan

DESCRIPTION = (
    "Compile a PyTorch model into an ExecuTorch program (.pte) whose operators are "
    "CMSIS-NN kernels for an Arm Cortex-M core."
)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the compiler's options to ``parser`` (the west command and the script share them)."""
    _add_model_arguments(parser)
    _add_quantizer_arguments(parser)
    _add_precision_arguments(parser)
    _add_output_arguments(parser)
    _add_fit_arguments(parser)
    return parser


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """What to compile, for which core, and into which file."""
    parser.add_argument(
        "model",
        nargs="?",
        metavar="MODEL",
        help="a .pt2 file (torch.export.save), path/file.py:factory returning "
        "(module, example_inputs), or a built-in model name (default: ds_cnn)",
    )
    parser.add_argument(
        "--target",
        help="core[+isa], e.g. cortex-m55, cortex-m33+scalar, cortex-m0plus "
        f"(default: the core of --board, else {DEFAULT_TARGET})",
    )
    parser.add_argument(
        "-o", "--output", type=Path, help="the .pte to write (default: <model>.pte)"
    )
    parser.add_argument(
        "--calibration",
        type=Path,
        help=".pt or .npz file of input samples, [samples, *input_shape] per input "
        "(default: a synthetic set, labelled as such in the report)",
    )
    parser.add_argument(
        "--skip-nonfinite-samples",
        action="store_true",
        help="leave out calibration samples holding NaN or ±Inf (counted in the report) "
        "instead of refusing the file",
    )


def _add_quantizer_arguments(parser: argparse.ArgumentParser) -> None:
    """How the quantizer chooses ranges and scales (``QuantizationOptions``)."""
    parser.add_argument(
        "--calibration-method",
        choices=[m.value for m in RangeMethod],
        default=QuantizationOptions().ranges.value,
        help="how each activation's int8 range is chosen from the calibration values: "
        "minmax (observed minimum and maximum), mse (least expected quantization error, "
        "rounding inside and clipping outside, over a histogram of the values) or percentile "
        "(0.01th to 99.99th) (default: %(default)s)",
    )
    parser.add_argument(
        "--equalize",
        action=argparse.BooleanOptionalAction,
        default=QuantizationOptions().equalize,
        help="cross-layer equalization before quantizing: rescale the channels between "
        "consecutive layers so each channel's calibration range matches the next layer's "
        "weight range for it (the float model's function is unchanged; default: %(default)s)",
    )
    parser.add_argument(
        "--bias-correction",
        action=argparse.BooleanOptionalAction,
        default=QuantizationOptions().bias_correction,
        help="subtract each layer's mean weight-quantization error, measured on the "
        "calibration samples, from its bias (default: %(default)s)",
    )
    parser.add_argument(
        "--linear-weights",
        choices=[m.value for m in LinearWeights],
        default=QuantizationOptions().linear_weights.value,
        help="scale each linear layer's int8 weights per-tensor, per-channel, or auto: per "
        "channel where that takes at least 3 dB off the weights' rounding noise "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--precision",
        choices=["uniform", "auto"],
        default="uniform",
        help="uniform: every layer as --activations says; auto: each layer with an int16 case "
        "int8 or int16, measured, so that the model's output SNR against the float model on "
        "calibration samples its ranges were not fitted to (half of them) reaches --min-snr-db "
        "with the least int16 (the report lists "
        "each layer's precision and why) (default: %(default)s)",
    )
    parser.add_argument(
        "--min-snr-db",
        type=float,
        help="with --precision auto or --weights auto: the output SNR (dB) against the float "
        "model to reach",
    )


def _add_precision_arguments(parser: argparse.ArgumentParser) -> None:
    """The precision of weights and activations."""
    parser.add_argument(
        "--weights",
        choices=[*(m.value for m in Weights), "auto"],
        default=QuantizationOptions().weights.value,
        help="int8 weights, or int4 (per output channel, symmetric, packed two per byte: "
        "CMSIS-NN's s4 kernels) for every convolution, depthwise and linear layer with an int4 "
        "case (int8 activations; packed rows of whole bytes, docs/int4.md); the report gives "
        "each layer's; auto: int4 or int8 per such layer, measured, the fewest weight bytes "
        "whose output SNR reaches --min-snr-db (default: %(default)s)",
    )
    parser.add_argument(
        "--int4-ranges",
        choices=[m.value for m in Int4Ranges],
        default=QuantizationOptions().int4_ranges.value,
        help="each int4 weight channel's scale: max, max |w| / 7, or mse: the clipping of "
        "max |w| with the least squared error of its weights (default: %(default)s)",
    )
    parser.add_argument(
        "--activations",
        choices=[m.value for m in Activations],
        default=QuantizationOptions().activations.value,
        help="int8 activations, or int16 (symmetric, CMSIS-NN's s16 kernels with 8-bit "
        "weights) for every op that has an int16 case, the others int8 with a requantization "
        "where the precision changes; the report gives each layer's (default: %(default)s)",
    )


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """What the program takes and gives, how it is checked, and what is written besides it."""
    parser.add_argument("--report-json", type=Path, help="also write the report as JSON")
    parser.add_argument(
        "--io",
        choices=[t.value for t in IoType],
        default=IoType.FLOAT.value,
        help="what the program's inputs and outputs hold: float in the model's layout "
        "(quantized and dequantized inside the program) or int8 that the caller quantizes "
        "(x / scale + zero point, 4-D tensors channels-last; the report and the .pte give "
        "each one's scale, zero point and shape) (default: %(default)s)",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check the lowered program against the PT2E-quantized model (≤ 1 LSB) and "
        "report SNR against the float model; fails when the difference exceeds 1 LSB",
    )
    parser.add_argument(
        "--allow-fallback",
        action="store_true",
        help="keep operators that cannot be lowered as fp32 portable ops instead of failing",
    )
    parser.add_argument(
        "--rounding",
        choices=["double", "single"],
        default="double",
        help="requantization rounding of the CMSIS-NN build the kernels use: CMSIS-NN's "
        "default (double) or CMSIS_NN_USE_SINGLE_ROUNDING (single); recorded in the .pte",
    )
    parser.add_argument(
        "--intermediates", type=Path, metavar="DIR", help="write each stage's graph as text"
    )
    parser.add_argument(
        "--test-vector",
        type=Path,
        metavar="FILE.h",
        help="also write a C header with the first calibration sample and the outputs the "
        "compiled program gives for it (bit-exact references), for firmware tests",
    )
    parser.add_argument(
        "--plot",
        type=Path,
        metavar="FILE.png",
        help="draw the memory plan (tensor lifetimes against arena offsets) as an image",
    )


def _add_fit_arguments(parser: argparse.ArgumentParser) -> None:
    """The memory the model must fit, and how much is printed."""
    parser.add_argument(
        "--board",
        metavar="NAME",
        help="check that the model fits this board's flash and RAM before writing anything "
        "(e.g. mps3/corstone300/an547, alif-e8-hp, rpi_pico2, mps2-an386; see README)",
    )
    parser.add_argument(
        "--flash",
        metavar="SIZE",
        help="check that the .pte and the runtime's code fit SIZE bytes (512K, 2M, 1048576)",
    )
    parser.add_argument(
        "--ram",
        metavar="SIZE",
        help="check that the planned arena and the runtime's RAM fit SIZE bytes",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar and no report on stdout"
    )
    add_debug_argument(parser)


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


def _check_precision(args: argparse.Namespace) -> None:
    """``--precision auto`` takes ``--min-snr-db`` and chooses between int8 and int16 itself;
    ``--weights auto`` likewise between int4 and int8 weights, with int8 activations."""
    if args.weights == "auto":
        _check_weights_auto(args)
    if args.precision == "auto" and args.min_snr_db is None:
        raise CompileError("--precision auto needs --min-snr-db (the output SNR to reach, in dB)")
    if args.precision == "auto" and args.activations != "int8":
        raise CompileError(
            "--precision auto chooses int8 or int16 per layer: leave --activations at int8"
        )
    if "auto" not in (args.precision, args.weights) and args.min_snr_db is not None:
        raise CompileError(
            "--min-snr-db is the target of --precision auto or --weights auto: add one of them"
        )
    if args.min_snr_db is not None and not math.isfinite(args.min_snr_db):
        raise CompileError(f"--min-snr-db {args.min_snr_db} is not a finite number of dB")


def _check_weights_auto(args: argparse.Namespace) -> None:
    """``--weights auto``: a target, int8 activations, and not ``--precision auto`` too."""
    if args.min_snr_db is None:
        raise CompileError("--weights auto needs --min-snr-db (the output SNR to reach, in dB)")
    if args.precision == "auto":
        raise CompileError(
            "--weights auto and --precision auto each search for --min-snr-db on their own: "
            "use one (the s4 kernels take int8 activations only)"
        )
    if args.activations != "int8":
        raise CompileError(
            "--weights auto chooses int4 weights per layer with int8 activations (the s4 "
            "kernels'): leave --activations at int8"
        )


def compile_from_args(args: argparse.Namespace) -> int:
    """Compile, check and write what ``args`` ask for; nothing is written unless all passes."""
    from cortex_m_nn import fit

    # torch's own deprecation warning, raised inside copy.deepcopy of an exported graph's
    # tree specs: nothing a user of the compiler can act on
    deprecated = r"`isinstance\(treespec, LeafSpec\)` is deprecated"
    warnings.filterwarnings("ignore", message=deprecated, category=FutureWarning)
    # Before the heavy imports: bad input fails fast.
    budget = fit.budget(args.board, args.flash, args.ram)
    target = resolve_target(args.target, budget.board if budget else None)
    _check_output_paths(args)
    _check_precision(args)
    compiled, document = _compile_and_check(args, target, budget)
    with stage("outputs"):
        outputs = _outputs(args, compiled, document)  # every byte made before the first write
    with stage("write"):
        write_all(outputs)
    if args.intermediates is not None:
        from cortex_m_nn.compile import write_intermediates

        write_intermediates(compiled, args.intermediates)
    if not args.quiet:
        output = next(iter(outputs))
        print(f"wrote {output} ({len(compiled.pte):,} B)")
    return 0


def _check_output_paths(args: argparse.Namespace) -> None:
    """Refuse, before compiling, two outputs given the same file (one would overwrite the
    other)."""
    seen: dict[Path, str] = {}
    options = {
        "-o/--output": args.output,
        "--report-json": args.report_json,
        "--plot": args.plot,
        "--test-vector": args.test_vector,
    }
    for option, path in options.items():
        if path is None:
            continue
        if path.resolve() in seen:
            raise CompileError(
                f"{option} {path} is the file {seen[path.resolve()]} names too; give each "
                "output its own path"
            )
        seen[path.resolve()] = option


def _compile_and_check(
    args: argparse.Namespace, target: Target, budget: fit.Budget | None
) -> tuple[CompiledProgram, dict]:
    """The compiled program and its report; raises when verification or the fit fails."""
    # The model and its samples first: a bad model or calibration file is refused before the
    # compiler's imports (ExecuTorch's alone take seconds), as --help and argument errors are.
    source, calibration = _model_and_calibration(args)
    from cortex_m_nn import fit, report
    from cortex_m_nn.abi import KernelAbi, Rounding
    from cortex_m_nn.compile import compile_model
    from cortex_m_nn.layer_snr import layer_snr
    from cortex_m_nn.pte import load_temp_bytes, runtime_overhead
    from cortex_m_nn.verify import verify_program

    abi = KernelAbi.for_target(target, Rounding(args.rounding))
    options, plan = _options(args, source, abi, calibration)
    compiled = compile_model(
        source,
        abi,
        calibration,
        allow_fallback=args.allow_fallback,
        progress=not args.quiet,
        options=options,
        io=IoType(args.io),
    )
    with stage("verify"):
        verification = verify_program(compiled) if args.verify else None
    stages = compiled.stages
    with stage("per-layer SNR"):
        layers = layer_snr(stages.exported, stages.quantized, compiled.calibration.samples)
    with stage("report"):
        document = report.as_dict(compiled, verification, layers)
        key = "weight_precision" if args.weights == "auto" else "precision"
        document["precision"] = document["weight_precision"] = None
        document[key] = None if plan is None else plan.as_dict()
    if budget is not None:
        document["fit"] = fit.check(
            budget,
            len(compiled.pte),
            len(set(compiled.operators)),
            compiled.arena_bytes,
            # the method allocator and the load-time temporary allocator, both static
            runtime_overhead(compiled.pte).total + load_temp_bytes(compiled.pte),
        )
    if not args.quiet:
        print(report.to_text(document), end="")
    if verification is not None and not verification.passed:
        name, lsb = next(iter(verification.exceeding.items()), ("", verification.max_lsb))
        allowed = verification.allowed.get(name, document["verify"]["max_lsb_allowed"])
        raise CompileError(
            f"verification failed: an operator ({name}) differs from the PT2E reference by "
            f"{lsb} LSB (allowed {allowed}); nothing written"
        )
    if budget is not None:
        fit.require_fit(document["fit"])
    return compiled, document


def _options(
    args: argparse.Namespace, source: ModelSource, abi: KernelAbi, calibration: Calibration
) -> tuple[QuantizationOptions, PrecisionPlan | WeightPlan | None]:
    """The quantizer's options the arguments give; with ``--precision auto``, the int16 layers
    the search chooses (``--weights auto``: the int4 layers), and its plan for the report."""
    options = QuantizationOptions(
        ranges=RangeMethod(args.calibration_method),
        equalize=args.equalize,
        bias_correction=args.bias_correction,
        linear_weights=LinearWeights(args.linear_weights),
        activations=Activations(args.activations),
        weights=Weights.INT8 if args.weights == "auto" else Weights(args.weights),
        int4_ranges=Int4Ranges(args.int4_ranges),
    )
    say = None if args.quiet else lambda message: print(message, file=sys.stderr)
    if args.weights == "auto":
        from cortex_m_nn import weight_precision

        with stage("weight precision per layer"):
            return weight_precision.choose(source, abi, calibration, options, args.min_snr_db, say)
    if args.precision != "auto":
        return options, None
    from cortex_m_nn.mixed_precision import choose

    with stage("precision per layer"):
        return choose(source, abi, calibration, options, args.min_snr_db, say)


def _model_and_calibration(args: argparse.Namespace) -> tuple[ModelSource, Calibration]:
    """The model ``args`` name and its calibration samples (a file, or a synthetic set)."""
    with stage("load model"):
        if args.model is not None:
            require_model_file(args.model)  # before torch's import: seconds sooner
        from cortex_m_nn import calibration as calibration_files
        from cortex_m_nn.model_source import load_model

        source = load_model(args.model)
    with stage("calibration data"):
        if args.calibration is None:
            return source, calibration_files.synthetic(source.example_inputs)
        calibration = calibration_files.load(
            args.calibration, source.example_inputs, args.skip_nonfinite_samples
        )
    return source, calibration


def _outputs(
    args: argparse.Namespace, compiled: CompiledProgram, document: dict
) -> dict[Path, bytes]:
    """Path → bytes of every file to write, the .pte first (a bad --plot format writes nothing)."""
    from cortex_m_nn import report

    source = compiled.model
    outputs = {args.output or Path(f"{source.name.replace(':', '_')}.pte"): compiled.pte}
    if args.report_json is not None:
        outputs[args.report_json] = report.to_json(document).encode()
    if args.plot is not None:
        from cortex_m_nn.plot import render

        image_format = args.plot.suffix.lstrip(".").lower() or "png"
        try:
            outputs[args.plot] = render(compiled.memory, source.name, image_format)
        except ValueError as error:
            raise CompileError(
                f"cannot draw --plot {args.plot}: {error}; use .png, .svg or .pdf"
            ) from error
    if args.test_vector is not None:
        from cortex_m_nn import test_vector

        outputs[args.test_vector] = test_vector.for_program(compiled).encode()
    return outputs


def run(args: argparse.Namespace) -> int:
    """Run the compiler for parsed ``args``; returns the process exit status."""
    return guarded("cortex-m-compile", compile_from_args, args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] and argv[0] in SUBCOMMANDS:
        return SUBCOMMANDS[argv[0]](argv[1:])
    parser = argparse.ArgumentParser(
        prog="cortex-m-compile",
        description=DESCRIPTION,
        epilog="cortex-m-compile inspect ELF [--pte PTE] reports on a built firmware image; "
        "cortex-m-compile embed PTE --output-dir DIR writes the C source, header and CMake "
        "facts that embed a .pte in firmware; a model file named 'inspect' or 'embed' is "
        "given as ./inspect or ./embed.",
    )
    return run(add_arguments(parser).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
