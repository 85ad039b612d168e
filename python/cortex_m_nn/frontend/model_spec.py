"""What a model argument names, read without importing torch: a missing file is refused in a
fraction of a second instead of after torch's import (seconds)."""

from __future__ import annotations

from pathlib import Path

from cortex_m_nn.core.errors import CompileError


def model_file(spec: str) -> Path | None:
    """The file ``spec`` names (``path/file.py:factory`` or ``file.pt2``); None for other
    specs (a built-in model's name, or one ``load_model`` refuses)."""
    if ".py:" in spec:
        return Path(spec.rsplit(":", 1)[0])
    path = Path(spec)
    return path if path.suffix == ".pt2" else None


def require_model_file(spec: str) -> None:
    """CompileError when ``spec`` names a file that does not exist."""
    path = model_file(spec)
    if path is not None and not path.is_file():
        raise CompileError(f"model file {path} does not exist")
