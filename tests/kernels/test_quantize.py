"""cortex_m_nn::quantize, ::dequantize and ::requantize on the host runtime against their
references: one table, a row per operator; int8 and int16 are cases of each row's calls."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from cortex_m_nn.ops.arithmetic import quantize_multiplier
from cortex_m_nn.ops.requantize import LARGEST

from .harness import Call, CallTable, bit_exact_test
from .strategies import generator

#: activation dtype → (ScalarType code, lowest, highest)
DTYPES = {torch.int8: (1, -128, 127), torch.int16: (2, -32768, 32767)}


def values(dtype: torch.dtype, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    _, low, high = DTYPES[dtype]
    return torch.randint(low, high + 1, shape, generator=gen, dtype=torch.int32).to(dtype)


@st.composite
def boundary(draw: st.DrawFn) -> tuple:
    """(shape, permutation, scale, zero point, dtype, generator); int16 has zero point 0."""
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=5)))
    order = draw(st.permutations(range(len(shape))))
    permutation = list(order) if draw(st.booleans()) else []
    scale = draw(st.floats(1e-4, 2.0))
    dtype = draw(st.sampled_from(list(DTYPES)))
    zero_point = draw(st.integers(-128, 127)) if dtype is torch.int8 else 0
    return shape, permutation, scale, zero_point, dtype, generator(draw)


@st.composite
def quantize_calls(draw: st.DrawFn) -> Call:
    shape, permutation, scale, zero_point, dtype, gen = draw(boundary())
    levels = 32 if dtype is torch.int8 else 8192
    spread = draw(st.sampled_from([0.5, 4.0, 200.0]))  # inside the range, near it, saturating
    x = torch.randn(shape, generator=gen) * spread * scale * levels
    # exact ties: values landing on .5 steps must round half to even like torch.round
    if draw(st.booleans()):
        x = (torch.randint(-300 * levels, 300 * levels, shape, generator=gen) + 0.5) * scale
    code = DTYPES[dtype][0]
    return Call("quantize", (x.to(torch.float32), scale, zero_point, permutation, code))


@st.composite
def dequantize_calls(draw: st.DrawFn) -> Call:
    shape, permutation, scale, zero_point, dtype, gen = draw(boundary())
    return Call("dequantize", (values(dtype, shape, gen), scale, zero_point, permutation))


@st.composite
def requantize_calls(draw: st.DrawFn) -> Call:
    """int8/int16 into int8/int16 at a scale ratio the compiler would meet (or beyond, to
    saturate), with shifts up to the largest that keeps the input in int32."""
    source = draw(st.sampled_from(list(DTYPES)))
    target = draw(st.sampled_from(list(DTYPES)))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=3)))
    gen = generator(draw)
    input_offset = draw(st.integers(-127, 128)) if source is torch.int8 else 0
    output_offset = draw(st.integers(-128, 127)) if target is torch.int8 else 0
    ratio = draw(st.floats(2.0**-20, 2.0**12))
    multiplier, shift = quantize_multiplier(ratio)
    if LARGEST[source] << max(shift, 0) >= 2**31:
        multiplier, shift = 2**31 - 1, 31 - LARGEST[source].bit_length()
    code = DTYPES[target][0]
    x = values(source, shape, gen)
    return Call("requantize", (x, input_offset, output_offset, multiplier, shift, code))


#: operator → its calls (none of these depends on the ISA)
CALLS: CallTable = {
    "quantize": lambda isa: quantize_calls(),
    "dequantize": lambda isa: dequantize_calls(),
    "requantize": lambda isa: requantize_calls(),
}


test_bit_exact = bit_exact_test(CALLS)
