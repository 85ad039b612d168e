"""``cortex_m_nn::resize``: nearest and bilinear upsampling of an int8 NHWC tensor (our kernel).

CMSIS-NN has no resize kernel. The output shares the input's scale and zero point, so no
requantization happens: nearest copies bytes, bilinear interpolates the int8 values themselves
(the weights of each output sum to exactly ``ONE * ONE``, so the zero point cancels out).

Where each output row and column reads from is decided at compile time, reproducing PyTorch's
CPU index arithmetic (``ATen/native/UpSample.h``: float32 scales, ``floorf``) in
:func:`nearest_table` and :func:`bilinear_table`; the ``.pte`` carries the two tables as int16
constants (``out_h + out_w`` entries for nearest, three times that for bilinear: a few hundred
bytes of flash). That is what makes nearest bit identical to PyTorch without any float
arithmetic on the target, and it keeps the kernel free of divisions.

Kernel contract (``op_resize.cpp``)::

    input    int8[N, H, W, C]         channels-last
    rows     int16[out_h] or [out_h, 3]
    columns  int16[out_w] or [out_w, 3]
    mode     RESIZE_NEAREST (0): tables [out] of source indices
             RESIZE_BILINEAR (1): tables [out, 3] of (i0, i1, w), 0 <= w <= ONE
    out      int8[N, out_h, out_w, C]

    nearest:  out[n, oy, ox, c] = in[n, rows[oy], columns[ox], c]
    bilinear: (y0, y1, wy) = rows[oy], (x0, x1, wx) = columns[ox]
              top    = in[n, y0, x0, c] * ONE + (in[n, y0, x1, c] - in[n, y0, x0, c]) * wx
              bottom = in[n, y1, x0, c] * ONE + (in[n, y1, x1, c] - in[n, y1, x0, c]) * wx
              acc    = top * ONE + (bottom - top) * wy                (int32)
              out    = (acc + 2^(2F - 1)) >> 2F                       (round half up)

with ``F = FRACTION_BITS = 11`` and ``ONE = 2^F``. ``top * ONE + (bottom - top) * wy`` equals
``top * (ONE - wy) + bottom * wy``; every intermediate stays below 2^31 in magnitude
(``|top| <= 128 * 2^11``, ``|bottom - top| <= 255 * 2^11``, ``wy <= 2^11``), and ``acc`` is a
convex combination, so the result needs no clamp. ``>>`` is an arithmetic shift: the rounding
is half up (towards +inf) for negative values too.

Against float PyTorch on the dequantized values (PT2E's reference) the only difference is the
weights' rounding to ``1/2048`` (at most ``2^-12`` each) and the tie rule: the exact
interpolated value moves by at most ``255 * 2 * 2^-12 < 0.125``, so the int8 result is within
1 LSB, and equal whenever PyTorch's weights are multiples of ``1/2048`` (any power-of-two
``scale_factor`` without ``align_corners``) and no tie occurs.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from cortex_m_nn.ops.library import define_operator

RESIZE_NEAREST = 0
RESIZE_BILINEAR = 1
#: Fraction bits of the bilinear weights.
FRACTION_BITS = 11
ONE = 1 << FRACTION_BITS
#: Table entries are int16: source indices must fit.
MAX_SIZE = 2**15 - 1


def _check(input: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor, mode: int) -> None:
    if input.dim() != 4 or input.dtype != torch.int8:
        raise ValueError(f"resize takes an int8 NHWC tensor, got {input.dtype} {list(input.shape)}")
    if mode not in (RESIZE_NEAREST, RESIZE_BILINEAR):
        raise ValueError(f"resize mode {mode} is neither nearest (0) nor bilinear (1)")
    width = 1 if mode == RESIZE_NEAREST else 3
    for table in (rows, columns):
        shape = list(table.shape)
        if table.dtype != torch.int16 or shape[1:] != ([] if width == 1 else [3]) or not shape:
            raise ValueError(f"resize mode {mode}: table {table.dtype} {shape}")


def _fake(
    input: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor, mode: int
) -> torch.Tensor:
    _check(input, rows, columns, mode)
    n, _, _, c = input.shape
    return input.new_empty((n, rows.shape[0], columns.shape[0], c), dtype=torch.int8)


def _gather(input: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    return input[:, rows.long()][:, :, columns.long()]


def _checked_indices(table: torch.Tensor, size: int, what: str) -> None:
    if table.numel() and (int(table.min()) < 0 or int(table.max()) >= size):
        raise ValueError(f"resize {what} index outside 0..{size - 1}")


@define_operator("resize", "Tensor input, Tensor rows, Tensor columns, int mode", _fake)
def resize(
    input: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor, mode: int
) -> torch.Tensor:
    """Reference of ``op_resize.cpp`` (see the module docstring)."""
    _check(input, rows, columns, mode)
    _, height, width, _ = input.shape
    if mode == RESIZE_NEAREST:
        _checked_indices(rows, height, "row")
        _checked_indices(columns, width, "column")
        return _gather(input, rows, columns).contiguous()
    _checked_indices(rows[:, :2], height, "row")
    _checked_indices(columns[:, :2], width, "column")
    for table in (rows, columns):
        if int(table[:, 2].min()) < 0 or int(table[:, 2].max()) > ONE:
            raise ValueError(f"resize weights outside 0..{ONE}")
    x = input.to(torch.int64)
    wx = columns[:, 2].to(torch.int64).view(1, 1, -1, 1)
    wy = rows[:, 2].to(torch.int64).view(1, -1, 1, 1)

    def horizontal(y: torch.Tensor) -> torch.Tensor:
        left, right = _gather(x, y, columns[:, 0]), _gather(x, y, columns[:, 1])
        return left * ONE + (right - left) * wx

    top, bottom = horizontal(rows[:, 0]), horizontal(rows[:, 1])
    acc = top * ONE + (bottom - top) * wy
    return ((acc + (1 << (2 * FRACTION_BITS - 1))) >> (2 * FRACTION_BITS)).to(torch.int8)


# -- compile time: PyTorch's source coordinates (ATen/native/UpSample.h, CPU, float32) -------


def _scale(in_size: int, out_size: int, scale: float | None) -> np.float32:
    """``compute_scales_value<float>``: 1 / scale_factor when one was given, else in / out."""
    if scale is not None and scale > 0:
        return np.float32(1.0 / scale)
    return np.float32(in_size) / np.float32(out_size)


def nearest_table(in_size: int, out_size: int, scale: float | None, exact: bool) -> torch.Tensor:
    """int16[out_size]: the source index of each output index for 'nearest' (``nearest_idx``)
    or 'nearest-exact' (``nearest_exact_idx``)."""
    ratio = _scale(in_size, out_size, scale)
    indices = []
    for o in range(out_size):
        if exact:  # floorf((o + 0.5) * scale): a double product, rounded to float for floorf
            source = math.floor(np.float32((o + 0.5) * float(ratio)))
        elif out_size == in_size:
            source = o
        elif out_size == 2 * in_size:
            source = o >> 1
        else:  # floorf(o * scale) in float32
            source = math.floor(np.float32(o) * ratio)
        indices.append(min(int(source), in_size - 1))
    return torch.tensor(indices, dtype=torch.int16)


def bilinear_table(
    in_size: int, out_size: int, align_corners: bool, scale: float | None
) -> torch.Tensor:
    """int16[out_size, 3]: (i0, i1, weight of i1 in 1/ONE) per output index, from PyTorch's
    ``area_pixel_compute_source_index`` and ``guard_index_and_lambda`` in float32."""
    if align_corners:
        ratio = (
            np.float32(in_size - 1) / np.float32(out_size - 1) if out_size > 1 else np.float32(0)
        )
    else:
        ratio = _scale(in_size, out_size, scale)
    rows = []
    for o in range(out_size):
        if out_size == in_size:
            rows.append((o, o, 0))
            continue
        if align_corners:
            real = ratio * np.float32(o)
        else:
            real = max(ratio * (np.float32(o) + np.float32(0.5)) - np.float32(0.5), np.float32(0))
        i0 = min(math.floor(real), in_size - 1)
        lam = min(max(real - np.float32(i0), np.float32(0)), np.float32(1))
        i1 = i0 + (1 if i0 < in_size - 1 else 0)
        rows.append((i0, i1, math.floor(float(lam) * ONE + 0.5)))  # ties up; exact in double
    return torch.tensor(rows, dtype=torch.int16).reshape(out_size, 3)
