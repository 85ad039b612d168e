"""``cortex_m_nn::pad`` against a Python transcription of arm_pad_s8's loops, fed the 4-D
``{n, h, w, c}`` dims exactly as the operator's docstring maps them for the kernel."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.pad import pad

OP = torch.ops.cortex_m_nn.pad


def arm_pad_s8(
    data: list[int], value: int, size: list[int], pre: list[int], post: list[int]
) -> list[int]:
    """arm_pad_s8 on 4-D {n, h, w, c}: memsets and memcpys in the C code's order."""
    out_n, out_h, out_w, out_c = (p + s + q for p, s, q in zip(pre, size, post, strict=True))
    output: list[int] = []
    source = 0
    output += [value] * (out_h * out_w * out_c * pre[0])
    for _ in range(size[0]):
        output += [value] * (out_w * out_c * pre[1])
        for _ in range(size[1]):
            output += [value] * (out_c * pre[2])
            for _ in range(size[2]):
                output += [value] * pre[3]
                output += data[source : source + size[3]]
                source += size[3]
                output += [value] * post[3]
            output += [value] * (out_c * post[2])
        output += [value] * (out_w * out_c * post[1])
    output += [value] * (out_h * out_w * out_c * post[0])
    assert len(output) == out_n * out_h * out_w * out_c
    return output


def as_c_call(
    shape: list[int], pre: list[int], post: list[int]
) -> tuple[list[int], list[int], list[int]]:
    """The docstring's mapping: dims right-aligned, leading sizes 1 and leading pads 0."""
    missing = 4 - len(shape)
    return [1] * missing + shape, [0] * missing + pre, [0] * missing + post


@st.composite
def cases(draw: st.DrawFn) -> tuple:
    rank = draw(st.integers(1, 4))
    shape = [draw(st.integers(1, 4)) for _ in range(rank)]
    pre = [draw(st.integers(0, 3)) for _ in range(rank)]
    post = [draw(st.integers(0, 3)) for _ in range(rank)]
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    if draw(st.booleans()):  # the int16 case: the same loops on int16
        x = torch.randint(-32768, 32768, shape, generator=gen, dtype=torch.int32).to(torch.int16)
        return x, pre, post, draw(st.integers(-32768, 32767))
    x = torch.randint(-128, 128, shape, generator=gen, dtype=torch.int8)
    return x, pre, post, draw(st.integers(-128, 127))


@settings(max_examples=120, deadline=None)
@given(cases())
def test_pad_matches_the_c_loops(case: tuple) -> None:
    x, pre, post, value = case
    got = pad(x, pre, post, value)
    assert got.dtype == x.dtype
    assert list(got.shape) == [p + d + q for p, d, q in zip(pre, x.shape, post, strict=True)]
    size, pre4, post4 = as_c_call(list(x.shape), pre, post)
    assert got.reshape(-1).tolist() == arm_pad_s8(x.reshape(-1).tolist(), value, size, pre4, post4)


@pytest.mark.parametrize(
    ("shape", "pre", "post", "value", "message"),
    [
        ((2, 3), [0, -1], [0, 0], 0, "negative"),
        ((2, 3), [0], [0, 0], 0, "pre and post"),
        ((1, 1, 1, 1, 2), [0] * 5, [0] * 5, 0, "1-4 dims"),
        ((2,), [1], [1], 128, "int8"),
    ],
)
def test_pad_refuses_invalid_arguments(shape, pre, post, value, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pad(torch.zeros(shape, dtype=torch.int8), pre, post, value)


def test_pad_functional_out_and_fake() -> None:
    x = torch.randint(-128, 128, (1, 3, 2, 4), dtype=torch.int8)
    args = ([0, 1, 0, 2], [0, 2, 1, 0], -7)
    out = OP(x, *args)
    assert out.shape == (1, 6, 3, 6)
    assert (out[:, :1] == -7).all() and torch.equal(out[:, 1:4, :2, 2:], x)
    buffer = torch.empty_like(out)
    torch.ops.cortex_m_nn.pad.out(x, *args, out=buffer)
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = OP(torch.empty((1, 3, 2, 4), dtype=torch.int8), *args)
    assert fake.shape == (1, 6, 3, 6) and fake.dtype == torch.int8
