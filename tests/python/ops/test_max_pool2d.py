"""``cortex_m_nn::max_pool2d`` against an explicit loop transcribing arm_max_pool_s8, and
against PyTorch's own float max pool."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.max_pool2d import max_pool2d

OP = torch.ops.cortex_m_nn.max_pool2d


def extent(size: int, kernel: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """PyTorch's documented output size: floor or ceil of (size + 2 pad - kernel) / stride + 1,
    with the last window starting inside the input or its left padding."""
    rounding = math.ceil if ceil_mode else math.floor
    out = rounding((size + 2 * pad - kernel) / stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def expected(
    x: torch.Tensor,
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    ceil_mode: bool,
    act_min: int,
    act_max: int,
) -> torch.Tensor:
    n, h, w, c = x.shape
    oh = extent(h, kernel[0], stride[0], padding[0], ceil_mode)
    ow = extent(w, kernel[1], stride[1], padding[1], ceil_mode)
    data = x.tolist()
    out = torch.empty((n, oh, ow, c), dtype=torch.int8)
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                base_y, base_x = oy * stride[0] - padding[0], ox * stride[1] - padding[1]
                for ch in range(c):
                    values = [
                        data[b][y][xx][ch]
                        for y in range(max(0, base_y), min(h, base_y + kernel[0]))
                        for xx in range(max(0, base_x), min(w, base_x + kernel[1]))
                    ]
                    out[b, oy, ox, ch] = min(max(max(values), act_min), act_max)
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple:
    n, h, w, c = (
        draw(st.integers(1, 2)),
        draw(st.integers(1, 9)),
        draw(st.integers(1, 9)),
        draw(st.integers(1, 6)),
    )
    kernel = [draw(st.integers(1, 4)), draw(st.integers(1, 4))]
    stride = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    padding = [draw(st.integers(0, kernel[0] // 2)), draw(st.integers(0, kernel[1] // 2))]
    ceil_mode = draw(st.booleans())
    assume(h + 2 * padding[0] >= kernel[0] and w + 2 * padding[1] >= kernel[1])
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    low, high = draw(st.sampled_from([(-128, 128), (-128, -120), (120, 128), (-2, 3)]))
    x = torch.randint(low, high, (n, h, w, c), generator=gen, dtype=torch.int8)
    act_min = draw(st.integers(-128, 127))
    return x, kernel, stride, padding, ceil_mode, act_min, draw(st.integers(act_min, 127))


@settings(max_examples=100, deadline=None)
@given(cases())
def test_max_pool2d_matches_independent(case: tuple) -> None:
    assert torch.equal(max_pool2d(*case), expected(*case))


@settings(max_examples=60, deadline=None)
@given(cases())
def test_max_pool2d_matches_pytorch_without_clamp(case: tuple) -> None:
    x, kernel, stride, padding, ceil_mode, _, _ = case
    ours = max_pool2d(x, kernel, stride, padding, ceil_mode, -128, 127)
    theirs = torch.nn.functional.max_pool2d(
        x.permute(0, 3, 1, 2).float(), kernel, stride, padding, ceil_mode=ceil_mode
    )
    assert torch.equal(ours, theirs.permute(0, 2, 3, 1).to(torch.int8))


def test_padding_never_wins() -> None:
    x = torch.full((1, 2, 2, 1), -128, dtype=torch.int8)
    assert (max_pool2d(x, [3, 3], [1, 1], [1, 1], False, -128, 127) == -128).all()


def test_activation_range_clamps() -> None:
    x = torch.tensor([-100, -3, 5, 90], dtype=torch.int8).reshape(1, 2, 2, 1)
    got = max_pool2d(x, [1, 1], [1, 1], [0, 0], False, -10, 50).reshape(-1).tolist()
    assert got == [-10, -3, 5, 50]


def test_all_padding_window_is_an_error() -> None:
    with pytest.raises(ValueError, match="padding"):
        max_pool2d(torch.zeros((1, 2, 2, 1), dtype=torch.int8), [1, 1], [1, 1], [1, 1], False, 0, 1)


@pytest.mark.parametrize(
    "arguments",
    [([2], [1, 1], [0, 0]), ([2, 2], [0, 1], [0, 0]), ([2, 2], [1, 1], [-1, 0])],
)
def test_invalid_arguments(arguments: tuple) -> None:
    with pytest.raises(ValueError):
        max_pool2d(torch.zeros((1, 4, 4, 1), dtype=torch.int8), *arguments, False, -128, 127)


def test_max_pool2d_functional_out_and_fake() -> None:
    x = torch.randint(-128, 128, (1, 5, 7, 3), dtype=torch.int8)
    args = ([3, 2], [2, 2], [1, 1], True, -100, 100)
    out = OP(x, *args)
    assert torch.equal(out, expected(x, *args))
    buffer = torch.empty_like(out)
    torch.ops.cortex_m_nn.max_pool2d.out(x, *args, out=buffer)
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = OP(torch.empty((2, 5, 7, 3), dtype=torch.int8), *args)
    assert fake.shape == (2, 3, 4, 3) and fake.dtype == torch.int8
