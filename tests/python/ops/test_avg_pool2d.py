"""``cortex_m_nn::avg_pool2d`` against an explicit loop transcribing arm_avgpool_s8."""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.avg_pool2d import avg_pool2d

OP = torch.ops.cortex_m_nn.avg_pool2d


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def expected(
    x: torch.Tensor,
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    act_min: int,
    act_max: int,
) -> torch.Tensor:
    n, h, w, c = x.shape
    oh = (h + 2 * padding[0] - kernel[0]) // stride[0] + 1
    ow = (w + 2 * padding[1] - kernel[1]) // stride[1] + 1
    data = x.tolist()
    out = torch.empty((n, oh, ow, c), dtype=torch.int8)
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    total = count = 0
                    y0, x0 = oy * stride[0] - padding[0], ox * stride[1] - padding[1]
                    for ky in range(y0, y0 + kernel[0]):
                        for kx in range(x0, x0 + kernel[1]):
                            if 0 <= ky < h and 0 <= kx < w:
                                total += data[b][ky][kx][ch]
                                count += 1
                    half = count // 2
                    avg = c_div(total + half, count) if total > 0 else c_div(total - half, count)
                    out[b, oy, ox, ch] = min(max(avg, act_min), act_max)
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple:
    n, h, w, c = (
        draw(st.integers(1, 2)),
        draw(st.integers(1, 8)),
        draw(st.integers(1, 8)),
        draw(st.integers(1, 5)),
    )
    kernel = [draw(st.integers(1, 4)), draw(st.integers(1, 4))]
    stride = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    padding = [draw(st.integers(0, kernel[0] // 2)), draw(st.integers(0, kernel[1] // 2))]
    assume(h + 2 * padding[0] >= kernel[0] and w + 2 * padding[1] >= kernel[1])
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    low, high = draw(st.sampled_from([(-128, 128), (-128, -100), (100, 128), (-3, 4)]))
    x = torch.randint(low, high, (n, h, w, c), generator=gen, dtype=torch.int8)
    act_min = draw(st.integers(-128, 0))
    return x, kernel, stride, padding, act_min, draw(st.integers(act_min, 127))


@settings(max_examples=80, deadline=None)
@given(cases())
def test_avg_pool2d_matches_independent(case: tuple) -> None:
    assert torch.equal(avg_pool2d(*case), expected(*case))


def test_avg_pool2d_rounds_half_away_from_zero() -> None:
    x = torch.tensor([1, 2, -1, -2, 3, 4, -3, -4, 0, 1], dtype=torch.int8).reshape(1, 1, 10, 1)
    got = avg_pool2d(x, [1, 2], [1, 2], [0, 0], -128, 127).reshape(-1).tolist()
    # means 1.5, -1.5, 3.5, -3.5, 0.5 → 2, -2, 4, -4, 1
    assert got == [2, -2, 4, -4, 1]


def test_avg_pool2d_divides_by_valid_count() -> None:
    x = torch.full((1, 2, 2, 1), 100, dtype=torch.int8)
    got = avg_pool2d(x, [3, 3], [1, 1], [1, 1], -128, 127)
    assert (got == 100).all()  # padding is not counted, so no dilution toward zero


def test_avg_pool2d_all_padding_window_is_an_error() -> None:
    x = torch.zeros((1, 2, 2, 1), dtype=torch.int8)
    with pytest.raises(ValueError):
        avg_pool2d(x, [1, 1], [1, 1], [1, 1], -128, 127)


def test_avg_pool2d_functional_out_and_fake() -> None:
    x = torch.randint(-128, 128, (1, 5, 7, 3), dtype=torch.int8)
    args = ([2, 3], [2, 2], [1, 1], -100, 100)
    out, scratch = OP(x, *args, 12)
    assert torch.equal(out, expected(x, *args)) and scratch.shape == (12,)
    assert scratch.dtype == torch.int8
    buffer, scratch_buffer = torch.empty_like(out), torch.empty(12, dtype=torch.int8)
    torch.ops.cortex_m_nn.avg_pool2d.out(x, *args, 12, out=buffer, scratch=scratch_buffer)
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake_out, fake_scratch = OP(torch.empty((2, 5, 7, 3), dtype=torch.int8), *args, 12)
    assert fake_out.shape == (2, 3, 4, 3) and fake_out.dtype == torch.int8
    assert fake_scratch.shape == (12,)
