"""``cortex_m_nn::svdf``: the reference against a plain-Python transcription of the CMSIS-NN
C functions (``arm_svdf_state_s16_s8`` and ``arm_svdf_s8``: the flat ``memmove`` of the whole
state buffer, the loops, int32 wrapping) over several steps of one state, in both roundings,
and hand-computed cases."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.ops.arithmetic import quantize_multiplier
from cortex_m_nn.ops.svdf import scratch_bytes, svdf, svdf_kernel_sums

from .independent import ref_requantize, wrap32


def c_svdf(x: list[list[int]], state: list[int], p: dict, single: bool) -> list[list[int]]:
    """The C function's scalar path, on ``state`` (a flat [B·F·M] list, updated in place)."""
    batches, size = len(x), len(x[0])
    wf, wt, rank = p["wf"], p["wt"], p["rank"]
    filters, memory = len(wt), len(wt[0])
    low, high = p["state_range"]
    state[:-1] = state[1:]  # memmove(state, state + 1, B·F·M - 1)
    for b in range(batches):
        for f in range(filters):
            acc = sum((x[b][k] - p["input_offset"]) * wf[f][k] for k in range(size))
            v = ref_requantize(wrap32(acc), p["m1"], p["s1"], single)
            state[(b * filters + f) * memory + memory - 1] = min(max(v, low), high)
    out = []
    for b in range(batches):
        a = []
        for f in range(filters):
            row = state[(b * filters + f) * memory : (b * filters + f + 1) * memory]
            a.append(wrap32(sum(s * w for s, w in zip(row, wt[f], strict=True))))
        units = []
        for u in range(filters // rank):
            acc = wrap32((p["bias"][u] if p["bias"] else 0) + sum(a[u * rank : (u + 1) * rank]))
            y = ref_requantize(acc, p["m2"], p["s2"], single) + p["output_offset"]
            units.append(min(max(y, p["low"]), p["high"]))
        out.append(units)
    return out


def _arguments(p: dict, dtype: torch.dtype, sums: bool) -> tuple:
    wf = torch.tensor(p["wf"], dtype=torch.int8)
    bias = None if p["bias"] is None else torch.tensor(p["bias"], dtype=torch.int32)
    kernel_sums = svdf_kernel_sums(wf, p["input_offset"]) if sums else None
    numbers = (p["rank"], p["input_offset"], p["output_offset"], p["m1"], p["s1"], p["m2"])
    tail = (p["s2"], p["low"], p["high"])
    return (wf, torch.tensor(p["wt"], dtype=dtype), bias, kernel_sums, *numbers, *tail)


def layer_sizes(draw: st.DrawFn, size: int, memory: int, units: int) -> tuple[int, ...]:
    """A layer's batches (up to 3), input size, memory, rank (up to 3) and units, each drawn
    from 1 to its bound."""
    return tuple(draw(st.integers(1, high)) for high in (3, size, memory, 3, units))


@st.composite
def layers(draw: st.DrawFn, dtype: torch.dtype) -> tuple[dict, list[int], list]:
    """Parameters, an initial flat state and the inputs of three steps."""
    info = torch.iinfo(dtype)
    batches, size, memory, rank, units = layer_sizes(draw, size=9, memory=6, units=4)
    filters = rank * units
    ints = lambda lo, hi, n: draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))  # noqa: E731
    bound = 127 if dtype is torch.int8 else 1800
    m1, s1 = quantize_multiplier(2.0 ** draw(st.floats(-12, 4)))
    m2, s2 = quantize_multiplier(2.0 ** -draw(st.floats(4, 24)))
    low = draw(st.integers(-128, 0))
    p = {
        "wf": [ints(-127, 127, size) for _ in range(filters)],
        "wt": [ints(-bound, bound, memory) for _ in range(filters)],
        "bias": draw(st.none() | st.just(ints(-(2**20), 2**20, units))),
        "rank": rank,
        "input_offset": draw(st.integers(-128, 127)),
        "output_offset": draw(st.integers(-128, 127)),
        "m1": m1, "s1": s1, "m2": m2, "s2": s2,
        "low": low, "high": draw(st.integers(low, 127)),
        "state_range": (info.min, info.max),
    }  # fmt: skip
    state = ints(info.min, info.max, batches * filters * memory)
    steps = [[ints(-128, 127, size) for _ in range(batches)] for _ in range(3)]
    return p, state, steps


@dataclass(frozen=True)
class Row:
    dtype: torch.dtype
    rounding: Rounding
    sums: bool = False


