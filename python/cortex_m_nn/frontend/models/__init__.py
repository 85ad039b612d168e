"""Built-in models, compiled when no model is given: name → factory.

A factory takes no arguments and returns ``(module in eval mode, example_inputs)``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .ds_cnn import ds_cnn

ModelFactory = Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]

BUILTIN_MODELS: dict[str, ModelFactory] = {"ds_cnn": ds_cnn}
DEFAULT_MODEL = "ds_cnn"

__all__ = ["BUILTIN_MODELS", "DEFAULT_MODEL", "ModelFactory", "ds_cnn"]
