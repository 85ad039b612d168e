"""The stages' graphs as readable text (``cortex-m-compile --intermediates DIR``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cortex_m_nn.pipeline import CompiledProgram


def write_intermediates(compiled: CompiledProgram, directory: Path) -> list[Path]:
    """Each stage's graph as readable text."""
    directory.mkdir(parents=True, exist_ok=True)
    stages = compiled.stages
    texts: dict[str, Callable[[], str]] = {
        "1-exported.txt": lambda: str(stages.exported.graph),
        "2-quantized.txt": lambda: str(stages.quantized.graph),
        "3-lowered.txt": lambda: str(stages.lowering.graph_module.graph),
        "4-edge.txt": lambda: compiled.serialised.edge_text,
        "5-executorch.txt": lambda: compiled.serialised.executorch_text,
    }
    written = []
    for name, text in texts.items():
        path = directory / name
        path.write_text(text())
        written.append(path)
    return written
