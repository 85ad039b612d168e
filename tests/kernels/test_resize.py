"""cortex_m_nn::resize (our kernel, no CMSIS-NN function) on the host runtime against its
reference, bit for bit: tables as the compiler builds them for every mode, and arbitrary
tables (any in-range index, weights anywhere in 0..ONE, extreme int8 values) that stress the
int32 arithmetic and the rounding of negative sums."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from cortex_m_nn.ops.resize import (
    ONE,
    RESIZE_BILINEAR,
    RESIZE_NEAREST,
    bilinear_table,
    nearest_table,
)

from .harness import Call, CallTable, bit_exact_test
from .strategies import generator, int8


def _compiler_table(draw: st.DrawFn, size: int, out: int, mode: str) -> torch.Tensor:
    scale = draw(st.sampled_from([None, out / size]))
    if mode == "bilinear":
        return bilinear_table(size, out, draw(st.booleans()), scale)
    return nearest_table(size, out, scale, mode == "nearest-exact")


def _any_table(gen: torch.Generator, size: int, out: int, bilinear: bool) -> torch.Tensor:
    if not bilinear:
        return torch.randint(0, size, (out,), generator=gen, dtype=torch.int16)
    indices = torch.randint(0, size, (out, 2), generator=gen, dtype=torch.int16)
    weights = torch.randint(0, ONE + 1, (out, 1), generator=gen, dtype=torch.int16)
    weights[0] = ONE  # the extreme weights are always there
    weights[-1] = 0
    return torch.cat([indices, weights], dim=1)


@st.composite
def resize_calls(draw: st.DrawFn) -> Call:
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 9))
    h, w = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    out_h, out_w = draw(st.integers(1, 17)), draw(st.integers(1, 17))
    mode = draw(st.sampled_from(["nearest", "nearest-exact", "bilinear"]))
    gen = generator(draw)
    if draw(st.booleans()):
        rows = _compiler_table(draw, h, out_h, mode)
        columns = _compiler_table(draw, w, out_w, mode)
    else:
        rows = _any_table(gen, h, out_h, mode == "bilinear")
        columns = _any_table(gen, w, out_w, mode == "bilinear")
    x = int8((n, h, w, c), gen)
    if draw(st.booleans()):  # only the extremes: the largest intermediates
        x = torch.where(x >= 0, 127, -128).to(torch.int8)
    code = RESIZE_BILINEAR if mode == "bilinear" else RESIZE_NEAREST
    return Call("resize", (x, rows, columns, code))


#: operator → its calls (the kernel has no ISA-specific path)
CALLS: CallTable = {"resize": lambda isa: resize_calls()}


test_bit_exact = bit_exact_test(CALLS)
