"""``cortex_m_nn::window``: rows ``[row, row + rows)`` of an NHWC tensor, a tensor of its own
that shares the input's bytes: the strip of a tensor a patch-based stage reads
(:mod:`cortex_m_nn.plan.patch`).

The memory planner places the result inside the input, ``row`` rows (of ``W * C`` elements)
after its start (ExecuTorch's ``storage_base``), so the kernel moves nothing: while a call's
arguments are checked it fails unless out's bytes are exactly there, and a proven call does
nothing. The reference slices. Any element type: no arithmetic.
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.library import define_operator


def check_window(shape: tuple[int, ...], row: int, rows: int) -> None:
    """ValueError unless ``[row, row + rows)`` are rows of a 4-D tensor of ``shape``."""
    if len(shape) != 4 or not (0 <= row and rows >= 1 and row + rows <= shape[1]):
        raise ValueError(f"rows {row}..{row + rows - 1} are not rows of a tensor {list(shape)}")


def window_offset(shape: tuple[int, ...], row: int, element_bytes: int) -> int:
    """Bytes from the input's start to the window's (what the planner places it at)."""
    return row * shape[2] * shape[3] * element_bytes


def _fake(input: torch.Tensor, row: int, rows: int) -> torch.Tensor:
    check_window(tuple(input.shape), row, rows)
    return input.new_empty((input.shape[0], rows, input.shape[2], input.shape[3]))


@define_operator("window", "Tensor input, int row, int rows", _fake)
def window(input: torch.Tensor, row: int, rows: int) -> torch.Tensor:
    """Reference: the rows, as a copy (on the device they are the input's own bytes)."""
    check_window(tuple(input.shape), row, rows)
    return input[:, row : row + rows].clone()
