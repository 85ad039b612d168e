"""cortex_m_nn::quantize and ::dequantize on the host runtime against their references: one
table, a row per operator."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from .harness import Call, CallTable, bit_exact_test
from .strategies import generator, int8


@st.composite
def boundary(draw: st.DrawFn) -> tuple[tuple[int, ...], list[int], float, int, torch.Generator]:
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=5)))
    order = draw(st.permutations(range(len(shape))))
    permutation = list(order) if draw(st.booleans()) else []
    scale = draw(st.floats(1e-4, 2.0))
    return shape, permutation, scale, draw(st.integers(-128, 127)), generator(draw)


@st.composite
def quantize_calls(draw: st.DrawFn) -> Call:
    shape, permutation, scale, zero_point, gen = draw(boundary())
    spread = draw(st.sampled_from([0.5, 4.0, 200.0]))  # inside the range, near it, saturating
    x = torch.randn(shape, generator=gen) * spread * scale * 32
    # exact ties: values landing on .5 steps must round half to even like torch.round
    if draw(st.booleans()):
        x = (torch.randint(-300, 300, shape, generator=gen) + 0.5) * scale
    return Call("quantize", (x.to(torch.float32), scale, zero_point, permutation))


@st.composite
def dequantize_calls(draw: st.DrawFn) -> Call:
    shape, permutation, scale, zero_point, gen = draw(boundary())
    return Call("dequantize", (int8(shape, gen), scale, zero_point, permutation))


#: operator → its calls (none of these depends on the ISA)
CALLS: CallTable = {
    "quantize": lambda isa: quantize_calls(),
    "dequantize": lambda isa: dequantize_calls(),
}


test_bit_exact = bit_exact_test(CALLS)
