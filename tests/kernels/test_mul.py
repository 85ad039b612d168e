"""cortex_m_nn::mul on the host runtime (arm_elementwise_mul_s8, row by row when
broadcasting) against its reference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.host_kernels import KernelAbi
from cortex_m_nn.ops.mul import mul_parameters

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS, activation_range, broadcast_shapes, generator, int8

NAMES = ["input1_offset", "input2_offset", "output_offset", "output_multiplier", "output_shift"]


@st.composite
def mul_calls(draw: st.DrawFn) -> Call:
    s1, s2 = draw(st.floats(1e-3, 1.0)), draw(st.floats(1e-3, 1.0))
    # output scales the quantizer could observe: not finer than 2^-8 of the product
    so = s1 * s2 * draw(st.floats(2.0**-8, 4.0))
    zero_points = st.integers(-128, 127)
    p = mul_parameters(
        s1,
        s2,
        so,
        input1_zero_point=draw(zero_points),
        input2_zero_point=draw(zero_points),
        output_zero_point=draw(zero_points),
    )
    shape1, shape2 = broadcast_shapes(draw)
    gen = generator(draw)
    args = (int8(shape1, gen), int8(shape2, gen), *(p[n] for n in NAMES), *activation_range(draw))
    return Call("mul", args, inputs=(0, 1))


@KERNEL_SETTINGS
@given(st.lists(mul_calls(), min_size=25, max_size=25))
def test_mul_bit_exact(kernels: KernelAbi, calls: list[Call]) -> None:
    check_calls(calls, kernels)
