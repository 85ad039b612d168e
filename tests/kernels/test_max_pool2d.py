"""cortex_m_nn::max_pool2d on the host runtime (arm_max_pool_s8) against its reference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.host_kernels import KernelAbi

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS, activation_range, generator, int8


@st.composite
def max_pool2d_calls(draw: st.DrawFn) -> Call:
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    stride = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    padding = [draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2))]
    h = draw(st.integers(max(1, kh - 2 * padding[0]), kh + 9))
    w = draw(st.integers(max(1, kw - 2 * padding[1]), kw + 9))
    shape = (draw(st.integers(1, 2)), h, w, draw(st.integers(1, 20)))
    args = (
        int8(shape, generator(draw)),
        [kh, kw],
        stride,
        padding,
        draw(st.booleans()),
        *activation_range(draw),
    )
    return Call("max_pool2d", args)


@KERNEL_SETTINGS
@given(st.lists(max_pool2d_calls(), min_size=25, max_size=25))
def test_max_pool2d_bit_exact(kernels: KernelAbi, calls: list[Call]) -> None:
    check_calls(calls, kernels)
