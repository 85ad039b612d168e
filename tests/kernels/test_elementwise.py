"""cortex_m_nn::add (and sub through it), ::mul, ::maximum and ::minimum on the host runtime
(arm_elementwise_add_s8 and arm_elementwise_mul_s8 row by row when broadcasting,
arm_maximum_s8 and arm_minimum_s8, which broadcast themselves) against their references: one
table, a row per operator."""

from __future__ import annotations

from hypothesis import strategies as st
from tests.python.ops.test_elementwise import ADD_NAMES, MUL_NAMES

from cortex_m_nn.ops.add import add_parameters, sub_parameters
from cortex_m_nn.ops.broadcast import cmsis_minmax_supported
from cortex_m_nn.ops.mul import mul_parameters

from .harness import Call, CallTable, bit_exact_test
from .strategies import activation_range, broadcast_shapes, generator, int8


def _quantized_call(draw: st.DrawFn, op: str, parameters: dict, names: list[str]) -> Call:
    shape1, shape2 = broadcast_shapes(draw)
    gen = generator(draw)
    p = (parameters[n] for n in names)
    args = (int8(shape1, gen), int8(shape2, gen), *p, *activation_range(draw))
    return Call(op, args, inputs=(0, 1))


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
    "mul": lambda isa: mul_calls(),
    "maximum": lambda isa: minmax_calls("maximum"),
    "minimum": lambda isa: minmax_calls("minimum"),
}


test_bit_exact = bit_exact_test(CALLS)
