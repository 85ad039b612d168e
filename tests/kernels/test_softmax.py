"""cortex_m_nn::softmax on the host runtime (arm_softmax_s8) against its reference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.host_kernels import KernelAbi
from cortex_m_nn.ops.softmax import softmax_parameters

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS, generator, int8


@st.composite
def softmax_calls(draw: st.DrawFn) -> Call:
    lead = draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))
    row = draw(st.sampled_from([1, 2, 3, 7, 10, 16, 33, 64, 130, 255, 511]))
    params = softmax_parameters(draw(st.floats(1e-3, 0.5)))
    return Call("softmax", (int8((*lead, row), generator(draw)), *params))


@KERNEL_SETTINGS
@given(st.lists(softmax_calls(), min_size=25, max_size=25))
def test_softmax_bit_exact(kernels: KernelAbi, calls: list[Call]) -> None:
    check_calls(calls, kernels)
