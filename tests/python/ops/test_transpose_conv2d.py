"""``cortex_m_nn::transpose_conv2d``'s supported domain against a Python transliteration of
CMSIS-NN's two transposed-convolution algorithms. Its arithmetic is in the convolution table
(test_convolutions.py), against the plain-int scatter-add used here too."""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import assume, given, settings

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.transpose_conv2d import unsupported_reason

from .test_convolutions import out_extent, scatter_add, transpose_call, transpose_cases
from .test_convolutions import transpose_fixed as fixed_case
from .test_convolutions import transpose_supported as supported

call = transpose_call
cases = transpose_cases


# -- CMSIS-NN's algorithms, transliterated from the C (scalar path), to check the domain ------


class OutOfBounds(Exception):
    pass


def cmsis_rolling_buffer(case: dict) -> list:
    """arm_transpose_conv_s8's int32 results in the order it writes them (one list per row)."""
    x, w, bias = case["input"].tolist(), case["weight"].tolist(), case["bias"].tolist()
    (sy, sx), (py, px) = case["stride"], case["padding"]
    n, h, wd, c_in = case["input"].shape
    c_out, kh, kw, _ = case["weight"].shape
    oh = out_extent(h, kh, sy, py, case["output_padding"][0])
    ow = out_extent(wd, kw, sx, px, case["output_padding"][1])
    buf_x = ((wd - 1) * sx + max(kw, sx)) * c_out
    buf_size = max(kh, sy) * buf_x
    images = []
    for b in range(n):
        buf = [bias[i % c_out] for i in range(buf_size)]
        rows, buf_row = [], 0

        def flush(start: int, rows: list = rows, buf: list = buf) -> None:
            begin = start + c_out * px
            if begin + ow * c_out > buf_size:
                raise OutOfBounds("row read past the buffer")
            rows.append(buf[begin : begin + ow * c_out])

        for j in range(h):
            skip_top = max(0, py - j * sy)
            skip_bottom = max(0, (j * sy + kh) - (py + oh) - 1)
            for ix in range(wd):
                pixel = [v + case["input_offset"] for v in x[b][j][ix]]
                for o in range(c_out):
                    for i_row in range(kh - skip_top - skip_bottom):
                        row = (buf_row + i_row * buf_x) % buf_size
                        for kx in range(kw):
                            taps = w[o][skip_top + i_row][kx]
                            total = sum(a * c for a, c in zip(pixel, taps, strict=True))
                            buf[row + (ix * sx + kx) * c_out + o] += total
            flushed = max(0, (j + 1) * sy - py) - max(0, j * sy - py)
            for _ in range(flushed):
                flush(buf_row)
                buf[buf_row : buf_row + buf_x] = [bias[i % c_out] for i in range(buf_x)]
                buf_row = (buf_row + buf_x) % buf_size
        for y in range(kh - sy):
            if py <= h * sy + y < py + oh:
                flush(buf_row)
            buf_row = (buf_row + buf_x) % buf_size
        if len(rows) > oh:
            raise OutOfBounds(f"{len(rows)} rows written to an output of {oh}")
        images.append([[row[i : i + c_out] for i in range(0, len(row), c_out)] for row in rows])
    return images


def cmsis_reverse_conv(case: dict) -> list:
    """The wrapper's reverse-conv path: arm_convolve_s8 over the upsampled input, filter flipped."""
    x, w, bias = case["input"].tolist(), case["weight"].tolist(), case["bias"].tolist()
    (sy, sx), (py, px) = case["stride"], case["padding"]
    n, h, wd, _ = case["input"].shape
    c_out, kh, kw, _ = case["weight"].shape
    pad_y, pad_x = kh - 1 - py, kw - 1 - px
    if pad_y < 0 or pad_x < 0:
        raise OutOfBounds("negative padding read as uint16")
    oh = out_extent(h, kh, sy, py, case["output_padding"][0])
    ow = out_extent(wd, kw, sx, px, case["output_padding"][1])
    images = []
    for b in range(n):
        image = []
        for oy in range(oh):
            row = []
            for ox in range(ow):
                acc = list(bias)
                for ky in range(kh):
                    for kx in range(kw):
                        uy, ux = oy - pad_y + ky, ox - pad_x + kx
                        if not (0 <= uy < h * sy and 0 <= ux < wd * sx):
                            continue
                        if uy % sy or ux % sx:
                            continue  # an inserted zero (the input zero point)
                        pixel = [v + case["input_offset"] for v in x[b][uy // sy][ux // sx]]
                        for o in range(c_out):
                            taps = w[o][kh - 1 - ky][kw - 1 - kx]
                            acc[o] += sum(a * c for a, c in zip(pixel, taps, strict=True))
                row.append(acc)
            image.append(row)
        images.append(image)
    return images


def cmsis_wrapper(case: dict) -> list:
    c_in = case["input"].shape[3]
    if max(case["stride"]) <= 2 and c_in > 16:
        return cmsis_reverse_conv(case)
    return cmsis_rolling_buffer(case)


@settings(max_examples=150, deadline=None)
@given(cases())
def test_supported_domain_is_where_cmsis_nn_computes_the_definition(case: dict) -> None:
    assume(supported(case))
    assert cmsis_rolling_buffer(case) == scatter_add(case)


@settings(max_examples=25, deadline=None)
@given(cases(channels=(17, 20), max_stride=2))
def test_reverse_conv_path_agrees_where_supported(case: dict) -> None:
    assume(supported(case))
    assert cmsis_wrapper(case) == scatter_add(case)


@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "output_padding"),
    [(3, 2, 1, 1), (4, 2, 1, 0), (2, 2, 0, 0), (3, 1, 1, 0), (1, 2, 0, 1), (5, 1, 2, 0)],
)
def test_common_pytorch_layers_are_supported(kernel, stride, padding, output_padding) -> None:
    for c_in in (4, 32):  # rolling-buffer and reverse-conv paths
        reason = unsupported_reason(
            (5, 5), c_in, (kernel, kernel), [stride] * 2, [padding] * 2, [output_padding] * 2
        )
        assert reason is None, reason


@pytest.mark.parametrize(
    ("height", "kernel", "stride", "padding", "output_padding", "words"),
    [
        (6, 1, 2, 0, 0, "stride 2 + padding 0 > kernel 1"),  # would write one row too many
        (6, 3, 2, 0, 1, "output_padding 1 > padding 0"),  # a row/column beyond the buffer
        (6, 3, 1, 3, 0, "stride 1 + padding 3 > kernel 3"),  # rows flushed past the output
        (1, 5, 1, 2, 0, "padding 2 > input height * stride"),  # leftover rows misaddressed
    ],
)
def test_refusals_name_the_reason_and_cmsis_nn_really_differs(
    height, kernel, stride, padding, output_padding, words
) -> None:
    case = fixed_case(
        input=torch.randint(-128, 128, (1, height, 6, 2), dtype=torch.int8),
        weight=torch.randint(-127, 128, (3, kernel, kernel, 2), dtype=torch.int8),
        stride=[stride] * 2,
        padding=[padding] * 2,
        output_padding=[output_padding] * 2,
    )
    with pytest.raises(ValueError, match=re.escape(words)):
        call(case)
    try:
        result = cmsis_rolling_buffer(case)
    except OutOfBounds:
        return
    assert result != scatter_add(case)


def test_reverse_conv_path_refuses_padding_beyond_the_kernel() -> None:
    reason = unsupported_reason((5, 5), 32, (2, 2), [2, 2], [2, 2], [1, 1])
    assert reason is not None and "reverse-conv" in reason
