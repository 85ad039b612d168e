"""cortex_m_nn::batch_matmul on the host runtime (arm_batch_matmul_s8; the int16 row
arm_batch_matmul_s16) against its reference: one table, a row per dtype."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from cortex_m_nn.lower import scratch

from .harness import Call, CallTable, bit_exact_test
from .strategies import activation_range, generator, host_target, int8


def _int16(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    return torch.randint(-32768, 32768, shape, generator=gen, dtype=torch.int32).to(torch.int16)


def batch_matmul_calls(isa: str, int16: bool = False) -> st.SearchStrategy[Call]:
    """Broadcast batches, int8 operands with any offsets and the scratch the ISA needs;
    ``int16`` (arm_batch_matmul_s16): any int16 values, zero offsets, one multiplier with a
    shift in the int16 stage's range, an int16 activation range, no scratch."""

    @st.composite
    def calls(draw: st.DrawFn) -> Call:
        rank = draw(st.integers(2, 4))
        batch = [draw(st.integers(1, 3)) for _ in range(rank - 2)]
        # broadcast: a batch dimension may be 1 on one side
        lhs_batch = [b if draw(st.booleans()) else 1 for b in batch]
        rhs_batch = [b if draw(st.booleans()) else 1 for b in batch]
        m, n, k = draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 40))
        gen = generator(draw)
        lhs_shape, rhs_shape = (*lhs_batch, m, k), (*rhs_batch, n, k)
        multiplier = draw(st.integers(2**30, 2**31 - 1))
        if int16:
            operands = (_int16(lhs_shape, gen), _int16(rhs_shape, gen))
            low = draw(st.integers(-32768, 0))
            shift, high = draw(st.integers(-30, 2)), draw(st.integers(low, 32767))
            numbers = (0, 0, 0, multiplier, shift, low, high, 0)  # zero offsets, no scratch
        else:
            operands = (int8(lhs_shape, gen), int8(rhs_shape, gen))
            lhs_offset, rhs_offset = draw(st.integers(-127, 128)), draw(st.integers(-127, 128))
            offsets = (lhs_offset, rhs_offset, draw(st.integers(-128, 127)))
            shift, (low, high) = draw(st.integers(-16, 0)), activation_range(draw)
            need = scratch.batch_matmul_scratch_bytes(host_target(isa), rhs_shape)
            numbers = (*offsets, multiplier, shift, low, high, need)
        return Call("batch_matmul", (*operands, *numbers), inputs=(0, 1))

    return calls()


CALLS: CallTable = {
    "batch_matmul": batch_matmul_calls,
    "batch_matmul[int16]": lambda isa: batch_matmul_calls(isa, int16=True),
}


test_bit_exact = bit_exact_test(CALLS)
