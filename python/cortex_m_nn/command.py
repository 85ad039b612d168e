"""What every ``cortex-m-compile`` command shares: one line per error (exit 2 for the user's
to fix, 3 for an internal error, naming its stage), ``--debug`` for the traceback, and outputs
that appear all together or not at all."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

from cortex_m_nn.errors import CompileError, stage_of
from cortex_m_nn.target import TargetError


def add_debug_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an internal error (exit 3), print its Python traceback too",
    )


def write_all(outputs: dict[Path, bytes]) -> None:
    """Write every output through a temporary file beside it, and only when all of them are
    written put them in place: never a partial output, nor some outputs without the others."""
    umask = os.umask(0)
    os.umask(umask)
    temporaries: dict[Path, Path] = {}
    try:
        for path, data in outputs.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            temporaries[path] = Path(temporary)
            os.fchmod(handle, 0o666 & ~umask)  # mkstemp's 0600 would make the output private
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
        for path, temporary in list(temporaries.items()):
            os.replace(temporary, path)
            del temporaries[path]
    except OSError as error:
        where = error.filename or "the outputs"
        message = f"cannot write {where}: {error.strerror}; choose another path"
        raise CompileError(message) from error
    finally:
        for temporary in temporaries.values():
            temporary.unlink(missing_ok=True)


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
