"""Models exported and calibrated once, lowered per target (the session fixtures of
tests/conftest.py hand them out).

Export and PT2E calibration are the slow part of a compile and do not depend on the target,
so a model is quantized once and ``compile_quantized`` lowers the result for each core a
test asks for. The graphs are only read by lowering and verification.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.fx import GraphModule

from cortex_m_nn.core.options import QuantizationOptions
from cortex_m_nn.core.target import Target
from cortex_m_nn.frontend.calibration import Calibration, synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.pipeline import CompiledProgram, compile_quantized, quantize

#: Calibration samples of the shared compiles (the zoo's; verification runs each twice).
SAMPLES = 4

Factory = Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]


@dataclass
class Quantized:
    """A model exported and calibrated once: ``lower`` compiles it for any target."""

    source: ModelSource
    calibration: Calibration
    graphs: tuple[GraphModule, GraphModule]

    def lower(self, target: str | Target, allow_fallback: bool = False) -> CompiledProgram:
        target = target if isinstance(target, Target) else Target.parse(target)
        return compile_quantized(
            self.source,
            target,
            self.calibration,
            self.graphs,
            allow_fallback=allow_fallback,
            serialise=False,  # on first use of the .pte: many tests read the graphs only
        )


@dataclass
class QuantizedModels:
    """Each model quantized on first use (``SAMPLES`` synthetic samples), kept for the session."""

    done: dict[str, Quantized] = field(default_factory=dict)

    def get(
        self, name: str, factory: Factory, options: QuantizationOptions | None = None
    ) -> Quantized:
        """``name`` quantized with ``options`` (default: the quantizer's defaults)."""
        key = f"{name} {options}"
        if key not in self.done:
            module, inputs = factory()
            source = ModelSource(name, module, inputs)
            calibration = synthetic(inputs, count=SAMPLES)
            graphs = quantize(source, calibration, progress=False, options=options)
            self.done[key] = Quantized(source, calibration, graphs)
        return self.done[key]
