"""``cortex_m_nn::avg_pool2d`` and ``::max_pool2d`` against explicit loops transcribing
arm_avgpool_s8 and arm_max_pool_s8 (arm_avgpool_s16 and arm_max_pool_s16 compute the same on
int16; and max pool against PyTorch's own): one table, a row per operator and dtype."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.avg_pool2d import avg_pool2d
from cortex_m_nn.ops.max_pool2d import max_pool2d


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def extent(size: int, kernel: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """PyTorch's documented output size: floor or ceil of (size + 2 pad - kernel) / stride + 1,
    with the last window starting inside the input or its left padding."""
    rounding = math.ceil if ceil_mode else math.floor
    out = rounding((size + 2 * pad - kernel) / stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def pool_loop(
    x: torch.Tensor,
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    ceil_mode: bool,
    reduce: Callable[[list[int]], int],
) -> torch.Tensor:
    """Every output element: ``reduce`` of the window's values inside the input."""
    n, h, w, c = x.shape
    oh = extent(h, kernel[0], stride[0], padding[0], ceil_mode)
    ow = extent(w, kernel[1], stride[1], padding[1], ceil_mode)
    data = x.tolist()
    out = torch.empty((n, oh, ow, c), dtype=x.dtype)
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
                    out[b, oy, ox, ch] = reduce(values)
    return out


def avg_expected(x, kernel, stride, padding, ceil_mode, act_min, act_max) -> torch.Tensor:
    """arm_avgpool_s8: the sum over the valid count, rounded half away from zero, clamped."""

    def average(values: list[int]) -> int:
        total, count = sum(values), len(values)
        half = count // 2
        avg = c_div(total + half, count) if total > 0 else c_div(total - half, count)
        return min(max(avg, act_min), act_max)

    return pool_loop(x, kernel, stride, padding, ceil_mode, average)


def max_expected(x, kernel, stride, padding, ceil_mode, act_min, act_max) -> torch.Tensor:
    return pool_loop(
        x, kernel, stride, padding, ceil_mode, lambda v: min(max(max(v), act_min), act_max)
    )


@dataclass(frozen=True)
class Pool:
    """One operator of the family and the cases it is drawn from."""

    name: str
    reference: Callable[..., torch.Tensor]
    expected: Callable[..., torch.Tensor]
    #: largest height/width and channels of a random case
    size: int
    channels: int
    #: input value ranges (half-open) a random case draws from
    ranges: tuple[tuple[int, int], ...]
    #: the highest activation minimum of a random case
    act_min_high: int
    examples: int
    #: whether the operator takes ``ceil_mode`` after the padding
    ceil_mode: bool
    #: the scratch bytes its functional form takes and returns (None: no scratch)
    scratch: int | None
    #: the activations' dtype (int16: the ``_s16`` case)
    dtype: torch.dtype = torch.int8

    @property
    def op(self) -> torch._ops.OpOverloadPacket:
        return getattr(torch.ops.cortex_m_nn, self.name)

    def geometry(self, ceil_mode: bool) -> tuple:
        return (ceil_mode,) if self.ceil_mode else ()


AVG = Pool(
    "avg_pool2d", avg_pool2d, avg_expected, 8, 5, ((-128, 128), (-128, -100), (100, 128), (-3, 4)),
    0, 80, True, 12,
)  # fmt: skip
MAX = Pool(
    "max_pool2d", max_pool2d, max_expected, 9, 6, ((-128, 128), (-128, -120), (120, 128), (-2, 3)),
    127, 100, True, None,
)  # fmt: skip
AVG16 = Pool(
    "avg_pool2d", avg_pool2d, avg_expected, 8, 5,
    ((-32768, 32768), (-32768, -32000), (32000, 32768), (-3, 4)), -100, 80, True, 12, torch.int16,
)  # fmt: skip
MAX16 = Pool(
    "max_pool2d", max_pool2d, max_expected, 9, 6,
    ((-32768, 32768), (-32768, -32700), (32700, 32768), (-2, 3)), 32767, 100, True, None,
    torch.int16,
)  # fmt: skip
POOLS = [AVG, MAX, AVG16, MAX16]
TABLE = pytest.mark.parametrize(
    "pool", POOLS, ids=lambda pool: pool.name + ("-int16" if pool.dtype is torch.int16 else "")
)


