"""``cortex_m_nn::strided_copy``: int8 elements gathered from an input at affine positions.

Our own kernel (CMSIS-NN has no general strided copy), for the data movement no view and no
``arm_transpose_s8`` expresses: a slice with a step, a select, ``expand``/``repeat``
(stride 0), ``flip`` (negative stride), ``pixel_shuffle`` of five moving dims. No arithmetic:
the bytes are copied as they are, so the result is bit exact by construction.

The input is read as its flat (contiguous) bytes ``x``. Output element ``(i_0, …, i_{r-1})``
of an output of shape ``sizes`` (1-8 dims, each ≥ 1) is::

    out[i_0, …, i_{r-1}] = x[offset + i_0 * strides[0] + … + i_{r-1} * strides[r-1]]

``strides`` are in elements and may be 0 (a broadcast) or negative (a reversal); every
position must lie inside ``x`` (checked for the first and last element of each dim, which
bound an affine map). The C kernel walks the outer dims with a counter and copies the
innermost dim with ``memmove`` when its stride is 1, ``memset`` when it is 0, else element by
element.
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.library import define_operator

#: Most output dims the kernel walks (its index counter is a fixed array).
MAX_DIMS = 8


def strided_span(sizes: list[int], strides: list[int], offset: int) -> tuple[int, int]:
    """(lowest, highest) input position the copy reads."""
    low = high = offset
    for size, stride in zip(sizes, strides, strict=True):
        reach = (size - 1) * stride
        low, high = low + min(reach, 0), high + max(reach, 0)
    return low, high


def check_strided_copy(numel: int, sizes: list[int], strides: list[int], offset: int) -> None:
    """Raise ValueError unless the copy reads only inside an input of ``numel`` elements."""
    if not 1 <= len(sizes) <= MAX_DIMS or len(strides) != len(sizes):
        raise ValueError(f"need 1-{MAX_DIMS} sizes and one stride each: {sizes}, {strides}")
    if min(sizes) < 1:
        raise ValueError(f"sizes {list(sizes)} must be positive")
    low, high = strided_span(list(sizes), list(strides), offset)
    if low < 0 or high >= numel:
        raise ValueError(f"positions {low}..{high} outside the input's {numel} elements")


def _fake(input: torch.Tensor, sizes: list[int], strides: list[int], offset: int) -> torch.Tensor:
    check_strided_copy(input.numel(), list(sizes), list(strides), offset)
    return input.new_empty(list(sizes), dtype=torch.int8)


@define_operator("strided_copy", "Tensor input, int[] sizes, int[] strides, int offset", _fake)
def strided_copy(
    input: torch.Tensor, sizes: list[int], strides: list[int], offset: int
) -> torch.Tensor:
    """Reference: gather the flat input at ``offset + Σ i_k · strides[k]``."""
    check_strided_copy(input.numel(), list(sizes), list(strides), offset)
    index = torch.full((), offset, dtype=torch.int64)
    for size, stride in zip(sizes, strides, strict=True):
        index = index.unsqueeze(-1) + stride * torch.arange(size, dtype=torch.int64)
    return input.reshape(-1)[index].to(torch.int8)
