"""``cortex_m_nn::quantize``: float → int8 at the graph boundary, with the layout change folded in.

Rounds exactly as PT2E's ``quantize_per_tensor`` does (``round(x * (1 / scale))``, half to
even, in float32), so the lowered graph's input matches the PT2E reference bit for bit.
``permutation`` reorders the dimensions on the way in (NCHW → NHWC is ``[0, 2, 3, 1]``);
an empty list keeps the order.
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.library import define_operator


def _fake(
    input: torch.Tensor, scale: float, zero_point: int, permutation: list[int]
) -> torch.Tensor:
    shape = [input.shape[d] for d in permutation] if permutation else list(input.shape)
    return input.new_empty(shape, dtype=torch.int8)


@define_operator("quantize", "Tensor input, float scale, int zero_point, int[] permutation", _fake)
def quantize(
    input: torch.Tensor, scale: float, zero_point: int, permutation: list[int]
) -> torch.Tensor:
    """Reference: int8 = clamp(round_half_even(x * (1/scale)) + zero_point, -128, 127)."""
    x = input.to(torch.float32)
    if permutation:
        x = x.permute(permutation)
    inv_scale = 1.0 / scale
    q = torch.round(x * inv_scale) + zero_point
    return q.clamp(-128, 127).to(torch.int8).contiguous()
