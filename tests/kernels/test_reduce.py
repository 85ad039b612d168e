"""cortex_m_nn::reduce and the per-channel tables of cortex_m_nn::lut on the host runtime,
bit for bit against their references."""

from __future__ import annotations

import math

from hypothesis import strategies as st

from cortex_m_nn.ops.reduce import MAX, MIN, SUM, sum_parameters

from .harness import Call, CallTable, bit_exact_test
from .strategies import generator, int8


@st.composite
def reduce_calls(draw: st.DrawFn) -> Call:
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=1, max_size=4)))
    dims = sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
    x = int8(shape, generator(draw))
    kind = draw(st.sampled_from([SUM, SUM, MAX, MIN]))
    if kind != SUM:
        return Call("reduce", (x, dims, kind, 0, 0, 0, 0))
    count = math.prod(shape[d] for d in dims)
    mean = draw(st.booleans())
    in_scale = draw(st.floats(1e-3, 1.0))
    # output scales the quantizer could observe: up to the sum's whole range, finer for a mean
    out_scale = in_scale * draw(st.floats(0.25, float(count) if not mean else 2.0))
    multiplier, shift = sum_parameters(in_scale, out_scale, count if mean else 1)
    in_zp, out_zp = draw(st.integers(-128, 127)), draw(st.integers(-128, 127))
    return Call("reduce", (x, dims, SUM, -in_zp, out_zp, multiplier, shift))


@st.composite
def channel_table_calls(draw: st.DrawFn) -> Call:
    channels = draw(st.integers(2, 12))
    outer = tuple(draw(st.lists(st.integers(1, 5), min_size=0, max_size=3)))
    gen = generator(draw)
    return Call("lut", (int8((*outer, channels), gen), int8((channels, 256), gen)))


CALLS: CallTable = {
    "reduce": lambda isa: reduce_calls(),
    "lut_per_channel": lambda isa: channel_table_calls(),
}


test_bit_exact = bit_exact_test(CALLS)
