"""The one exception type the CLI turns into a one-line error and a non-zero exit, and the
stage names it gives any other exception (an internal error, exit 3)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

#: The attribute an unexpected exception carries: the innermost stage it left.
STAGE_ATTRIBUTE = "cortex_m_nn_stage"


class CompileError(Exception):
    """A problem with the user's input or model; the message names the fix."""


def mark_stage(error: BaseException, name: str) -> None:
    """Record on ``error`` the stage it left, unless an inner stage already did."""
    if not hasattr(error, STAGE_ATTRIBUTE):
        with contextlib.suppress(AttributeError, TypeError):
            setattr(error, STAGE_ATTRIBUTE, name)


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Name the step running, for the CLI's report of an unexpected exception."""
    try:
        yield
    except Exception as error:
        mark_stage(error, name)
        raise


def stage_of(error: BaseException, default: str = "startup") -> str:
    """The innermost stage ``error`` left (``default`` if it left none)."""
    return getattr(error, STAGE_ATTRIBUTE, default)
