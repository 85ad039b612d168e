"""``cortex_m_nn::avg_pool2d``: int8 NHWC average pooling (same scale and zero point in/out).

Reference for ``arm_avgpool_s8``: each output is the sum of the window's in-bounds inputs
divided by their count (padding is never counted), rounded half away from zero
(C: ``sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count`` with truncating
division), then clamped to ``[activation_min, activation_max]``. ``padding`` is
``[pad_h, pad_w]`` on both sides; the output size follows PyTorch, floor mode or
``ceil_mode`` (the last windows then run past the input and count what they cover:
PyTorch's ``count_include_pad=False``). A window lying entirely in the padding is an error in
CMSIS-NN and here.

int16 is the other case (``arm_avgpool_s16``: the same arithmetic, an int32 sum, saturating
on DSP, so windows of fewer than 65,536 elements keep it exact).
"""

from __future__ import annotations

from typing import Any

import torch

from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.params import PoolParams


def _fake(input: torch.Tensor, *arguments: Any) -> torch.Tensor:
    oh, ow = PoolParams.of("avg_pool2d", arguments).output_hw(input)
    return input.new_empty((input.shape[0], oh, ow, input.shape[3]), dtype=_dtype(input))


def _dtype(input: torch.Tensor) -> torch.dtype:
    return torch.int16 if input.dtype is torch.int16 else torch.int8


@define_operator(
    "avg_pool2d",
    "Tensor input, int[] kernel_size, int[] stride, int[] padding, bool ceil_mode,"
    " int activation_min, int activation_max, int scratch_bytes",
    _fake,
    scratch=True,
)
def avg_pool2d(input: torch.Tensor, *arguments: Any) -> torch.Tensor:
    """Reference ``arm_avgpool_s8`` on an NHWC int8 tensor; ``arguments`` as the schema
    lists them after the input."""
    params = PoolParams.of("avg_pool2d", arguments)
    kh, kw = params.kernel_size
    if input.dtype is torch.int16 and kh * kw >= 65536:
        raise ValueError("an int16 pooling window of 65,536 elements or more could overflow")
    total = params.windows(input.to(torch.int64), 0).sum(dim=(-2, -1))
    valid = torch.ones((1, *input.shape[1:3], 1), dtype=torch.int64)
    count = params.windows(valid, 0).sum(dim=(-2, -1))
    if bool((count == 0).any()):
        raise ValueError("a pooling window lies entirely in the padding")
    half = count // 2
    rounded = torch.where(total > 0, total + half, total - half)
    return params.clamp(torch.div(rounded, count, rounding_mode="trunc"), _dtype(input))
