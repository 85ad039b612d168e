"""cortex_m_nn::add (and sub through it) on the host runtime (arm_elementwise_add_s8, row by
row when broadcasting) against its reference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.host_kernels import KernelAbi
from cortex_m_nn.ops.add import add_parameters, sub_parameters

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS, activation_range, broadcast_shapes, generator, int8

NAMES = [
    "input1_offset",
    "input1_multiplier",
    "input1_shift",
    "input2_offset",
    "input2_multiplier",
    "input2_shift",
    "left_shift",
    "output_offset",
    "output_multiplier",
    "output_shift",
]


@st.composite
def add_calls(draw: st.DrawFn) -> Call:
    scales = st.floats(1e-3, 1.0)
    zero_points = st.integers(-128, 127)
    parameters = add_parameters if draw(st.booleans()) else sub_parameters
    p = parameters(
        draw(scales),
        draw(scales),
        draw(scales),
        input1_zero_point=draw(zero_points),
        input2_zero_point=draw(zero_points),
        output_zero_point=draw(zero_points),
    )
    shape1, shape2 = broadcast_shapes(draw)
    gen = generator(draw)
    args = (int8(shape1, gen), int8(shape2, gen), *(p[n] for n in NAMES), *activation_range(draw))
    return Call("add", args, inputs=(0, 1))


@KERNEL_SETTINGS
@given(st.lists(add_calls(), min_size=25, max_size=25))
def test_add_bit_exact(kernels: KernelAbi, calls: list[Call]) -> None:
    check_calls(calls, kernels)
