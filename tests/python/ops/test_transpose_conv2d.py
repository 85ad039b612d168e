"""``cortex_m_nn::transpose_conv2d`` against a plain-int scatter-add, and its supported domain
against a Python transliteration of CMSIS-NN's two transposed-convolution algorithms."""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.arithmetic import Rounding, use_rounding
from cortex_m_nn.ops.transpose_conv2d import transpose_conv2d, unsupported_reason

from .independent import ref_requantize, wrap32

OP = torch.ops.cortex_m_nn.transpose_conv2d


def out_extent(size: int, k: int, s: int, p: int, op: int) -> int:
    return (size - 1) * s - 2 * p + k + op


def scatter_add(case: dict) -> list:
    """The definition: every input pixel adds its products onto the pixels it reaches."""
    x, w = case["input"].tolist(), case["weight"].tolist()
    (sh, sw), (ph, pw), (oph, opw) = case["stride"], case["padding"], case["output_padding"]
    n, h, wd = len(x), len(x[0]), len(x[0][0])
    c_out, kh, kw = len(w), len(w[0]), len(w[0][0])
    oh, ow = out_extent(h, kh, sh, ph, oph), out_extent(wd, kw, sw, pw, opw)
    bias = case["bias"].tolist()
    acc = [[[list(bias) for _ in range(ow)] for _ in range(oh)] for _ in range(n)]
    for b in range(n):
        for iy in range(h):
            for ix in range(wd):
                pixel = [v + case["input_offset"] for v in x[b][iy][ix]]
                for ky in range(kh):
                    for kx in range(kw):
                        oy, ox = iy * sh + ky - ph, ix * sw + kx - pw
                        if 0 <= oy < oh and 0 <= ox < ow:
                            for o in range(c_out):
                                acc[b][oy][ox][o] += sum(
                                    a * c for a, c in zip(pixel, w[o][ky][kx], strict=True)
                                )
    return acc


def requantized(case: dict, acc: list, single: bool = False) -> torch.Tensor:
    mults, shifts = case["multipliers"].tolist(), case["shifts"].tolist()
    low, high = case["activation_min"], case["activation_max"]

    def one(a: int, o: int) -> int:
        y = ref_requantize(wrap32(a), mults[o], shifts[o], single) + case["output_offset"]
        return min(max(y, low), high)

    out = [[[[one(a, o) for o, a in enumerate(px)] for px in row] for row in img] for img in acc]
    return torch.tensor(out, dtype=torch.int8)


def call(case: dict) -> torch.Tensor:
    return transpose_conv2d(*case.values(), 4)


def supported(case: dict) -> bool:
    _, h, w, c_in = case["input"].shape
    _, kh, kw, _ = case["weight"].shape
    return (
        unsupported_reason(
            (h, w), c_in, (kh, kw), case["stride"], case["padding"], case["output_padding"]
        )
        is None
    )


@st.composite
def cases(draw: st.DrawFn, channels: tuple[int, int] = (1, 5), max_stride: int = 3) -> dict:
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    c_in, c_out = draw(st.integers(*channels)), draw(st.integers(1, 4))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    stride = [draw(st.integers(1, max_stride)), draw(st.integers(1, max_stride))]
    padding = [draw(st.integers(0, 3)), draw(st.integers(0, 3))]
    output_padding = [draw(st.integers(0, stride[0] - 1)), draw(st.integers(0, stride[1] - 1))]
    assume(out_extent(h, kh, stride[0], padding[0], output_padding[0]) > 0)
    assume(out_extent(w, kw, stride[1], padding[1], output_padding[1]) > 0)
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    act_min = draw(st.integers(-128, 0))
    return {
        "input": torch.randint(-128, 128, (n, h, w, c_in), generator=gen, dtype=torch.int8),
        "weight": torch.randint(-127, 128, (c_out, kh, kw, c_in), generator=gen, dtype=torch.int8),
        "bias": torch.randint(-(2**16), 2**16, (c_out,), generator=gen, dtype=torch.int32),
        "multipliers": torch.randint(2**30, 2**31 - 1, (c_out,), generator=gen, dtype=torch.int32),
        "shifts": torch.randint(-14, 2, (c_out,), generator=gen, dtype=torch.int32),
        "stride": stride,
        "padding": padding,
        "output_padding": output_padding,
        "input_offset": -draw(st.integers(-128, 127)),
        "output_offset": draw(st.integers(-128, 127)),
        "activation_min": act_min,
        "activation_max": draw(st.integers(act_min, 127)),
    }


