"""``cortex_m_nn::conv2d`` against float64 ``F.conv2d`` on exact integers + Python-int requant."""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.arithmetic import Rounding, use_rounding
from cortex_m_nn.ops.conv2d import conv2d

from .independent import ref_requantize

OP = torch.ops.cortex_m_nn.conv2d


def expected_conv(case: dict, single: bool = False) -> torch.Tensor:
    """Independent: zero-padded float64 conv of (x - zp) in NCHW, then per-element requant."""
    x = case["input"].to(torch.float64) + case["input_offset"]
    w = case["weight"].to(torch.float64).permute(0, 3, 1, 2)
    acc = torch.nn.functional.conv2d(
        x.permute(0, 3, 1, 2),
        w,
        stride=case["stride"],
        padding=case["padding"],
        dilation=case["dilation"],
    ).permute(0, 2, 3, 1)
    acc = acc.round().to(torch.int64) + case["bias"].to(torch.int64)
    mults, shifts = case["multipliers"].tolist(), case["shifts"].tolist()
    out = torch.empty(acc.shape, dtype=torch.int8)
    flat_acc, flat_out = acc.reshape(-1, acc.shape[-1]), out.view(-1, acc.shape[-1])
    for row in range(flat_acc.shape[0]):
        for c, a in enumerate(flat_acc[row].tolist()):
            y = ref_requantize(a, mults[c], shifts[c], single) + case["output_offset"]
            flat_out[row, c] = min(max(y, case["activation_min"]), case["activation_max"])
    return out


def call(case: dict) -> torch.Tensor:
    return conv2d(
        case["input"],
        case["weight"],
        case["bias"],
        case["multipliers"],
        case["shifts"],
        case["stride"],
        case["padding"],
        case["dilation"],
        case["input_offset"],
        case["output_offset"],
        case["activation_min"],
        case["activation_max"],
    )


@st.composite
def conv_cases(draw: st.DrawFn) -> dict:
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    c_in, c_out = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    stride = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    padding = [draw(st.integers(0, 2)), draw(st.integers(0, 2))]
    dilation = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    assume(h + 2 * padding[0] >= dilation[0] * (kh - 1) + 1)
    assume(w + 2 * padding[1] >= dilation[1] * (kw - 1) + 1)
    seed = draw(st.integers(0, 2**31))
    gen = torch.Generator().manual_seed(seed)
    act_min = draw(st.integers(-128, 0))
    return {
        "input": torch.randint(-128, 128, (n, h, w, c_in), generator=gen, dtype=torch.int8),
        "weight": torch.randint(-128, 128, (c_out, kh, kw, c_in), generator=gen, dtype=torch.int8),
        "bias": torch.randint(-(2**16), 2**16, (c_out,), generator=gen, dtype=torch.int32),
        "multipliers": torch.randint(2**30, 2**31 - 1, (c_out,), generator=gen, dtype=torch.int32),
        "shifts": torch.randint(-14, 2, (c_out,), generator=gen, dtype=torch.int32),
        "stride": stride,
        "padding": padding,
        "dilation": dilation,
        "input_offset": -draw(st.integers(-128, 127)),
        "output_offset": draw(st.integers(-128, 127)),
        "activation_min": act_min,
        "activation_max": draw(st.integers(act_min, 127)),
    }


@settings(max_examples=60, deadline=None)
@given(conv_cases())
def test_conv2d_matches_independent(case: dict) -> None:
    assert torch.equal(call(case), expected_conv(case))


@settings(max_examples=20, deadline=None)
@given(conv_cases())
def test_conv2d_single_rounding(case: dict) -> None:
    with use_rounding(Rounding.SINGLE):
        got = call(case)
    assert torch.equal(got, expected_conv(case, single=True))


def fixed_case() -> dict:
    gen = torch.Generator().manual_seed(0)
    return {
        "input": torch.randint(-128, 128, (1, 6, 5, 3), generator=gen, dtype=torch.int8),
        "weight": torch.randint(-128, 128, (4, 3, 3, 3), generator=gen, dtype=torch.int8),
        "bias": torch.tensor([0, 100, -100, 2**20], dtype=torch.int32),
        "multipliers": torch.tensor([2**30, 1518500250, 2**31 - 1, 2**30], dtype=torch.int32),
        "shifts": torch.tensor([-9, -8, -12, 1], dtype=torch.int32),
        "stride": [2, 1],
        "padding": [1, 1],
        "dilation": [1, 1],
        "input_offset": 5,
        "output_offset": -3,
        "activation_min": -100,
        "activation_max": 90,
    }


def test_conv2d_saturates_and_clamps() -> None:
    case = fixed_case()
    out = call(case)
    assert out.shape == (1, 3, 5, 4)
    assert torch.equal(out, expected_conv(case))
    assert (out[..., 3] == 90).all()  # shift > 0 on a large bias saturates
    assert out.min() >= -100 and out.max() <= 90


def test_conv2d_padding_acts_as_zero_point() -> None:
    """A padded element is the input zero point: an all-zero-point input gives only bias."""
    case = fixed_case()
    case["input"] = torch.full((1, 4, 4, 3), -case["input_offset"], dtype=torch.int8)
    case["shifts"] = torch.tensor([0, 0, 0, 0], dtype=torch.int32)
    case["multipliers"] = torch.tensor([2**30] * 4, dtype=torch.int32)  # x 0.5
    case["bias"] = torch.tensor([20, -40, 60, 0], dtype=torch.int32)
    case["output_offset"] = 0
    out = call(case)
    assert out.reshape(-1, 4).unique(dim=0).tolist() == [[10, -20, 30, 0]]


def test_conv2d_functional_out_and_scratch() -> None:
    case = fixed_case()
    args = list(case.values())
    out, scratch = OP(*args, 96)
    assert torch.equal(out, expected_conv(case))
    assert scratch.dtype == torch.int8 and scratch.shape == (96,)
    buffer, scratch_buffer = torch.empty_like(out), torch.empty(96, dtype=torch.int8)
    result = torch.ops.cortex_m_nn.conv2d.out(*args, 96, out=buffer, scratch=scratch_buffer)
    assert result[0] is buffer and result[1] is scratch_buffer
    assert torch.equal(buffer, out)


def test_conv2d_fake_shapes() -> None:
    case = fixed_case()
    with FakeTensorMode():
        fake = {
            k: torch.empty(v.shape, dtype=v.dtype) if isinstance(v, torch.Tensor) else v
            for k, v in case.items()
        }
        fake["input"] = torch.empty((2, 17, 9, 3), dtype=torch.int8)
        fake["dilation"] = [2, 1]
        out, scratch = OP(*fake.values(), 320)
    assert out.shape == (2, 8, 9, 4) and out.dtype == torch.int8
    assert scratch.shape == (320,) and scratch.dtype == torch.int8


def test_conv2d_rejects_channel_mismatch() -> None:
    case = fixed_case()
    case["input"] = torch.zeros((1, 4, 4, 2), dtype=torch.int8)
    with pytest.raises(ValueError):
        call(case)
