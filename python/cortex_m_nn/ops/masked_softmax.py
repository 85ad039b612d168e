"""``cortex_m_nn::masked_softmax``: int8 softmax over the kept entries of each row of the last
dimension (``arm_softmax_s8`` on them), a masked entry 0 (-128: output scale 1/256, zero point
-128): attention under a causal or boolean mask, where a masked score is ``-inf``.

``keep`` is an int8 ``[R, N]`` constant (1: kept, 0: masked) for rows of ``N``; input row
``i`` takes mask row ``i mod R`` (a ``[L, S]`` mask serves every batch item and head). Per
row the kernel gathers the kept entries into its scratch (``N`` bytes), runs
``arm_softmax_s8`` on them (``multiplier``, ``shift``, ``diff_min`` as the softmax's) into the
row's first places, spreads them back to theirs from the last, and writes -128 where masked.
Every row keeps at least one entry (the compiler refuses a mask that keeps none: its float
softmax is NaN).
"""

from __future__ import annotations

import torch

from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.softmax import softmax

#: The int8 output of a masked entry (probability 0).
MASKED = -128


def _fake(input: torch.Tensor, *arguments: object) -> torch.Tensor:
    return torch.empty_like(input, dtype=torch.int8)


def scratch_bytes(row: int) -> int:
    """One row's kept entries, gathered."""
    return row


@define_operator(
    "masked_softmax",
    "Tensor input, Tensor keep, int multiplier, int shift, int diff_min, int scratch_bytes",
    _fake,
    scratch=True,
)
def masked_softmax(
    input: torch.Tensor,
    keep: torch.Tensor,
    multiplier: int,
    shift: int,
    diff_min: int,
    *,
    rounding: Rounding,
) -> torch.Tensor:
    """Reference: ``arm_softmax_s8`` (``ops.softmax``) on each row's kept entries."""
    if input.dtype is not torch.int8 or input.dim() < 1:
        raise ValueError(f"masked_softmax: an int8 input, got {input.dtype}")
    row = input.shape[-1]
    if keep.dim() != 2 or keep.shape[1] != row or (input.numel() // row) % keep.shape[0]:
        raise ValueError(f"mask {tuple(keep.shape)} does not tile rows of {row}")
    if not bool((keep != 0).any(dim=1).all()):
        raise ValueError("a mask row keeps no entry")
    rows = input.reshape(-1, row)
    out = torch.full_like(rows, MASKED)
    for index in range(rows.shape[0]):
        kept = keep[index % keep.shape[0]] != 0
        out[index, kept] = softmax(
            rows[index, kept], None, None, multiplier, shift, diff_min, rounding=rounding
        )
    return out.reshape(input.shape)