@st.composite
def cases(draw: st.DrawFn, pool: Pool) -> tuple:
    n, h, w = (
        draw(st.integers(1, 2)),
        draw(st.integers(1, pool.size)),
        draw(st.integers(1, pool.size)),
    )
    c = draw(st.integers(1, pool.channels))
    kernel = [draw(st.integers(1, 4)), draw(st.integers(1, 4))]
    stride = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    padding = [draw(st.integers(0, kernel[0] // 2)), draw(st.integers(0, kernel[1] // 2))]
    ceil_mode = pool.geometry(draw(st.booleans()))
    assume(h + 2 * padding[0] >= kernel[0] and w + 2 * padding[1] >= kernel[1])
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    low, high = draw(st.sampled_from(pool.ranges))
    x = torch.randint(low, high, (n, h, w, c), generator=gen, dtype=torch.int32).to(pool.dtype)
    lowest, highest = torch.iinfo(pool.dtype).min, torch.iinfo(pool.dtype).max
    act_min = draw(st.integers(lowest, pool.act_min_high))
    return x, kernel, stride, padding, *ceil_mode, act_min, draw(st.integers(act_min, highest))


@TABLE
def test_matches_independent(pool: Pool) -> None:
    @settings(max_examples=pool.examples, deadline=None)
    @given(cases(pool))
    def check(case: tuple) -> None:
        assert torch.equal(pool.reference(*case), pool.expected(*case))

    check()


@TABLE
def test_all_padding_window_is_an_error(pool: Pool) -> None:
    x = torch.zeros((1, 2, 2, 1), dtype=pool.dtype)
    with pytest.raises(ValueError, match="padding"):
        pool.reference(x, [1, 1], [1, 1], [1, 1], *pool.geometry(False), -128, 127)


#: (operator, kernel, stride, padding, ceil mode)
FUNCTIONAL = [(AVG, [2, 3], [2, 2], [1, 1], True), (MAX, [3, 2], [2, 2], [1, 1], True)]


@pytest.mark.parametrize(
    ("pool", "kernel", "stride", "padding", "ceil_mode"), FUNCTIONAL, ids=["avg", "max"]
)
def test_functional_out_and_fake(
    pool: Pool, kernel: list, stride: list, padding: list, ceil_mode: bool
) -> None:
    x = torch.randint(-128, 128, (1, 5, 7, 3), dtype=torch.int8)
    args = (kernel, stride, padding, *pool.geometry(ceil_mode), -100, 100)
    extra = () if pool.scratch is None else (pool.scratch,)
    result = pool.op(x, *args, *extra)
    out = result if pool.scratch is None else result[0]
    assert torch.equal(out, pool.expected(x, *args))
    buffer = torch.empty_like(out)
    if pool.scratch is None:
        assert pool.op.out(x, *args, out=buffer) is buffer
    else:
        assert result[1].shape == (pool.scratch,) and result[1].dtype == torch.int8
        scratch_buffer = torch.empty(pool.scratch, dtype=torch.int8)
        pool.op.out(x, *args, *extra, out=buffer, scratch=scratch_buffer)
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = pool.op(torch.empty((2, 5, 7, 3), dtype=torch.int8), *args, *extra)
    fake_out = fake if pool.scratch is None else fake[0]
    assert fake_out.shape == (2, 3, 4, 3) and fake_out.dtype == torch.int8
    if pool.scratch is not None:
        assert fake[1].shape == (pool.scratch,)


# --- average pool: rounding and the divisor --------------------------------------------------


def test_avg_pool2d_rounds_half_away_from_zero() -> None:
    x = torch.tensor([1, 2, -1, -2, 3, 4, -3, -4, 0, 1], dtype=torch.int8).reshape(1, 1, 10, 1)
    got = avg_pool2d(x, [1, 2], [1, 2], [0, 0], False, -128, 127).reshape(-1).tolist()
    # means 1.5, -1.5, 3.5, -3.5, 0.5 → 2, -2, 4, -4, 1
    assert got == [2, -2, 4, -4, 1]


def test_avg_pool2d_divides_by_valid_count() -> None:
    x = torch.full((1, 2, 2, 1), 100, dtype=torch.int8)
    got = avg_pool2d(x, [3, 3], [1, 1], [1, 1], False, -128, 127)
    assert (got == 100).all()  # padding is not counted, so no dilution toward zero


def test_avg_pool2d_ceil_mode_averages_what_the_last_window_covers() -> None:
    """ResNet-D's shortcut pool on an odd extent: PyTorch's AvgPool2d(2, ceil_mode=True,
    count_include_pad=False), whose last row and column of windows cover one input each."""
    x = torch.arange(-12, 13, dtype=torch.int8).reshape(1, 5, 5, 1)
    got = avg_pool2d(x, [2, 2], [2, 2], [0, 0], True, -128, 127)
    pool = torch.nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False)
    want = pool(x.permute(0, 3, 1, 2).double()).permute(0, 2, 3, 1)
    away_from_zero = want.sign() * (want.abs() + 0.5).floor()  # CMSIS-NN's rounding
    assert got.shape == (1, 3, 3, 1) and torch.equal(got.double(), away_from_zero)


# --- max pool: PyTorch's own, padding, clamping, arguments ----------------------------------


@settings(max_examples=60, deadline=None)
@given(cases(MAX))
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


@pytest.mark.parametrize(
    "arguments",
    [([2], [1, 1], [0, 0]), ([2, 2], [0, 1], [0, 0]), ([2, 2], [1, 1], [-1, 0])],
)
def test_invalid_arguments(arguments: tuple) -> None:
    with pytest.raises(ValueError):
        max_pool2d(torch.zeros((1, 4, 4, 1), dtype=torch.int8), *arguments, False, -128, 127)
