"""Broadcasting of the binary element-wise operators (add, mul, minimum, maximum).

The operators take two int8 tensors of the same rank (at most 4) whose shapes agree in
every dimension or are 1 in one of them; the output has the broadcast shape. Since each
output element depends only on the two input elements it pairs, any order of evaluation
gives the same bytes, so the references broadcast with torch and the kernels may loop.

The lowering hands the operators *collapsed* shapes (:func:`collapse`): no dimension of
output extent 1 (except a lone ``[1]``), and no two neighbouring dimensions broadcast the
same way. The common cases then look like this (stored, channels-last):

=================================  ==================  ============
model (NCHW, logical)              stored (NHWC)       collapsed
=================================  ==================  ============
``[1,C,H,W] ⊙ [1,C,H,W]``          same                ``[L] ⊙ [L]``
``[1,C,H,W] ⊙ [1,C,1,1]``          ``[1,1,1,C]``       ``[HW,C] ⊙ [1,C]``
``[1,C,H,W] ⊙ [1,1,1,1]``          ``[1,1,1,1]``       ``[L] ⊙ [1]``
``[1,C,H,W] ⊙ [1,1,H,W]``          ``[1,H,W,1]``       ``[HW,C] ⊙ [HW,1]``
=================================  ==================  ============

How a kernel calls CMSIS-NN (pad both input shapes and the output shape on the left with 1
to four dimensions ``[d0, d1, d2, d3]``):

* ``arm_elementwise_add_s8`` / ``arm_elementwise_mul_s8`` have no broadcasting (one
  ``block_size``). For every output row ``(i0, i1, i2)`` the row of each input starts at
  ``sum_d (extent_d == 1 ? 0 : i_d) * stride_d`` (row-major strides of that input). When
  both inputs have ``d3`` equal to the output's, call once with ``block_size = d3``;
  otherwise the input with ``d3 == 1`` is one value for the whole row: replicate it into
  a small stack buffer (e.g. 64 bytes) and call in chunks of at most that many elements.
* ``arm_maximum_s8`` / ``arm_minimum_s8`` broadcast themselves: pass the padded shapes as
  ``cmsis_nn_dims {n = d0, h = d1, w = d2, c = d3}`` for input 1, input 2 and the output,
  and call once. Their pointer walk is wrong for one pattern only — an input of extent 1
  in ``w`` and ``c`` but not in ``h``, against an input with ``w > 1`` — which a collapsed
  pair never has; :func:`cmsis_minmax_supported` checks it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

#: Rank the binary operators accept (CMSIS-NN's ``cmsis_nn_dims`` has four dimensions).
MAX_RANK = 4


def broadcast_shape(name: str, shape1: Sequence[int], shape2: Sequence[int]) -> list[int]:
    """The output shape of ``name`` on two stored shapes; ValueError naming the fix otherwise."""
    shape1, shape2 = list(shape1), list(shape2)
    if len(shape1) != len(shape2) or len(shape1) > MAX_RANK:
        raise ValueError(
            f"{name} needs inputs of the same rank <= {MAX_RANK}, got {shape1} and {shape2} "
            "(the lowering collapses shapes first)"
        )
    if any(a != b and 1 not in (a, b) for a, b in zip(shape1, shape2, strict=True)):
        raise ValueError(f"{name}: shapes {shape1} and {shape2} do not broadcast")
    return [max(a, b) for a, b in zip(shape1, shape2, strict=True)]


def _kind(extent1: int, extent2: int) -> tuple[bool, bool]:
    out = max(extent1, extent2)
    return extent1 == out, extent2 == out


def collapse(
    shape1: Sequence[int], shape2: Sequence[int]
) -> tuple[list[int], list[int], list[int]]:
    """Shapes of equal rank (broadcastable) in the fewest dimensions that broadcast alike.

    Drops dimensions of output extent 1 and merges neighbours where each input is either
    full in both or 1 in both. Returns (input 1, input 2, output) shapes, each ``[1]`` at
    least. The stored bytes of every tensor are unchanged: only views differ.
    """
    merged: list[list[int]] = []
    kinds: list[tuple[bool, bool]] = []
    for a, b in zip(shape1, shape2, strict=True):
        if max(a, b) == 1:
            continue
        kind = _kind(a, b)
        if kinds and kinds[-1] == kind:
            merged[-1] = [merged[-1][0] * a, merged[-1][1] * b]
        else:
            merged.append([a, b])
            kinds.append(kind)
    if not merged:
        return [1], [1], [1]
    first = [a for a, _ in merged]
    second = [b for _, b in merged]
    return first, second, [max(a, b) for a, b in merged]


def padded(shape: Sequence[int]) -> list[int]:
    """``shape`` with leading 1s to :data:`MAX_RANK` dimensions (``n, h, w, c``)."""
    return [1] * (MAX_RANK - len(shape)) + list(shape)


def cmsis_minmax_supported(shape1: Sequence[int], shape2: Sequence[int]) -> bool:
    """Whether ``arm_maximum_s8`` / ``arm_minimum_s8`` broadcast these shapes correctly.

    Their pointer walk mis-steps when one input has ``h > 1, w == 1, c == 1`` and the other
    ``w > 1`` (found by transcribing the C loop; tests/python/ops/independent.py keeps that
    transcription). :func:`collapse` never produces that pair.
    """
    p1, p2 = padded(shape1), padded(shape2)

    def row_only(shape: list[int]) -> bool:
        return shape[1] > 1 and shape[2] == 1 and shape[3] == 1

    return not ((row_only(p1) and p2[2] > 1) or (row_only(p2) and p1[2] > 1))


def fake_output(name: str, input1: torch.Tensor, input2: torch.Tensor) -> torch.Tensor:
    """The fake (meta) result of a binary operator: int8 (int16 for int16 inputs) of the
    broadcast shape."""
    dtype = torch.int16 if input1.dtype is torch.int16 else torch.int8
    return input1.new_empty(broadcast_shape(name, input1.shape, input2.shape), dtype=dtype)
