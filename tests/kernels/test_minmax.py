"""cortex_m_nn::maximum and ::minimum on the host runtime (arm_maximum_s8, arm_minimum_s8,
which broadcast themselves) against their references."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.host_kernels import KernelAbi
from cortex_m_nn.ops.broadcast import cmsis_minmax_supported

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS, broadcast_shapes, generator, int8


def minmax_calls(op: str) -> st.SearchStrategy[Call]:
    @st.composite
    def calls(draw: st.DrawFn) -> Call:
        shape1, shape2 = broadcast_shapes(draw)
        if not cmsis_minmax_supported(shape1, shape2):  # the one pattern CMSIS-NN mis-walks
            shape1 = tuple(max(a, b) for a, b in zip(shape1, shape2, strict=True))
            if not cmsis_minmax_supported(shape1, shape2):
                shape2 = shape1
        gen = generator(draw)
        return Call(op, (int8(shape1, gen), int8(shape2, gen)), inputs=(0, 1))

    return calls()


@pytest.mark.parametrize("op", ["maximum", "minimum"])
@KERNEL_SETTINGS
@given(data=st.data())
def test_minmax_bit_exact(kernels: KernelAbi, op: str, data: st.DataObject) -> None:
    check_calls(data.draw(st.lists(minmax_calls(op), min_size=25, max_size=25)), kernels)
