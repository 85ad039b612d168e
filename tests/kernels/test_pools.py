"""cortex_m_nn::avg_pool2d and ::max_pool2d on the host runtime (arm_avgpool_s8,
arm_max_pool_s8; the int16 rows arm_avgpool_s16, arm_max_pool_s16) against their references:
one table, a row per operator and dtype."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from cortex_m_nn.lower import scratch
from cortex_m_nn.ops.params import pool_output_size

from .harness import Call, CallTable, bit_exact_test
from .strategies import activation_range, generator, host_target, int8


def window(draw: st.DrawFn, max_kernel: int, margin: int) -> tuple:
    """Kernel, stride, padding (at most half the kernel) and an input of at least one output
    and up to ``margin`` more rows and columns than the kernel: NHWC shape, up to 20 channels."""
    kh, kw = draw(st.integers(1, max_kernel)), draw(st.integers(1, max_kernel))
    stride = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    padding = [draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2))]
    h = draw(st.integers(max(1, kh - 2 * padding[0]), kh + margin))
    w = draw(st.integers(max(1, kw - 2 * padding[1]), kw + margin))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 20))
    return [kh, kw], stride, padding, (n, h, w, c)


def values(
    draw: st.DrawFn, shape: tuple[int, ...], gen: torch.Generator, int16: bool
) -> tuple[torch.Tensor, int, int]:
    """An int8 or int16 input and an activation range of its dtype."""
    if not int16:
        return int8(shape, gen), *activation_range(draw)
    x = torch.randint(-32768, 32768, shape, generator=gen, dtype=torch.int32).to(torch.int16)
    low = draw(st.integers(-32768, 0))
    return x, low, draw(st.integers(low, 32767))


def avg_pool2d_calls(isa: str, int16: bool = False) -> st.SearchStrategy[Call]:
    @st.composite
    def calls(draw: st.DrawFn) -> Call:
        kernel, stride, padding, (n, h, w, c) = window(draw, 5, 10)
        ceil_mode = draw(st.booleans())
        oh = pool_output_size(h, kernel[0], stride[0], padding[0], ceil_mode)
        ow = pool_output_size(w, kernel[1], stride[1], padding[1], ceil_mode)
        need = scratch.avg_pool2d_scratch_bytes(
            host_target(isa), (n, h, w, c), (n, oh, ow, c), int16
        )
        x, low, high = values(draw, (n, h, w, c), generator(draw), int16)
        return Call("avg_pool2d", (x, kernel, stride, padding, ceil_mode, low, high, need))

    return calls()


def max_pool2d_calls(isa: str, int16: bool = False) -> st.SearchStrategy[Call]:
    @st.composite
    def calls(draw: st.DrawFn) -> Call:
        kernel, stride, padding, shape = window(draw, 4, 9)
        x, low, high = values(draw, shape, generator(draw), int16)
        return Call("max_pool2d", (x, kernel, stride, padding, draw(st.booleans()), low, high))

    return calls()


CALLS: CallTable = {
    "avg_pool2d": avg_pool2d_calls,
    "avg_pool2d[int16]": lambda isa: avg_pool2d_calls(isa, int16=True),
    "max_pool2d": max_pool2d_calls,
    "max_pool2d[int16]": lambda isa: max_pool2d_calls(isa, int16=True),
}


test_bit_exact = bit_exact_test(CALLS)
