"""cortex_m_nn::batch_matmul on the host runtime (arm_batch_matmul_s8; the int16 case
arm_batch_matmul_s16) against its reference."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.check.host_kernels import KernelAbi
from cortex_m_nn.lower import scratch

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS, activation_range, generator, host_target, int8


def batch_matmul_calls(isa: str) -> st.SearchStrategy[Call]:
    @st.composite
    def calls(draw: st.DrawFn) -> Call:
        rank = draw(st.integers(2, 4))
        batch = [draw(st.integers(1, 3)) for _ in range(rank - 2)]
        # broadcast: a batch dimension may be 1 on one side
        lhs_batch = [b if draw(st.booleans()) else 1 for b in batch]
        rhs_batch = [b if draw(st.booleans()) else 1 for b in batch]
        m, n, k = draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 40))
        gen = generator(draw)
        rhs_shape = (*rhs_batch, n, k)
        args = (
            int8((*lhs_batch, m, k), gen),
            int8(rhs_shape, gen),
            draw(st.integers(-127, 128)),
            draw(st.integers(-127, 128)),
            draw(st.integers(-128, 127)),
            draw(st.integers(2**30, 2**31 - 1)),
            draw(st.integers(-16, 0)),
            *activation_range(draw),
            scratch.batch_matmul_scratch_bytes(host_target(isa), rhs_shape),
        )
        return Call("batch_matmul", args, inputs=(0, 1))

    return calls()


@KERNEL_SETTINGS
@given(data=st.data())
def test_batch_matmul_bit_exact(kernels: KernelAbi, data: st.DataObject) -> None:
    calls = data.draw(st.lists(batch_matmul_calls(kernels.isa), min_size=25, max_size=25))
    check_calls(calls, kernels)


@st.composite
def batch_matmul_s16_calls(draw: st.DrawFn) -> Call:
    """int16 operands (arm_batch_matmul_s16): broadcast batches, any int16 values, zero
    offsets, one multiplier with a shift in the int16 stage's range, no scratch."""
    rank = draw(st.integers(2, 4))
    batch = [draw(st.integers(1, 3)) for _ in range(rank - 2)]
    lhs_batch = [b if draw(st.booleans()) else 1 for b in batch]
    rhs_batch = [b if draw(st.booleans()) else 1 for b in batch]
    m, n, k = draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 40))
    gen = generator(draw)
    act_min = draw(st.integers(-32768, 0))

    def int16(shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randint(-32768, 32768, shape, generator=gen, dtype=torch.int32).to(torch.int16)

    args = (
        int16((*lhs_batch, m, k)),
        int16((*rhs_batch, n, k)),
        0,
        0,
        0,
        draw(st.integers(2**30, 2**31 - 1)),
        draw(st.integers(-30, 2)),
        act_min,
        draw(st.integers(act_min, 32767)),
        0,
    )
    return Call("batch_matmul", args, inputs=(0, 1))


@KERNEL_SETTINGS
@given(st.lists(batch_matmul_s16_calls(), min_size=25, max_size=25))
def test_batch_matmul_s16_bit_exact(kernels: KernelAbi, calls: list[Call]) -> None:
    """25 calls × 10 examples: 250 int16 calls per ISA, every output byte compared."""
    check_calls(calls, kernels)
