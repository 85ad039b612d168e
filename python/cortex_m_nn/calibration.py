"""Calibration samples: from a ``.pt``/``.npz`` file, or a labelled synthetic set."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from cortex_m_nn.errors import CompileError

SYNTHETIC_SAMPLES = 32


@dataclass
class Calibration:
    samples: list[tuple[torch.Tensor, ...]]
    description: str
    synthetic: bool


def synthetic(
    example_inputs: tuple[torch.Tensor, ...], count: int = SYNTHETIC_SAMPLES
) -> Calibration:
    """Standard-normal samples shaped like the example inputs (seeded: reproducible)."""
    generator = torch.Generator().manual_seed(0)
    samples = [
        tuple(torch.randn(x.shape, generator=generator, dtype=x.dtype) for x in example_inputs)
        for _ in range(count)
    ]
    return Calibration(
        samples,
        f"synthetic: {count} samples of N(0, 1); pass --calibration for real data",
        synthetic=True,
    )


def load(path: Path, example_inputs: tuple[torch.Tensor, ...]) -> Calibration:
    """Load samples: one array/tensor per model input, the first dimension counting samples.

    ``.pt``: a tensor (single-input models), or a list/tuple of tensors, one per input.
    ``.npz``: arrays in input order (``arr_0``, ``arr_1``, … or any names, in file order).
    Each array is ``[samples, *input_shape]``; for batch-1 inputs ``[samples, *input_shape[1:]]``
    is accepted too.
    """
    if not path.is_file():
        raise CompileError(f"calibration file {path} does not exist")
    try:
        if path.suffix == ".npz":
            with np.load(path) as archive:
                arrays = [torch.from_numpy(archive[name]) for name in archive.files]
        elif path.suffix == ".pt":
            loaded = torch.load(path, weights_only=True)
            arrays = [loaded] if isinstance(loaded, torch.Tensor) else list(loaded)
        else:
            raise CompileError(f"calibration file {path}: use a .pt or .npz file")
    except CompileError:
        raise
    except Exception as error:
        raise CompileError(f"cannot read calibration file {path}: {error}") from error
    if len(arrays) != len(example_inputs):
        raise CompileError(
            f"calibration file {path} has {len(arrays)} arrays; the model takes "
            f"{len(example_inputs)} inputs"
        )
    per_input = [
        _split(path, i, a, x) for i, (a, x) in enumerate(zip(arrays, example_inputs, strict=True))
    ]
    counts = {len(s) for s in per_input}
    if len(counts) != 1:
        raise CompileError(f"calibration file {path}: inputs have different sample counts")
    samples = list(zip(*per_input, strict=True))
    return Calibration(samples, f"{path.name}: {len(samples)} samples", synthetic=False)


def _split(path: Path, index: int, array: object, example: torch.Tensor) -> list[torch.Tensor]:
    if not isinstance(array, torch.Tensor):
        raise CompileError(f"calibration file {path}: input {index} is not a tensor")
    shape = tuple(example.shape)
    if tuple(array.shape[1:]) == shape:
        batch = array
    elif shape and shape[0] == 1 and tuple(array.shape[1:]) == shape[1:]:
        batch = array.unsqueeze(1)
    else:
        raise CompileError(
            f"calibration input {index} has shape {list(array.shape)}; expected "
            f"[samples, {', '.join(map(str, shape))}]"
        )
    if batch.shape[0] == 0:
        raise CompileError(f"calibration file {path} holds no samples")
    return [sample.to(example.dtype) for sample in batch]
