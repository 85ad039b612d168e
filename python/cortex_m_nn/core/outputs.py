"""Outputs written all together or not at all: a program, its report and its firmware files
never appear partly, nor some of them without the others."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from cortex_m_nn.core.errors import CompileError


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
