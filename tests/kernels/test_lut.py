"""cortex_m_nn::lut on the host runtime against its reference: the int8 table lookup, and the
int16 case's interpolation between the knots of a table of each length it takes."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from cortex_m_nn.ops.lut import INT16_STEP_BITS, int16_table_size

from .harness import Call, CallTable, bit_exact_test
from .strategies import generator, int8


@st.composite
def lut_calls(draw: st.DrawFn) -> Call:
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=4)))
    gen = generator(draw)
    return Call("lut", (int8(shape, gen), int8((256,), gen)))


@st.composite
def lut_s16_calls(draw: st.DrawFn) -> Call:
    """Any int16 input (its extremes included), a random int16 table of a drawn length."""
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=4)))
    gen = generator(draw)
    x = torch.randint(-32768, 32768, shape, generator=gen, dtype=torch.int32).to(torch.int16)
    x.reshape(-1)[:2] = torch.tensor([-32768, 32767], dtype=torch.int16)[: x.numel()]
    size = int16_table_size(draw(st.sampled_from(INT16_STEP_BITS)))
    table = torch.randint(-32768, 32768, (size,), generator=gen, dtype=torch.int32)
    return Call("lut", (x, table.to(torch.int16)))


#: operator → its calls (a lookup does not depend on the ISA)
CALLS: CallTable = {
    "lut": lambda isa: lut_calls(),
    "lut[int16]": lambda isa: lut_s16_calls(),
}


test_bit_exact = bit_exact_test(CALLS)
