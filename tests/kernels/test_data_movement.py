"""cortex_m_nn::transpose, ::pad and ::concat on the host runtime (arm_transpose_s8,
arm_pad_s8, arm_concatenation_s8_*) against their references: one table, a row per operator."""

from __future__ import annotations

from hypothesis import strategies as st

from .harness import Call, CallTable, bit_exact_test
from .strategies import generator, int8


@st.composite
def transpose_calls(draw: st.DrawFn) -> Call:
    rank = draw(st.integers(2, 4))
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=rank, max_size=rank)))
    permutation = list(draw(st.permutations(range(rank)).filter(lambda p: list(p) != sorted(p))))
    return Call("transpose", (int8(shape, generator(draw)), permutation))


@st.composite
def pad_calls(draw: st.DrawFn) -> Call:
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    pre = draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    post = draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    return Call("pad", (int8(shape, generator(draw)), pre, post, draw(st.integers(-128, 127))))


@st.composite
def concat_calls(draw: st.DrawFn) -> Call:
    rank = draw(st.integers(1, 4))
    shape = draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    dim = draw(st.integers(0, rank - 1))
    gen = generator(draw)
    inputs = []
    for _ in range(draw(st.integers(1, 4))):
        part = list(shape)
        part[dim] = draw(st.integers(1, 5))
        inputs.append(int8(tuple(part), gen))
    return Call("concat", (inputs, dim))


#: operator → its calls (none of these depends on the ISA)
CALLS: CallTable = {
    "transpose": lambda isa: transpose_calls(),
    "pad": lambda isa: pad_calls(),
    "concat": lambda isa: concat_calls(),
}


test_bit_exact = bit_exact_test(CALLS)
