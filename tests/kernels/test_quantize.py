"""cortex_m_nn::quantize and ::dequantize on the host runtime against their references: one
table, a row per operator."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.host_kernels import KernelAbi

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS, draw_calls, generator, int8


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


CALLS: dict[str, Callable[[], st.SearchStrategy[Call]]] = {
    "quantize": quantize_calls,
    "dequantize": dequantize_calls,
}


@pytest.mark.parametrize("op", list(CALLS))
@KERNEL_SETTINGS
@given(data=st.data())
def test_bit_exact(kernels: KernelAbi, op: str, data: st.DataObject) -> None:
    check_calls(draw_calls(data, CALLS[op]()), kernels)
