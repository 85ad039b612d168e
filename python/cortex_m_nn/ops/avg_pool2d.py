"""``cortex_m_nn::avg_pool2d``: int8 NHWC average pooling (same scale and zero point in/out).

Reference for ``arm_avgpool_s8``: each output is the sum of the window's in-bounds inputs
divided by their count (padding is never counted), rounded half away from zero
(C: ``sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count`` with truncating
division), then clamped to ``[activation_min, activation_max]``. ``padding`` is
``[pad_h, pad_w]`` on both sides; the output size follows PyTorch (floor mode). A window
lying entirely in the padding is an error in CMSIS-NN and here.
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.conv2d import output_size, patches
from cortex_m_nn.ops.library import define_operator


def _check(kernel_size: list[int], stride: list[int], padding: list[int]) -> None:
    for name, value in (("kernel_size", kernel_size), ("stride", stride), ("padding", padding)):
        if len(value) != 2:
            raise ValueError(f"{name} must have two entries (h, w), got {list(value)}")
    if min(*kernel_size, *stride) < 1 or min(padding) < 0:
        raise ValueError(f"invalid kernel_size {kernel_size}, stride {stride}, padding {padding}")


def _fake(
    input: torch.Tensor,
    kernel_size: list[int],
    stride: list[int],
    padding: list[int],
    activation_min: int,
    activation_max: int,
) -> torch.Tensor:
    n, h, w, c = input.shape
    oh = output_size(h, kernel_size[0], stride[0], padding[0], 1)
    ow = output_size(w, kernel_size[1], stride[1], padding[1], 1)
    return input.new_empty((n, oh, ow, c), dtype=torch.int8)


@define_operator(
    "avg_pool2d",
    "Tensor input, int[] kernel_size, int[] stride, int[] padding, int activation_min,"
    " int activation_max, int scratch_bytes",
    _fake,
    scratch=True,
)
def avg_pool2d(
    input: torch.Tensor,
    kernel_size: list[int],
    stride: list[int],
    padding: list[int],
    activation_min: int,
    activation_max: int,
) -> torch.Tensor:
    """Reference ``arm_avgpool_s8`` on an NHWC int8 tensor."""
    _check(kernel_size, stride, padding)
    if input.dim() != 4:
        raise ValueError(f"expected a 4-D NHWC input, got {tuple(input.shape)}")
    kernel = (kernel_size[0], kernel_size[1])
    windows = patches(input.to(torch.int64), kernel, stride, padding, [1, 1])
    total = windows.sum(dim=(-2, -1))
    valid = torch.ones((1, *input.shape[1:3], 1), dtype=torch.int64)
    count = patches(valid, kernel, stride, padding, [1, 1]).sum(dim=(-2, -1))
    if bool((count == 0).any()):
        raise ValueError("a pooling window lies entirely in the padding")
    half = count // 2
    rounded = torch.where(total > 0, total + half, total - half)
    result = torch.div(rounded, count, rounding_mode="trunc")
    return result.clamp(activation_min, activation_max).to(torch.int8)
