"""cortex_m_nn::softmax on the host runtime (arm_softmax_s8; int16: arm_softmax_s16 with the
compiler's tables) against its reference: a row per dtype; and cortex_m_nn::masked_softmax
(arm_softmax_s8 on each row's kept entries): causal and random masks tiling the rows."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.check.host_kernels import KernelAbi
from cortex_m_nn.ops.softmax import softmax_parameters, softmax_s16_parameters, softmax_s16_tables

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS, generator, int8

ROWS = [1, 2, 3, 7, 10, 16, 33, 64, 130, 255, 511]


@st.composite
def softmax_calls(draw: st.DrawFn) -> Call:
    lead = draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))
    row = draw(st.sampled_from(ROWS))
    params = softmax_parameters(draw(st.floats(1e-3, 0.5)))
    return Call("softmax", (int8((*lead, row), generator(draw)), None, None, *params))


@st.composite
def softmax_s16_calls(draw: st.DrawFn) -> Call:
    """int16 rows of two or more (a row of one wraps in CMSIS-NN: refused), input scales from
    fine to coarse (shifts from negative to 15)."""
    lead = draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))
    row = draw(st.sampled_from(ROWS[1:]))
    gen = generator(draw)
    x = torch.randint(-32768, 32768, (*lead, row), generator=gen, dtype=torch.int32)
    multiplier, shift = softmax_s16_parameters(draw(st.floats(1e-6, 2.0)))
    exp, reciprocal = softmax_s16_tables()
    return Call("softmax", (x.to(torch.int16), exp, reciprocal, multiplier, shift, 0))


@st.composite
def masked_softmax_calls(draw: st.DrawFn) -> Call:
    """A causal mask (rows of a square) or a random one with a kept entry per row, tiling
    rows of heads and batch items."""
    gen = generator(draw)
    length, row = draw(st.integers(1, 12)), draw(st.sampled_from(ROWS[:-1]))
    if draw(st.booleans()):
        row = length
        keep = torch.ones(length, length, dtype=torch.bool).tril()
    else:
        keep = torch.rand(length, row, generator=gen) < draw(st.floats(0.1, 0.9))
        keep[torch.arange(length), torch.randint(0, row, (length,), generator=gen)] = True
    heads = draw(st.integers(1, 3))
    params = softmax_parameters(draw(st.floats(1e-3, 0.5)))
    x = int8((heads, length, row), gen)
    return Call("masked_softmax", (x, keep.to(torch.int8), *params, row))


@KERNEL_SETTINGS
@given(st.lists(masked_softmax_calls(), min_size=25, max_size=25))
def test_masked_softmax_bit_exact(kernels: KernelAbi, calls: list[Call]) -> None:
    check_calls(calls, kernels)


@KERNEL_SETTINGS
@given(st.lists(softmax_calls(), min_size=25, max_size=25))
def test_softmax_bit_exact(kernels: KernelAbi, calls: list[Call]) -> None:
    check_calls(calls, kernels)


@KERNEL_SETTINGS
@given(st.lists(softmax_s16_calls(), min_size=25, max_size=25))
def test_softmax_s16_bit_exact(kernels: KernelAbi, calls: list[Call]) -> None:
    check_calls(calls, kernels)
