"""Command line shared by the ``cortex-m-compile`` console script and ``west cortex-m-compile``."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from cortex_m_nn.errors import CompileError
from cortex_m_nn.target import DEFAULT_TARGET, Target, TargetError

DESCRIPTION = (
    "Compile a PyTorch model into an ExecuTorch program (.pte) whose operators are "
    "CMSIS-NN kernels for an Arm Cortex-M core."
)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the compiler's options to ``parser`` (the west command and the script share them)."""
    parser.add_argument(
        "model",
        nargs="?",
        metavar="MODEL",
        help="a .pt2 file (torch.export.save), path/file.py:factory returning "
        "(module, example_inputs), or a built-in model name (default: ds_cnn)",
    )
    parser.add_argument(
        "--target",
        default=str(DEFAULT_TARGET),
        help="core[+isa], e.g. cortex-m55, cortex-m33+scalar, cortex-m0plus "
        f"(default: {DEFAULT_TARGET})",
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
    parser.add_argument("--report-json", type=Path, help="also write the report as JSON")
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
        "-q", "--quiet", action="store_true", help="no progress bar and no report on stdout"
    )
    return parser


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file: never a partial output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(handle, 0o666 & ~umask)  # mkstemp's 0600 would make the output private
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def compile_from_args(args: argparse.Namespace) -> int:
    target = Target.parse(args.target)  # before the heavy imports: bad input fails fast
    # Imported here so that --help and argument errors stay fast.
    from cortex_m_nn import calibration as calibration_files
    from cortex_m_nn import report
    from cortex_m_nn.compile import compile_model, write_intermediates
    from cortex_m_nn.model_source import load_model
    from cortex_m_nn.ops.arithmetic import Rounding
    from cortex_m_nn.verify import verify_program

    source = load_model(args.model)
    if args.calibration is not None:
        calibration = calibration_files.load(args.calibration, source.example_inputs)
    else:
        calibration = calibration_files.synthetic(source.example_inputs)
    compiled = compile_model(
        source,
        target,
        calibration,
        allow_fallback=args.allow_fallback,
        rounding=Rounding(args.rounding),
        progress=not args.quiet,
    )
    verification = None
    if args.verify:
        verification = verify_program(compiled)
    document = report.as_dict(compiled, verification)
    if not args.quiet:
        print(report.to_text(document), end="")
    if verification is not None and not verification.passed:
        raise CompileError(
            f"verification failed: an operator differs from the PT2E reference by "
            f"{verification.max_lsb} LSB (allowed {document['verify']['max_lsb_allowed']}); "
            "nothing written"
        )
    output = args.output or Path(f"{source.name.replace(':', '_')}.pte")
    _write_atomically(output, compiled.pte)
    if args.report_json is not None:
        _write_atomically(args.report_json, report.to_json(document).encode())
    if args.intermediates is not None:
        write_intermediates(compiled, args.intermediates)
    if not args.quiet:
        print(f"wrote {output} ({len(compiled.pte):,} B)")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the compiler for parsed ``args``; returns the process exit status."""
    try:
        return compile_from_args(args)
    except (CompileError, TargetError) as error:
        print(f"cortex-m-compile: error: {error}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cortex-m-compile", description=DESCRIPTION)
    return run(add_arguments(parser).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
