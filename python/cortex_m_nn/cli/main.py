"""Command line shared by the ``cortex-m-compile`` console script and ``west cortex-m-compile``.

``cortex-m-compile MODEL …`` compiles; ``cortex-m-compile inspect app.elf …`` reports on a
built firmware image; ``cortex-m-compile embed model.pte …`` writes what a firmware build needs
to embed a ``.pte`` (a model file literally named ``inspect`` or ``embed`` is given as
``./inspect``, ``./embed``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import warnings
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from cortex_m_nn.cli.command import add_debug_argument, guarded
from cortex_m_nn.cli.subcommands import SUBCOMMANDS
from cortex_m_nn.core.errors import CompileError, stage
from cortex_m_nn.core.options import (
    Activations,
    Int4Ranges,
    IoType,
    LinearWeights,
    RangeMethod,
    Weights,
)
from cortex_m_nn.core.outputs import write_all
from cortex_m_nn.core.target import DEFAULT_TARGET
from cortex_m_nn.frontend.model_spec import require_model_file
from cortex_m_nn.program import (
    Options,
    build,
    calibration_samples,
    model_source,
    stderr_messages,
)

if TYPE_CHECKING:
    from cortex_m_nn.frontend.calibration import Calibration
    from cortex_m_nn.frontend.model_source import ModelSource
    from cortex_m_nn.pipeline import CompiledProgram

#: The compile options the parser gives and :class:`~cortex_m_nn.program.Options` takes.
OPTION_NAMES = tuple(field.name for field in dataclasses.fields(Options))

DESCRIPTION = (
    "Compile a PyTorch model into an ExecuTorch program (.pte) whose operators are "
    "CMSIS-NN kernels for an Arm Cortex-M core."
)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the compiler's options to ``parser`` (the west command and the script share them),
    with :class:`~cortex_m_nn.program.Options`' defaults: the Python API's."""
    parser.set_defaults(**dataclasses.asdict(Options()))
    _add_model_arguments(parser)
    _add_quantizer_arguments(parser)
    _add_precision_arguments(parser)
    _add_output_arguments(parser)
    _add_fit_arguments(parser)
    return parser


