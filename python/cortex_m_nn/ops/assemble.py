"""``cortex_m_nn::assemble``: the strips of an NHWC tensor, top to bottom, as the one tensor
they are: a patch-based stage's output (:mod:`cortex_m_nn.plan.patch`).

Each strip is computed straight into its rows of the result: the memory planner places strip
``i`` inside the result, after the rows of the strips before it (ExecuTorch's
``storage_base``), so the kernel moves nothing. While a call's arguments are checked it fails
unless every strip's bytes are exactly there; a proven call does nothing. The reference
concatenates along the rows. Any element type: no arithmetic.
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.library import define_operator


def assembled_shape(shapes: list[tuple[int, ...]]) -> list[int]:
    """The result's shape; ValueError unless the strips are 4-D and differ only in rows."""
    if not shapes or any(
        len(s) != 4 or s[:1] + s[2:] != shapes[0][:1] + shapes[0][2:] for s in shapes
    ):
        raise ValueError(f"strips {[list(s) for s in shapes]} are not rows of one NHWC tensor")
    n, _, w, c = shapes[0]
    return [n, sum(s[1] for s in shapes), w, c]


def _fake(parts: list[torch.Tensor]) -> torch.Tensor:
    return parts[0].new_empty(assembled_shape([tuple(p.shape) for p in parts]))


@define_operator("assemble", "Tensor[] parts", _fake)
def assemble(parts: list[torch.Tensor]) -> torch.Tensor:
    """Reference: the strips concatenated along the rows."""
    assembled_shape([tuple(p.shape) for p in parts])
    return torch.cat(list(parts), dim=1)
