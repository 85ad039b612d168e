"""The coverage corpus: what ordinary PyTorch code looks like, as tiny seeded models.

* ``CASES``: every common ``torch.nn`` layer (:mod:`.layers`) and every tensor method common
  in ``forward()`` (:mod:`.tensor_ops`), one tiny model each;
* ``ARCHITECTURES``: published small architectures re-implemented here from their papers
  (:mod:`.architectures`), written the way public implementations are written (in-place
  residuals and activations, in-place dropout heads, slices after a concat), and two of
  timm's own models as ``timm.create_model`` builds them (skipped where timm is missing).

Every entry maps a name to a factory returning ``(module in eval mode, example inputs)``,
seeded, batch 1. ``benchmarks/coverage.py`` prints what each compiler makes of them;
``test_coverage.py`` holds cortex-m-nn to lowering them completely.
"""

from __future__ import annotations

from .architectures import ARCHITECTURES
from .cases import Factory
from .layers import LAYERS
from .tensor_ops import TENSOR_OPS

CASES: dict[str, Factory] = {**LAYERS, **TENSOR_OPS}

__all__ = ["ARCHITECTURES", "CASES"]
