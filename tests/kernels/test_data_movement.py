"""cortex_m_nn::transpose, ::pad, ::concat and ::strided_copy on the host runtime
(arm_transpose_s8, arm_pad_s8, arm_concatenation_s8_*, our strided copy) against their
references: one table, a row per operator."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from cortex_m_nn.ops.strided_copy import strided_span

from .harness import Call, CallTable, bit_exact_test
from .strategies import generator, int8


@st.composite
def transpose_calls(draw: st.DrawFn, int16: bool = False) -> Call:
    """int8 (arm_transpose_s8) or int16 (our loop) tensors of rank 2-4."""
    rank = draw(st.integers(2, 4))
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=rank, max_size=rank)))
    permutation = list(draw(st.permutations(range(rank))))
    if permutation == sorted(permutation):  # no identity (not by filtering: at rank 2 half the
        permutation = permutation[1:] + permutation[:1]  # draws, Hypothesis's health check)
    gen = generator(draw)
    if int16:
        x = torch.randint(-32768, 32768, shape, generator=gen, dtype=torch.int32).to(torch.int16)
        return Call("transpose", (x, permutation))
    return Call("transpose", (int8(shape, gen), permutation))


@st.composite
def pad_calls(draw: st.DrawFn, int16: bool = False) -> Call:
    """int8 (arm_pad_s8) or int16 (our loop) tensors of rank 1-4."""
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    pre = draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    post = draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    gen = generator(draw)
    if int16:
        x = torch.randint(-32768, 32768, shape, generator=gen, dtype=torch.int32).to(torch.int16)
        return Call("pad", (x, pre, post, draw(st.integers(-32768, 32767))))
    return Call("pad", (int8(shape, gen), pre, post, draw(st.integers(-128, 127))))


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


@st.composite
def strided_copy_calls(draw: st.DrawFn) -> Call:
    """Any sizes with strides of either sign or 0 (broadcast, reversal, steps, memcpy runs),
    read from an input with a margin on both sides; sometimes a 2-D input."""
    rank = draw(st.integers(1, 6))
    sizes = draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank))
    strides = draw(
        st.lists(st.sampled_from([1, 1, 0, -1, 2, -3, 5, 7]), min_size=rank, max_size=rank)
    )
    low, high = strided_span(sizes, strides, 0)
    offset = -low + draw(st.integers(0, 3))
    numel = offset + high + 1 + draw(st.integers(0, 3))
    shape = (2, numel // 2) if numel % 2 == 0 and draw(st.booleans()) else (numel,)
    return Call("strided_copy", (int8(shape, generator(draw)), sizes, strides, offset))


#: operator → its calls (none of these depends on the ISA)
CALLS: CallTable = {
    "transpose": lambda isa: transpose_calls(),
    "transpose[int16]": lambda isa: transpose_calls(int16=True),
    "pad": lambda isa: pad_calls(),
    "pad[int16]": lambda isa: pad_calls(int16=True),
    "concat": lambda isa: concat_calls(),
    "strided_copy": lambda isa: strided_copy_calls(),
}


test_bit_exact = bit_exact_test(CALLS)
