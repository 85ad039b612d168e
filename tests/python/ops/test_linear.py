"""``cortex_m_nn::linear`` against a Python-int transcription of arm_fully_connected_s8."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.arithmetic import Rounding, use_rounding
from cortex_m_nn.ops.linear import kernel_sums, linear

from .independent import ref_requantize, wrap32

OP = torch.ops.cortex_m_nn.linear


def expected(case: dict, single: bool = False) -> torch.Tensor:
    x, w = case["input"], case["weight"]
    bias = case["bias"].tolist() if case["bias"] is not None else [0] * w.shape[0]
    rows = x.reshape(-1, x.shape[-1]).tolist()
    out = []
    for row in rows:
        out_row = []
        for o, weights in enumerate(w.tolist()):
            acc = bias[o] + sum(
                (xi + case["input_offset"]) * wi for xi, wi in zip(row, weights, strict=True)
            )
            y = ref_requantize(wrap32(acc), case["multiplier"], case["shift"], single)
            y += case["output_offset"]
            out_row.append(min(max(y, case["activation_min"]), case["activation_max"]))
        out.append(out_row)
    return torch.tensor(out, dtype=torch.int8).reshape(*x.shape[:-1], w.shape[0])


@st.composite
def cases(draw: st.DrawFn) -> dict:
    lead = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    n_in, n_out = draw(st.integers(1, 40)), draw(st.integers(1, 12))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    has_bias = draw(st.booleans())
    act_min = draw(st.integers(-128, 0))
    return {
        "input": torch.randint(-128, 128, (*lead, n_in), generator=gen, dtype=torch.int8),
        "weight": torch.randint(-128, 128, (n_out, n_in), generator=gen, dtype=torch.int8),
        "bias": torch.randint(-(2**18), 2**18, (n_out,), generator=gen, dtype=torch.int32)
        if has_bias
        else None,
        "kernel_sums": None,
        "input_offset": -draw(st.integers(-128, 127)),
        "output_offset": draw(st.integers(-128, 127)),
        "multiplier": draw(st.integers(2**30, 2**31 - 1)),
        "shift": draw(st.integers(-14, 1)),
        "activation_min": act_min,
        "activation_max": draw(st.integers(act_min, 127)),
    }


@settings(max_examples=80, deadline=None)
@given(cases())
def test_linear_matches_independent(case: dict) -> None:
    assert torch.equal(linear(*case.values()), expected(case))


@settings(max_examples=30, deadline=None)
@given(cases())
def test_linear_single_rounding(case: dict) -> None:
    with use_rounding(Rounding.SINGLE):
        got = linear(*case.values())
    assert torch.equal(got, expected(case, single=True))


def fixed_case() -> dict:
    gen = torch.Generator().manual_seed(2)
    return {
        "input": torch.randint(-128, 128, (2, 3, 16), generator=gen, dtype=torch.int8),
        "weight": torch.randint(-128, 128, (5, 16), generator=gen, dtype=torch.int8),
        "bias": torch.tensor([0, 1000, -1000, 2**24, -(2**24)], dtype=torch.int32),
        "kernel_sums": None,
        "input_offset": 128,
        "output_offset": -128,
        "multiplier": 1717986918,
        "shift": -8,
        "activation_min": -128,
        "activation_max": 127,
    }


def test_linear_saturates() -> None:
    out = linear(*fixed_case().values())
    assert (out[..., 3] == 127).all() and (out[..., 4] == -128).all()
    assert torch.equal(out, expected(fixed_case()))


@settings(max_examples=60, deadline=None)
@given(cases())
def test_linear_kernel_sums_path(case: dict) -> None:
    """MVE form: bias folded with the input offset into per-row sums, same result."""
    w, bias = case["weight"].tolist(), case["bias"]
    sums = [
        wrap32((0 if bias is None else int(bias[o])) + case["input_offset"] * sum(row))
        for o, row in enumerate(w)
    ]
    assert torch.equal(kernel_sums(case["weight"], bias, case["input_offset"]), torch.tensor(sums))
    mve = dict(case, bias=None, kernel_sums=torch.tensor(sums, dtype=torch.int32))
    assert torch.equal(linear(*mve.values()), expected(case))


def test_linear_refuses_bias_and_kernel_sums() -> None:
    case = dict(fixed_case(), kernel_sums=torch.zeros(5, dtype=torch.int32))
    with pytest.raises(ValueError, match="not both"):
        linear(*case.values())


def test_linear_functional_out_and_fake() -> None:
    case = fixed_case()
    args = list(case.values())
    out = OP(*args)
    assert out.shape == (2, 3, 5) and out.dtype == torch.int8
    buffer = torch.empty_like(out)
    torch.ops.cortex_m_nn.linear.out(*args, out=buffer)
    assert torch.equal(buffer, out)
    no_bias = dict(case, bias=None)
    assert torch.equal(OP(*no_bias.values()), expected(no_bias))
    with FakeTensorMode():
        fake = [
            torch.empty(a.shape, dtype=a.dtype) if isinstance(a, torch.Tensor) else a for a in args
        ]
        fake_out = OP(*fake)
    assert fake_out.shape == (2, 3, 5) and fake_out.dtype == torch.int8


def test_linear_rejects_mismatch() -> None:
    case = dict(fixed_case(), weight=torch.zeros((5, 15), dtype=torch.int8))
    with pytest.raises(ValueError):
        linear(*case.values())
