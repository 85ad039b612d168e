"""cortex_m_nn::add (and sub through it), ::mul, ::maximum and ::minimum on the host runtime
(arm_elementwise_add_s8 and arm_elementwise_mul_s8 row by row when broadcasting,
arm_maximum_s8 and arm_minimum_s8, which broadcast themselves) against their references: one
table, a row per operator."""

from __future__ import annotations

import torch
from hypothesis import strategies as st
from tests.python.ops.test_elementwise import ADD_NAMES, MUL_NAMES

from cortex_m_nn.ops.add import LEFT_SHIFT_INT16, add_parameters, sub_parameters
from cortex_m_nn.ops.broadcast import cmsis_minmax_supported
from cortex_m_nn.ops.mul import mul_parameters

from .harness import Call, CallTable, bit_exact_test
from .strategies import activation_range, broadcast_shapes, generator, int8


def _quantized_call(
    draw: st.DrawFn, op: str, parameters: dict, names: list[str], int16: bool = False
) -> Call:
    shape1, shape2 = broadcast_shapes(draw)
    gen = generator(draw)
    p = (parameters[n] for n in names)
    if int16:
        x1, x2 = (
            torch.randint(-32768, 32768, s, generator=gen, dtype=torch.int32).to(torch.int16)
            for s in (shape1, shape2)
        )
        low = draw(st.integers(-32768, 0))
        return Call(op, (x1, x2, *p, low, draw(st.integers(low, 32767))), inputs=(0, 1))
    args = (int8(shape1, gen), int8(shape2, gen), *p, *activation_range(draw))
    return Call(op, args, inputs=(0, 1))


_INT16_ZERO_POINTS = {"input1_zero_point": 0, "input2_zero_point": 0, "output_zero_point": 0}


@st.composite
def add_s16_calls(draw: st.DrawFn) -> Call:
    """arm_elementwise_add_s16: left shift 15, zero points 0 (add and sub)."""
    scales = st.floats(1e-5, 1e-2)
    parameters = add_parameters if draw(st.booleans()) else sub_parameters
    p = parameters(
        draw(scales), draw(scales), draw(scales), left_shift=LEFT_SHIFT_INT16, **_INT16_ZERO_POINTS
    )
    return _quantized_call(draw, "add", p, ADD_NAMES, int16=True)


@st.composite
def mul_s16_calls(draw: st.DrawFn) -> Call:
    """arm_elementwise_mul_s16: products up to 2^30, output shifts that keep them in int32."""
    s1, s2 = draw(st.floats(1e-5, 1e-2)), draw(st.floats(1e-5, 1e-2))
    so = s1 * s2 * draw(st.floats(4.0, 2.0**16))
    p = mul_parameters(s1, s2, so, largest_product=2**30, **_INT16_ZERO_POINTS)
    return _quantized_call(draw, "mul", p, MUL_NAMES, int16=True)


def _zero_points(draw: st.DrawFn) -> dict[str, int]:
    zero_points = st.integers(-128, 127)
    names = ("input1_zero_point", "input2_zero_point", "output_zero_point")
    return {name: draw(zero_points) for name in names}


@st.composite
def add_calls(draw: st.DrawFn) -> Call:
    scales = st.floats(1e-3, 1.0)
    parameters = add_parameters if draw(st.booleans()) else sub_parameters
    p = parameters(draw(scales), draw(scales), draw(scales), **_zero_points(draw))
    return _quantized_call(draw, "add", p, ADD_NAMES)


@st.composite
def mul_calls(draw: st.DrawFn) -> Call:
    s1, s2 = draw(st.floats(1e-3, 1.0)), draw(st.floats(1e-3, 1.0))
    # output scales the quantizer could observe: not finer than 2^-8 of the product
    so = s1 * s2 * draw(st.floats(2.0**-8, 4.0))
    p = mul_parameters(s1, s2, so, **_zero_points(draw))
    return _quantized_call(draw, "mul", p, MUL_NAMES)


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


#: operator → its calls (none of these depends on the ISA)
CALLS: CallTable = {
    "add": lambda isa: add_calls(),
    "add[int16]": lambda isa: add_s16_calls(),
    "mul": lambda isa: mul_calls(),
    "mul[int16]": lambda isa: mul_s16_calls(),
    "maximum": lambda isa: minmax_calls("maximum"),
    "minimum": lambda isa: minmax_calls("minimum"),
}


test_bit_exact = bit_exact_test(CALLS)
