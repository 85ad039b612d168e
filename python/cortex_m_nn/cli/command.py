"""What every ``cortex-m-compile`` command shares: one line per error (exit 2 for the user's
to fix, 3 for an internal error, naming its stage), ``--debug`` for the traceback, and outputs
that appear all together or not at all."""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable

from cortex_m_nn.core.errors import CompileError, stage_of
from cortex_m_nn.core.target import TargetError


def add_debug_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an internal error (exit 3), print its Python traceback too",
    )


def guarded(
    prog: str,
    command: Callable[[argparse.Namespace], int],
    args: argparse.Namespace,
    outermost: str = "startup",
) -> int:
    """``command(args)``'s exit status; whatever it raises ends in one line on stderr: a
    CompileError (the user's to fix) exits 2, anything else is an internal error, named with
    the stage it left, exit 3 (``--debug`` prints its traceback first)."""
    try:
        return command(args)
    except (CompileError, TargetError) as error:
        # one line, whatever text a library's error brought into the message
        print(f"{prog}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    except Exception as error:
        if getattr(args, "debug", False):
            traceback.print_exc()
        lines = str(error).strip().splitlines()
        print(
            f"{prog}: internal error in {stage_of(error, outermost)}: {type(error).__name__}: "
            f"{lines[0] if lines else ''}; rerun with --debug for the traceback",
            file=sys.stderr,
        )
        return 3
