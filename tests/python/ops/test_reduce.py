"""``cortex_m_nn::reduce`` against a plain-Python computation: sums of ``x - zero_point``
requantized by the independent ``arm_nn_requantize`` transcription (both roundings), max and
min by Python's own; then against PT2E's float mean/sum within 1 LSB, and the checks."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.arithmetic import Rounding
from cortex_m_nn.ops.reduce import MAX, MIN, SUM, reduce, sum_parameters

from .independent import ref_requantize


def python_reduce(x: torch.Tensor, dims: list[int], args: list[int], single: bool) -> list:
    """Per output position (reduced dims at 0, row-major), the reduction in Python ints."""
    kind, input_offset, output_offset, multiplier, shift = args
    shape = list(x.shape)
    values = x.tolist()

    def at(index: tuple[int, ...]) -> int:
        value = values
        for i in index:
            value = value[i]
        return value

    kept = [range(1) if d in dims else range(n) for d, n in enumerate(shape)]
    result = []
    for position in itertools.product(*kept):
        ranges = [
            range(n) if d in dims else range(p, p + 1)
            for d, (n, p) in enumerate(zip(shape, position, strict=True))
        ]
        items = [at(index) for index in itertools.product(*ranges)]
        if kind == MAX:
            result.append(max(items))
        elif kind == MIN:
            result.append(min(items))
        else:
            acc = sum(v + input_offset for v in items)
            y = ref_requantize(acc, multiplier, shift, single) + output_offset
            result.append(min(max(y, -128), 127))
    return result


@st.composite
def calls(draw: st.DrawFn) -> tuple[torch.Tensor, list[int], list[int]]:
    shape = draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))
    dims = sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    x = torch.randint(-128, 128, shape, generator=gen, dtype=torch.int8)
    kind = draw(st.sampled_from([SUM, SUM, MAX, MIN]))
    if kind != SUM:
        return x, dims, [kind, 0, 0, 0, 0]
    count = math.prod(shape[d] for d in dims)
    ratio = draw(st.floats(1 / (4 * count), 4.0))
    multiplier, shift = sum_parameters(1.0, 1 / ratio)
    zps = draw(st.integers(-128, 127)), draw(st.integers(-128, 127))
    return x, dims, [SUM, -zps[0], zps[1], multiplier, shift]


@pytest.mark.parametrize("rounding", list(Rounding))
@settings(max_examples=120, deadline=None)
@given(case=calls())
def test_reference_is_the_plain_python_reduction(rounding: Rounding, case) -> None:
    x, dims, args = case
    got = reduce(x, dims, *args, rounding=rounding)
    assert list(got.shape) == [1 if d in dims else n for d, n in enumerate(x.shape)]
    assert got.reshape(-1).tolist() == python_reduce(x, dims, args, rounding is Rounding.SINGLE)


@settings(max_examples=80, deadline=None)
@given(
    case=calls(),
    scale=st.floats(1e-3, 1.0),
    out_ratio=st.floats(0.5, 2.0),
    mean=st.booleans(),
)
def test_sum_and_mean_are_the_float_ones_within_one_lsb(case, scale, out_ratio, mean) -> None:
    """``quantize(sum or mean of dequantize(x))`` as PT2E computes it, within 1 LSB."""
    x, dims, (_, input_offset, output_offset, *_) = case
    count = math.prod(x.shape[d] for d in dims)
    real = (x.to(torch.float64) + input_offset) * scale
    real = real.mean(dims, keepdim=True) if mean else real.sum(dims, keepdim=True)
    out_scale = scale * out_ratio * (1 if mean else count)
    multiplier, shift = sum_parameters(scale, out_scale, count if mean else 1)
    got = reduce(x, dims, SUM, input_offset, output_offset, multiplier, shift)
    want = (torch.round(real / out_scale) + output_offset).clamp(-128, 127)
    assert (got.to(torch.float64) - want).abs().max() <= 1


def test_hand_computed() -> None:
    x = torch.tensor([[1, 2, 3], [-4, 5, 127]], dtype=torch.int8)
    assert reduce(x, [1], MAX, 0, 0, 0, 0).tolist() == [[3], [127]]
    assert reduce(x, [0], MIN, 0, 0, 0, 0).tolist() == [[-4, 2, 3]]
    half = sum_parameters(1.0, 1.0, 2)  # a mean of two, output scale = input scale
    # input zero point 1, output -3: (0 + -5) / 2 = -2.5 → -2 and (1 + 4) / 2 = 2.5 → 3 (the
    # doubling high multiply rounds ties towards +inf); (2 + 126) / 2 = 64
    assert reduce(x, [0], SUM, -1, -3, *half).tolist() == [[-2 - 3, 3 - 3, 64 - 3]]


@pytest.mark.parametrize(
    ("shape", "dims", "args", "match"),
    [
        ((2, 3), [], [SUM, 0, 0, 1 << 30, 0], "dims"),
        ((2, 3), [1, 0], [SUM, 0, 0, 1 << 30, 0], "dims"),
        ((2, 3), [2], [SUM, 0, 0, 1 << 30, 0], "dims"),
        ((2, 3, 1, 1, 1), [1], [SUM, 0, 0, 1 << 30, 0], "rank"),
        ((2, 3), [1], [MAX, 0, 1, 0, 0], "no requantization"),
        ((2, 3), [1], [3, 0, 0, 0, 0], "kind"),
        ((2, 3), [1], [SUM, 300, 0, 1 << 30, 0], "offsets"),
        ((2, 3), [1], [SUM, 0, 0, 1 << 30, 31], "requantization"),
    ],
)
def test_bad_arguments_are_refused(shape, dims, args, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        reduce(torch.zeros(shape, dtype=torch.int8), dims, *args)