def _values(choices: type[Enum], *more: str) -> list[str]:
    """The values of an option whose choices are an enum's (then ``more``)."""
    return [*(choice.value for choice in choices), *more]


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
        choices=_values(RangeMethod),
        help="how each activation's int8 range is chosen from the calibration values: "
        "minmax (observed minimum and maximum), mse (least expected quantization error, "
        "rounding inside and clipping outside, over a histogram of the values) or percentile "
        "(0.01th to 99.99th) (default: %(default)s)",
    )
    parser.add_argument(
        "--equalize",
        action=argparse.BooleanOptionalAction,
        help="cross-layer equalization before quantizing: rescale the channels between "
        "consecutive layers so each channel's calibration range matches the next layer's "
        "weight range for it (the float model's function is unchanged; default: %(default)s)",
    )
    parser.add_argument(
        "--bias-correction",
        action=argparse.BooleanOptionalAction,
        help="subtract each layer's mean weight-quantization error, measured on the "
        "calibration samples, from its bias (default: %(default)s)",
    )
    parser.add_argument(
        "--linear-weights",
        choices=_values(LinearWeights),
        help="scale each linear layer's int8 weights per-tensor, per-channel, or auto: per "
        "channel where that takes at least 3 dB off the weights' rounding noise "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--precision",
        choices=["uniform", "auto"],
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
        choices=_values(Weights, "auto"),
        help="int8 weights, or int4 (per output channel, symmetric, packed two per byte: "
        "CMSIS-NN's s4 kernels) for every convolution, depthwise and linear layer with an int4 "
        "case (int8 activations; packed rows of whole bytes, docs/int4.md); the report gives "
        "each layer's; auto: int4 or int8 per such layer, measured, the fewest weight bytes "
        "whose output SNR reaches --min-snr-db (default: %(default)s)",
    )
    parser.add_argument(
        "--int4-ranges",
        choices=_values(Int4Ranges),
        help="each int4 weight channel's scale: max, max |w| / 7, or mse: the clipping of "
        "max |w| with the least squared error of its weights (default: %(default)s)",
    )
    parser.add_argument(
        "--activations",
        choices=_values(Activations),
        help="int8 activations, or int16 (symmetric, CMSIS-NN's s16 kernels with 8-bit "
        "weights) for every op that has an int16 case, the others int8 with a requantization "
        "where the precision changes; the report gives each layer's (default: %(default)s)",
    )


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """What the program takes and gives, how it is checked, and what is written besides it."""
    parser.add_argument("--report-json", type=Path, help="also write the report as JSON")
    parser.add_argument(
        "--io",
        choices=_values(IoType),
        help="what the program's inputs and outputs hold: float in the model's layout "
        "(quantized and dequantized inside the program) or int8 that the caller quantizes "
        "(x / scale + zero point, 4-D tensors channels-last; the report and the .pte give "
        "each one's scale, zero point and shape) (default: %(default)s)",
    )
    parser.add_argument(
        "--memory",
        choices=["fast", "small", "auto"],
        help="the memory schedule: fast, every tensor its own bytes while it lives; small, a "
        "kernel's output may also take the bytes of the input it has consumed, where its "
        "CMSIS-NN code path reads ahead of its writes (the report lists the overlaps), and the "
        "first layers may run a few rows at a time (more kernel calls and a larger .pte; the "
        "report names the stage); auto, fast unless its arena does not fit the RAM of "
        "--board/--ram, then small (default: %(default)s)",
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


def compile_from_args(args: argparse.Namespace) -> int:
    """Compile, check and write what ``args`` ask for; nothing is written unless all passes."""
    # torch's own deprecation warning, raised inside copy.deepcopy of an exported graph's
    # tree specs: nothing a user of the compiler can act on
    deprecated = r"`isinstance\(treespec, LeafSpec\)` is deprecated"
    warnings.filterwarnings("ignore", message=deprecated, category=FutureWarning)
    # Before the heavy imports: bad input fails fast.
    options = Options.of({name: getattr(args, name) for name in OPTION_NAMES})
    options.check()
    _check_output_paths(args)
    source, calibration = _model_and_calibration(args)
    program = build(
        source, calibration, options, progress=not args.quiet, say=stderr_messages(args.quiet)
    )
    if not args.quiet:
        print(program.report, end="")
    program.require_passed()
    compiled, document = program.compiled, program.report.data
    with stage("outputs"):
        outputs = _outputs(args, compiled, document)  # every byte made before the first write
    with stage("write"):
        write_all(outputs)
    if args.intermediates is not None:
        from cortex_m_nn.report.intermediates import write_intermediates

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


def _model_and_calibration(args: argparse.Namespace) -> tuple[ModelSource, Calibration]:
    """The model ``args`` name and its calibration samples (a file, or a synthetic set)."""
    with stage("load model"):
        if args.model is not None:
            require_model_file(args.model)  # before torch's import: seconds sooner
        source = model_source(args.model, None)
    with stage("calibration data"):
        calibration = calibration_samples(source, args.calibration, args.skip_nonfinite_samples)
    return source, calibration


def _outputs(
    args: argparse.Namespace, compiled: CompiledProgram, document: dict
) -> dict[Path, bytes]:
    """Path → bytes of every file to write, the .pte first (a bad --plot format writes nothing)."""
    from cortex_m_nn.report import compile_report as report

    source = compiled.model
    outputs = {args.output or Path(f"{source.name.replace(':', '_')}.pte"): compiled.pte}
    if args.report_json is not None:
        outputs[args.report_json] = report.to_json(document).encode()
    if args.plot is not None:
        from cortex_m_nn.report.plot import render

        image_format = args.plot.suffix.lstrip(".").lower() or "png"
        try:
            outputs[args.plot] = render(compiled.memory, source.name, image_format)
        except ValueError as error:
            raise CompileError(
                f"cannot draw --plot {args.plot}: {error}; use .png, .svg or .pdf"
            ) from error
    if args.test_vector is not None:
        from cortex_m_nn.check import vector as test_vector

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