@settings(max_examples=60, deadline=None)
@given(cases())
def test_transpose_conv2d_matches_scatter_add(case: dict) -> None:
    assume(supported(case))
    assert torch.equal(call(case), requantized(case, scatter_add(case)))


@settings(max_examples=20, deadline=None)
@given(cases())
def test_transpose_conv2d_single_rounding(case: dict) -> None:
    assume(supported(case))
    with use_rounding(Rounding.SINGLE):
        got = call(case)
    assert torch.equal(got, requantized(case, scatter_add(case), single=True))


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


def fixed_case(**changes: object) -> dict:
    gen = torch.Generator().manual_seed(3)
    case = {
        "input": torch.randint(-128, 128, (1, 3, 4, 2), generator=gen, dtype=torch.int8),
        "weight": torch.randint(-127, 128, (3, 3, 3, 2), generator=gen, dtype=torch.int8),
        "bias": torch.tensor([0, 5000, -(2**20)], dtype=torch.int32),
        "multipliers": torch.tensor([2**30, 1518500250, 2**31 - 1], dtype=torch.int32),
        "shifts": torch.tensor([-8, -9, 0], dtype=torch.int32),
        "stride": [2, 2],
        "padding": [1, 1],
        "output_padding": [1, 1],
        "input_offset": 4,
        "output_offset": -2,
        "activation_min": -128,
        "activation_max": 127,
    }
    case.update(changes)
    return case


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


def test_saturation_clamp_and_padding_rows() -> None:
    case = fixed_case()
    out = call(case)
    assert out.shape == (1, 6, 8, 3)
    assert torch.equal(out, requantized(case, scatter_add(case)))
    assert (out[..., 2] == -128).all()  # large negative bias saturates


def test_zero_point_input_gives_bias_only() -> None:
    case = fixed_case(
        input=torch.full((1, 3, 4, 2), -4, dtype=torch.int8),
        multipliers=torch.tensor([2**30] * 3, dtype=torch.int32),
        shifts=torch.tensor([0, 0, 0], dtype=torch.int32),
        bias=torch.tensor([20, -40, 60], dtype=torch.int32),
        output_offset=0,
    )
    assert call(case).reshape(-1, 3).unique(dim=0).tolist() == [[10, -20, 30]]


def test_functional_out_and_fake() -> None:
    case = fixed_case()
    args = list(case.values())
    out, scratch = OP(*args, 8, 40)
    assert torch.equal(out, requantized(case, scatter_add(case)))
    assert scratch.shape == (40,) and scratch.dtype == torch.int8
    buffer, scratch_buffer = torch.empty_like(out), torch.empty(40, dtype=torch.int8)
    torch.ops.cortex_m_nn.transpose_conv2d.out(*args, 8, 40, out=buffer, scratch=scratch_buffer)
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = [
            torch.empty(a.shape, dtype=a.dtype) if isinstance(a, torch.Tensor) else a for a in args
        ]
        fake[0] = torch.empty((2, 5, 7, 2), dtype=torch.int8)
        fake_out, fake_scratch = OP(*fake, 8, 40)
    assert fake_out.shape == (2, 10, 14, 3) and fake_scratch.shape == (40,)


def test_rejects_channel_mismatch() -> None:
    with pytest.raises(ValueError, match="channels"):
        call(fixed_case(input=torch.zeros((1, 3, 4, 5), dtype=torch.int8)))
