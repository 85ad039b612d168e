"""Calibration samples: from a ``.pt``/``.npz`` file, or a labelled synthetic set."""

from __future__ import annotations

import pickle
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from cortex_m_nn.core.errors import CompileError

SYNTHETIC_SAMPLES = 32


@dataclass
class Calibration:
    samples: list[tuple[torch.Tensor, ...]]
    description: str
    synthetic: bool
    #: Samples left out because an input held NaN or ±Inf (``load(skip_nonfinite=True)``).
    skipped: int = 0


def first_nonfinite(samples: list[tuple[torch.Tensor, ...]]) -> tuple[int, int, int] | None:
    """(sample, input, how many samples) of the first NaN or ±Inf in ``samples``, or None."""
    bad = [
        (s, i)
        for s, sample in enumerate(samples)
        for i, x in enumerate(sample)
        if x.is_floating_point() and not bool(torch.isfinite(x).all())
    ]
    if not bad:
        return None
    return bad[0][0], bad[0][1], len({s for s, _ in bad})


def require_finite(calibration: Calibration, where: str = "calibration samples") -> None:
    """Refuse samples holding NaN or ±Inf: an observer cannot take a range from them."""
    found = first_nonfinite(calibration.samples)
    if found is not None:
        sample, index, count = found
        raise CompileError(
            f"{where}: input {index} of sample {sample} holds NaN or ±Inf ({count} of "
            f"{len(calibration.samples)} samples do); clean the data, or pass "
            "--skip-nonfinite-samples to leave such samples out"
        )


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


def load(
    path: Path, example_inputs: tuple[torch.Tensor, ...], skip_nonfinite: bool = False
) -> Calibration:
    """Load samples: one array/tensor per model input, the first dimension counting samples.

    A sample with NaN or ±Inf in any input is refused (CompileError naming the file, the
    input and the first such sample), or with ``skip_nonfinite`` left out and counted.

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
    except pickle.UnpicklingError as error:  # torch.load(weights_only=True) met an object
        found = re.search(r"GLOBAL ([\w.]+)", str(error))
        what = f" ({found.group(1)})" if found else ""
        raise CompileError(
            f"calibration file {path} holds Python objects other than tensors{what}: save a "
            "tensor, or a list of tensors, one per model input"
        ) from error
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
    calibration = Calibration(samples, f"{path.name}: {len(samples)} samples", synthetic=False)
    if not skip_nonfinite:
        require_finite(calibration, f"calibration file {path}")
        return calibration
    finite = [s for s in samples if first_nonfinite([s]) is None]
    if not finite:
        raise CompileError(f"calibration file {path}: every sample holds NaN or ±Inf")
    skipped = len(samples) - len(finite)
    description = f"{path.name}: {len(finite)} samples"
    if skipped:
        description += f" ({skipped} with NaN or ±Inf left out)"
    return Calibration(finite, description, synthetic=False, skipped=skipped)


def _split(path: Path, index: int, array: object, example: torch.Tensor) -> list[torch.Tensor]:
    if not isinstance(array, torch.Tensor):
        raise CompileError(f"calibration file {path}: input {index} is not a tensor")
    if not array.is_floating_point():
        raise CompileError(
            f"calibration file {path}: input {index} is {array.dtype}; give the float samples "
            f"the model takes ({example.dtype}), before any quantization"
        )
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
