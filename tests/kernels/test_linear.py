"""cortex_m_nn::linear on the host runtime (arm_fully_connected_s8, and
arm_fully_connected_per_channel_s8 for per-channel calls) against its reference."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.check.host_kernels import KernelAbi

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS


@st.composite
def linear_calls(draw: st.DrawFn) -> Call:
    lead = draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))
    n_in, n_out = draw(st.integers(1, 70)), draw(st.integers(1, 24))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    bias = None
    if draw(st.booleans()):
        bias = torch.randint(-(2**20), 2**20, (n_out,), generator=gen, dtype=torch.int32)
    act_min = draw(st.integers(-128, 0))
    multiplier, shift = draw(st.integers(2**30, 2**31 - 1)), draw(st.integers(-16, 2))
    channels = None, None
    if draw(st.booleans()):  # per channel (arm_fully_connected_per_channel_s8): the numbers 0
        channels = (
            torch.randint(2**30, 2**31 - 1, (n_out,), generator=gen).to(torch.int32),
            torch.randint(-16, 3, (n_out,), generator=gen).to(torch.int32),
        )
        multiplier, shift = 0, 0
    args = (
        torch.randint(-128, 128, (*lead, n_in), generator=gen, dtype=torch.int8),
        torch.randint(-127, 128, (n_out, n_in), generator=gen, dtype=torch.int8),
        bias,
        None,
        *channels,
        draw(st.integers(-127, 128)),
        draw(st.integers(-128, 127)),
        multiplier,
        shift,
        act_min,
        draw(st.integers(act_min, 127)),
    )
    return Call("linear", args)


@KERNEL_SETTINGS
@given(st.lists(linear_calls(), min_size=25, max_size=25))
def test_linear_bit_exact(kernels: KernelAbi, calls: list[Call]) -> None:
    check_calls(calls, kernels)


@st.composite
def linear_s16_calls(draw: st.DrawFn) -> Call:
    """int16 activations (arm_fully_connected_s16): int16 input, int8 weights in [-127, 127],
    an int64 bias or none, zero offsets, one multiplier, an int16 activation range."""
    lead = draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))
    n_in, n_out = draw(st.integers(1, 600)), draw(st.integers(1, 24))  # past 512 columns
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    bias = None
    if draw(st.booleans()):
        bias = torch.randint(-(2**36), 2**36, (n_out,), generator=gen, dtype=torch.int64)
    act_min = draw(st.integers(-32768, 0))
    args = (
        torch.randint(-32768, 32768, (*lead, n_in), generator=gen, dtype=torch.int16),
        torch.randint(-127, 128, (n_out, n_in), generator=gen, dtype=torch.int8),
        bias,
        None,
        None,
        None,
        0,
        0,
        draw(st.integers(2**30, 2**31 - 1)),
        draw(st.integers(-30, 2)),
        act_min,
        draw(st.integers(act_min, 32767)),
    )
    return Call("linear", args)


@KERNEL_SETTINGS
@given(st.lists(linear_s16_calls(), min_size=25, max_size=25))
def test_linear_s16_bit_exact(kernels: KernelAbi, calls: list[Call]) -> None:
    """25 calls × 10 examples: 250 int16 calls per ISA, every output byte compared."""
    check_calls(calls, kernels)


@st.composite
def linear_s4_calls(draw: st.DrawFn) -> Call:
    """int4 weights (arm_fully_connected_s4): packed [out, in / 2] values in [-8, 7] (an even
    in), int8 input with any offset, an int32 bias or none, one multiplier."""
    from cortex_m_nn.ops import int4

    lead = draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))
    n_in, n_out = 2 * draw(st.integers(1, 40)), draw(st.integers(1, 24))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    bias = None
    if draw(st.booleans()):
        bias = torch.randint(-(2**20), 2**20, (n_out,), generator=gen, dtype=torch.int32)
    act_min = draw(st.integers(-128, 0))
    args = (
        torch.randint(-128, 128, (*lead, n_in), generator=gen, dtype=torch.int8),
        int4.pack(torch.randint(-8, 8, (n_out, n_in), generator=gen, dtype=torch.int8)),
        bias,
        None,
        None,
        None,
        draw(st.integers(-127, 128)),
        draw(st.integers(-128, 127)),
        draw(st.integers(2**30, 2**31 - 1)),
        draw(st.integers(-16, 1)),
        act_min,
        draw(st.integers(act_min, 127)),
    )
    return Call("linear", args)


@KERNEL_SETTINGS
@given(st.lists(linear_s4_calls(), min_size=25, max_size=25))
def test_linear_s4_bit_exact(kernels: KernelAbi, calls: list[Call]) -> None:
    """25 calls × 10 examples: 250 int4-weight calls per ISA, every output byte compared."""
    check_calls(calls, kernels)
