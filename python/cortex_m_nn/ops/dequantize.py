"""``cortex_m_nn::dequantize``: int8 or int16 → float at the graph boundary, layout change
folded in.

Computes ``(q - zero_point) * scale`` in float32 like PT2E's ``dequantize_per_tensor``;
``permutation`` reorders the dimensions on the way out (NHWC → NCHW is ``[0, 3, 1, 2]``).
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.library import define_operator


def _fake(
    input: torch.Tensor, scale: float, zero_point: int, permutation: list[int]
) -> torch.Tensor:
    shape = [input.shape[d] for d in permutation] if permutation else list(input.shape)
    return input.new_empty(shape, dtype=torch.float32)


@define_operator(
    "dequantize", "Tensor input, float scale, int zero_point, int[] permutation", _fake
)
def dequantize(
    input: torch.Tensor, scale: float, zero_point: int, permutation: list[int]
) -> torch.Tensor:
    """Reference: float = (q - zero_point) * scale."""
    x = (input.to(torch.int32) - zero_point).to(torch.float32) * scale
    if permutation:
        x = x.permute(permutation)
    return x.contiguous()
