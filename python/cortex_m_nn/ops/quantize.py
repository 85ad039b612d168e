"""``cortex_m_nn::quantize``: float → int8 or int16 at the graph boundary, the layout change
folded in.

Rounds exactly as PT2E's ``quantize_per_tensor`` does (``round(x * (1 / scale))``, half to
even, in float32), so the lowered graph's input matches the PT2E reference bit for bit.
``permutation`` reorders the dimensions on the way in (NCHW → NHWC is ``[0, 2, 3, 1]``);
an empty list keeps the order. ``dtype`` is the output's ExecuTorch ``ScalarType`` code
(``cortex_m_nn.core.precision.scalar_type``): 1, int8 in [-128, 127]; 2, int16 in [-32768, 32767]
with zero point 0 (int16 activations are symmetric).
"""

from __future__ import annotations

import torch

from cortex_m_nn.core.integers import RANGES, dtype_of_code
from cortex_m_nn.ops.library import define_operator


def _fake(
    input: torch.Tensor, scale: float, zero_point: int, permutation: list[int], dtype: int
) -> torch.Tensor:
    shape = [input.shape[d] for d in permutation] if permutation else list(input.shape)
    return input.new_empty(shape, dtype=dtype_of_code(dtype))


@define_operator(
    "quantize", "Tensor input, float scale, int zero_point, int[] permutation, int dtype", _fake
)
def quantize(
    input: torch.Tensor, scale: float, zero_point: int, permutation: list[int], dtype: int
) -> torch.Tensor:
    """Reference: q = clamp(round_half_even(x * (1/scale)) + zero_point, qmin, qmax)."""
    out_dtype = dtype_of_code(dtype)
    if out_dtype is torch.int16 and zero_point != 0:
        raise ValueError(f"int16 activations have zero point 0, got {zero_point}")
    x = input.to(torch.float32)
    if permutation:
        x = x.permute(permutation)
    inv_scale = 1.0 / scale
    q = torch.round(x * inv_scale) + zero_point
    return q.clamp(*RANGES[out_dtype]).to(out_dtype).contiguous()
