"""``cortex_m_nn::depthwise_conv2d`` against grouped float64 ``F.conv2d`` + Python-int requant."""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.arithmetic import Rounding, use_rounding
from cortex_m_nn.ops.depthwise_conv2d import depthwise_conv2d

from .independent import ref_requantize

OP = torch.ops.cortex_m_nn.depthwise_conv2d


def expected(case: dict, single: bool = False) -> torch.Tensor:
    """Independent: grouped float64 conv (groups = Cin) of (x - zp), then per-element requant."""
    x = (case["input"].to(torch.float64) + case["input_offset"]).permute(0, 3, 1, 2)
    w = case["weight"][0].to(torch.float64).permute(2, 0, 1).unsqueeze(1)  # [Cout, 1, KH, KW]
    acc = torch.nn.functional.conv2d(
        x,
        w,
        stride=case["stride"],
        padding=case["padding"],
        dilation=case["dilation"],
        groups=x.shape[1],
    ).permute(0, 2, 3, 1)
    acc = acc.round().to(torch.int64) + case["bias"].to(torch.int64)
    mults, shifts = case["multipliers"].tolist(), case["shifts"].tolist()
    rows = acc.reshape(-1, acc.shape[-1]).tolist()
    low, high = case["activation_min"], case["activation_max"]
    out = [
        [
            min(
                max(ref_requantize(a, mults[c], shifts[c], single) + case["output_offset"], low),
                high,
            )
            for c, a in enumerate(row)
        ]
        for row in rows
    ]
    return torch.tensor(out, dtype=torch.int8).reshape(acc.shape)


def call(case: dict) -> torch.Tensor:
    return depthwise_conv2d(*case.values())


@st.composite
def cases(draw: st.DrawFn) -> dict:
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    c_in, mult = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    stride = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    padding = [draw(st.integers(0, 2)), draw(st.integers(0, 2))]
    dilation = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    assume(h + 2 * padding[0] >= dilation[0] * (kh - 1) + 1)
    assume(w + 2 * padding[1] >= dilation[1] * (kw - 1) + 1)
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    c_out = c_in * mult
    act_min = draw(st.integers(-128, 0))
    return {
        "input": torch.randint(-128, 128, (n, h, w, c_in), generator=gen, dtype=torch.int8),
        "weight": torch.randint(-128, 128, (1, kh, kw, c_out), generator=gen, dtype=torch.int8),
        "bias": torch.randint(-(2**16), 2**16, (c_out,), generator=gen, dtype=torch.int32),
        "multipliers": torch.randint(2**30, 2**31 - 1, (c_out,), generator=gen, dtype=torch.int32),
        "shifts": torch.randint(-12, 2, (c_out,), generator=gen, dtype=torch.int32),
        "stride": stride,
        "padding": padding,
        "dilation": dilation,
        "depth_multiplier": mult,
        "input_offset": -draw(st.integers(-128, 127)),
        "output_offset": draw(st.integers(-128, 127)),
        "activation_min": act_min,
        "activation_max": draw(st.integers(act_min, 127)),
    }


@settings(max_examples=60, deadline=None)
@given(cases())
def test_depthwise_matches_independent(case: dict) -> None:
    assert torch.equal(call(case), expected(case))


@settings(max_examples=20, deadline=None)
@given(cases())
def test_depthwise_single_rounding(case: dict) -> None:
    with use_rounding(Rounding.SINGLE):
        got = call(case)
    assert torch.equal(got, expected(case, single=True))


def fixed_case() -> dict:
    gen = torch.Generator().manual_seed(1)
    return {
        "input": torch.randint(-128, 128, (1, 5, 7, 2), generator=gen, dtype=torch.int8),
        "weight": torch.randint(-128, 128, (1, 3, 3, 4), generator=gen, dtype=torch.int8),
        "bias": torch.tensor([0, 10, -10, 2**22], dtype=torch.int32),
        "multipliers": torch.tensor([2**30, 1518500250, 2**31 - 1, 2**30], dtype=torch.int32),
        "shifts": torch.tensor([-7, -8, -9, 2], dtype=torch.int32),
        "stride": [1, 2],
        "padding": [1, 1],
        "dilation": [1, 1],
        "depth_multiplier": 2,
        "input_offset": -3,
        "output_offset": 4,
        "activation_min": -128,
        "activation_max": 127,
    }


def test_depthwise_channel_mapping() -> None:
    """Output channel c reads input channel c // depth_multiplier."""
    case = fixed_case()
    case["weight"] = torch.zeros((1, 1, 1, 4), dtype=torch.int8)
    case["weight"][0, 0, 0] = torch.tensor([1, 2, 3, 4], dtype=torch.int8)
    case.update(padding=[0, 0], stride=[1, 1], input_offset=0, output_offset=0)
    case["bias"] = torch.zeros(4, dtype=torch.int32)
    case["multipliers"] = torch.full((4,), 2**30, dtype=torch.int32)
    case["shifts"] = torch.ones(4, dtype=torch.int32)  # x 1.0
    x = torch.tensor([[[[10, -20]]]], dtype=torch.int8)
    case["input"] = x
    assert call(case).tolist() == [[[[10, 20, -60, -80]]]]


def test_depthwise_fixed_case_and_saturation() -> None:
    case = fixed_case()
    out = call(case)
    assert out.shape == (1, 5, 4, 4)
    assert torch.equal(out, expected(case))
    assert (out[..., 3] == 127).all()


def test_depthwise_functional_out_and_fake() -> None:
    case = fixed_case()
    args = list(case.values())
    out, scratch = OP(*args, 40)
    assert torch.equal(out, expected(case)) and scratch.shape == (40,)
    assert scratch.dtype == torch.int8
    buffer, scratch_buffer = torch.empty_like(out), torch.empty(40, dtype=torch.int8)
    torch.ops.cortex_m_nn.depthwise_conv2d.out(*args, 40, out=buffer, scratch=scratch_buffer)
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = [
            torch.empty(a.shape, dtype=a.dtype) if isinstance(a, torch.Tensor) else a for a in args
        ]
        fake_out, fake_scratch = OP(*fake, 40)
    assert fake_out.shape == out.shape and fake_out.dtype == torch.int8
    assert fake_scratch.shape == (40,)


def test_depthwise_rejects_bad_weight() -> None:
    case = fixed_case()
    case["depth_multiplier"] = 3
    with pytest.raises(ValueError):
        call(case)
