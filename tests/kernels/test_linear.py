"""cortex_m_nn::linear on the host runtime (arm_fully_connected_s8, and
arm_fully_connected_per_channel_s8 for per-channel calls; the int16 row
arm_fully_connected_s16, the int4 row arm_fully_connected_s4, the quads row our
fully_connected_quads_s8) against its reference: one table, a row per dtype or path."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from cortex_m_nn.ops import int4 as packing

from .harness import Call, CallTable, bit_exact_test
from .strategies import activation_range, generator, int8


def linear_calls(
    int16: bool = False, int4: bool = False, quads: bool = False
) -> st.SearchStrategy[Call]:
    """int8 input and weights in [-127, 127], an int32 bias or none, any offsets, one
    multiplier or (arm_fully_connected_per_channel_s8) a multiplier and shift per output, the
    numbers 0; ``int16`` (arm_fully_connected_s16): int16 input, an int64 bias or none, zero
    offsets, one multiplier, an int16 activation range, past 512 columns; ``int4``
    (arm_fully_connected_s4): packed [out, in / 2] weights in [-8, 7] (an even in), one
    multiplier; ``quads``: the int8 calls on our fully_connected_quads_s8 (path 1)."""

    @st.composite
    def calls(draw: st.DrawFn) -> Call:
        lead = draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))
        if int4:
            n_in = 2 * draw(st.integers(1, 40))
        else:
            n_in = draw(st.integers(1, 600 if int16 else 70))
        n_out = draw(st.integers(1, 24))
        gen = generator(draw)
        bias = None
        if draw(st.booleans()):
            bound, dtype = (2**36, torch.int64) if int16 else (2**20, torch.int32)
            bias = torch.randint(-bound, bound, (n_out,), generator=gen, dtype=dtype)
        multiplier = draw(st.integers(2**30, 2**31 - 1))
        shift = draw(st.integers(-30 if int16 else -16, 1 if int4 else 2))
        channels = None, None
        if not (int16 or int4) and draw(st.booleans()):  # per channel: the numbers 0
            channels = (
                torch.randint(2**30, 2**31 - 1, (n_out,), generator=gen).to(torch.int32),
                torch.randint(-16, 3, (n_out,), generator=gen).to(torch.int32),
            )
            multiplier, shift = 0, 0
        if int16:
            x = torch.randint(-32768, 32768, (*lead, n_in), generator=gen, dtype=torch.int16)
            low = draw(st.integers(-32768, 0))
            numbers = (0, 0, multiplier, shift, low, draw(st.integers(low, 32767)))
        else:
            x = int8((*lead, n_in), gen)
            offsets = draw(st.integers(-127, 128)), draw(st.integers(-128, 127))
            numbers = (*offsets, multiplier, shift, *activation_range(draw))
        if int4:
            weight = packing.pack(
                torch.randint(-8, 8, (n_out, n_in), generator=gen, dtype=torch.int8)
            )
        else:
            weight = int8((n_out, n_in), gen, low=-127)
        path = 1 if quads else 0  # fully_connected_quads_s8: int8, per tensor or per channel
        return Call("linear", (x, weight, bias, None, *channels, *numbers, path))

    return calls()


CALLS: CallTable = {
    "linear": lambda _: linear_calls(),
    "linear[int16]": lambda _: linear_calls(int16=True),
    "linear[int4]": lambda _: linear_calls(int4=True),
    "linear[quads]": lambda _: linear_calls(quads=True),
}


test_bit_exact = bit_exact_test(CALLS)
