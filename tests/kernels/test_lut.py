"""cortex_m_nn::lut on the host runtime (a table lookup) against its reference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.host_kernels import KernelAbi

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS, generator, int8


@st.composite
def lut_calls(draw: st.DrawFn) -> Call:
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=4)))
    gen = generator(draw)
    return Call("lut", (int8(shape, gen), int8((256,), gen)))


@KERNEL_SETTINGS
@given(st.lists(lut_calls(), min_size=25, max_size=25))
def test_lut_bit_exact(kernels: KernelAbi, calls: list[Call]) -> None:
    check_calls(calls, kernels)
