"""Hypothesis building blocks shared by the kernel tests."""

from __future__ import annotations

import torch
from hypothesis import Phase, settings
from hypothesis import strategies as st

from cortex_m_nn.core.target import Core, Isa, Target

#: Each example compiles and runs a program of 25 calls: no shrinking (a failure already names
#: the call, and shrinking would compile hundreds of programs).
KERNEL_SETTINGS = settings(
    max_examples=10, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate)
)


def host_target(isa: str) -> Target:
    """A target whose scratch sizes are the kernels' (the host builds the scalar path)."""
    return Target(Core.M55, Isa(isa))


def generator(draw: st.DrawFn) -> torch.Generator:
    return torch.Generator().manual_seed(draw(st.integers(0, 2**31)))


def int8(shape: tuple[int, ...], gen: torch.Generator, low: int = -128) -> torch.Tensor:
    return torch.randint(low, 128, shape, generator=gen, dtype=torch.int8)


def activation_range(draw: st.DrawFn) -> tuple[int, int]:
    low = draw(st.integers(-128, 0))
    return low, draw(st.integers(low, 127))


def per_channel(draw: st.DrawFn, channels: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """(bias, multipliers, shifts) int32 vectors in the ranges the quantizer produces."""
    bias = torch.randint(-(2**20), 2**20, (channels,), generator=gen, dtype=torch.int32)
    multipliers = torch.randint(2**30, 2**31 - 1, (channels,), generator=gen, dtype=torch.int32)
    low = draw(st.integers(-14, -4))
    shifts = torch.randint(low, 2, (channels,), generator=gen, dtype=torch.int32)
    return bias, multipliers, shifts


def conv_geometry(draw: st.DrawFn, max_kernel: int = 4) -> dict:
    """Kernel, stride, padding, dilation and an input size giving at least one output."""
    kh, kw = draw(st.integers(1, max_kernel)), draw(st.integers(1, max_kernel))
    stride = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    dilation = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    padding = [draw(st.integers(0, kh // 2 + 1)), draw(st.integers(0, kw // 2 + 1))]
    span_h, span_w = dilation[0] * (kh - 1) + 1, dilation[1] * (kw - 1) + 1
    # TensorFlow's SAME: an end padded one more than its start, less than the kernel's extent
    ends = [
        start + int(start + 1 < span and draw(st.sampled_from([False, False, True])))
        for start, span in zip(padding, (span_h, span_w), strict=True)
    ]
    h = draw(st.integers(max(1, span_h - padding[0] - ends[0]), span_h + 8))
    w = draw(st.integers(max(1, span_w - padding[1] - ends[1]), span_w + 8))
    if ends != padding:
        padding = padding + ends  # (top, left, bottom, right)
    return {
        "kernel": (kh, kw),
        "stride": stride,
        "padding": padding,
        "dilation": dilation,
        "size": (h, w),
    }


def broadcast_shapes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two input shapes of one rank (<= 4) that broadcast: each extent the output's or 1."""
    out = draw(st.lists(st.integers(1, 7), min_size=1, max_size=4))
    one = st.sampled_from([True, False, False])
    a = tuple(1 if draw(one) else d for d in out)
    b = tuple(1 if draw(one) else d for d in out)
    return a, b


#: Calls per drawn program: one compile and run checks this many of one operator.
CALLS_PER_PROGRAM = 25


def draw_calls(data: st.DataObject, calls: st.SearchStrategy) -> list:
    """``CALLS_PER_PROGRAM`` calls of one operator, for one program."""
    size = CALLS_PER_PROGRAM
    return data.draw(st.lists(calls, min_size=size, max_size=size))