ROWS = [
    pytest.param(Row(torch.int16, Rounding.DOUBLE), id="state-int16-double"),
    pytest.param(Row(torch.int16, Rounding.SINGLE), id="state-int16-single"),
    pytest.param(Row(torch.int8, Rounding.DOUBLE), id="state-int8-double"),
    pytest.param(Row(torch.int8, Rounding.SINGLE), id="state-int8-single"),
    pytest.param(Row(torch.int8, Rounding.DOUBLE, sums=True), id="state-int8-kernel-sums"),
]


@pytest.mark.parametrize("row", ROWS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_reference_matches_c_loops(row: Row, data: st.DataObject) -> None:
    p, initial, steps = data.draw(layers(row.dtype))
    batches, filters, memory = len(steps[0]), len(p["wt"]), len(p["wt"][0])
    state = torch.tensor(initial, dtype=row.dtype).reshape(batches, filters, memory)
    c_state = list(initial)
    arguments = _arguments(p, row.dtype, row.sums)
    for x in steps:
        want = c_svdf(x, c_state, p, row.rounding is Rounding.SINGLE)
        got = svdf(torch.tensor(x, dtype=torch.int8), state, *arguments, rounding=row.rounding)
        assert got.tolist() == want
        assert state.flatten().tolist() == c_state


#: Multiplier and shift of an exact ×1 requantization (2^30 · 2^(1 - 31)).
IDENTITY = (1 << 30, 1)


def _hand(state: torch.Tensor, x: list[list[int]], bias: list[int] | None, rank: int) -> list:
    wf = torch.tensor([[1, 2], [3, -1]], dtype=torch.int8)
    last = 1000 if state.dtype is torch.int16 else 100
    wt = torch.tensor([[1, 10], [100, last]], dtype=state.dtype)
    b = None if bias is None else torch.tensor(bias, dtype=torch.int32)
    args = (wf, wt, b, None, rank, 1, 0, *IDENTITY, *IDENTITY, -128, 127)
    return svdf(torch.tensor(x, dtype=torch.int8), state, *args).tolist()


def test_hand_computed_steps() -> None:
    """Input offset 1, ×1 requantizations: x = (2, 3) projects to (1·1 + 2·2, 3·1 − 1·2) =
    (5, 1); from state [[7, 8], [9, 4]] the shift leaves [[8, 5], [4, 1]], so the filters
    give 8·1 + 5·10 = 58 and 4·100 + 1·1000 = 1400; rank 1 adds the biases (−8, 0)."""
    state = torch.tensor([[[7, 8], [9, 4]]], dtype=torch.int16)
    assert _hand(state, [[2, 3]], [-8, 0], 1) == [[50, 127]]
    assert state.tolist() == [[[8, 5], [4, 1]]]
    # the next frame (0, 0) projects to (−1·1 − 1·2, −3 + 1) = (−3, −2): [[5, −3], [1, −2]];
    # rank 2 sums both filters, 5 − 30 + 100 − 2000 = −1925, clamped to −128
    assert _hand(state, [[0, 0]], None, 2) == [[-128]]
    assert state.tolist() == [[[5, -3], [1, -2]]]


def test_int8_state_saturates() -> None:
    """An int8 state clamps the new projection to [−128, 127] (it does not wrap): x = (100,
    100) with offset 1 projects to 99 + 198 = 297 and 297 − 99 = 198, both kept as 127."""
    state = torch.zeros((1, 2, 2), dtype=torch.int8)
    _hand(state, [[100, 100]], None, 1)
    assert state[0, :, -1].tolist() == [127, 127]


def test_scratch_is_both_buffers() -> None:
    assert scratch_bytes(2, 6, 3) == 4 * (2 * 6 + 2 * 3)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"wt": torch.zeros((2, 2), dtype=torch.int8)}, "state and weights_time"),
        ({"rank": 3}, "rank 3"),
        ({"state": torch.zeros((2, 2, 2), dtype=torch.int16)}, "is not"),
    ],
)
def test_refuses_inconsistent_arguments(change: dict, message: str) -> None:
    state = change.get("state", torch.zeros((1, 2, 2), dtype=torch.int16))
    wt = change.get("wt", torch.zeros((2, 2), dtype=torch.int16))
    wf = torch.zeros((2, 2), dtype=torch.int8)
    args = (wf, wt, None, None, change.get("rank", 1), 0, 0, *IDENTITY, *IDENTITY, -128, 127)
    with pytest.raises(ValueError, match=message):
        svdf(torch.zeros((1, 2), dtype=torch.int8), state, *args)
