"""``cortex_m_nn::concat`` against Python transcriptions of arm_concatenation_s8_{x,y,z,w},
called per input exactly as the operator's docstring tells the kernel to."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.concat import concat

OP = torch.ops.cortex_m_nn.concat


def concat_x(src, x, y, z, w, out, output_x, offset_x) -> None:
    o = offset_x
    for row in range(y * z * w):
        out[o : o + x] = src[row * x : (row + 1) * x]
        o += output_x


def concat_y(src, x, y, z, w, out, output_y, offset_y) -> None:
    o = offset_y * x
    for tile in range(z * w):
        out[o : o + x * y] = src[tile * x * y : (tile + 1) * x * y]
        o += x * output_y


def concat_z(src, x, y, z, w, out, output_z, offset_z) -> None:
    o = offset_z * x * y
    for batch in range(w):
        out[o : o + x * y * z] = src[batch * x * y * z : (batch + 1) * x * y * z]
        o += x * y * output_z


def concat_w(src, x, y, z, w, out, offset_w) -> None:
    o = offset_w * x * y * z
    out[o : o + x * y * z * w] = src


def expected(inputs: list[torch.Tensor], dim: int) -> list[int]:
    """The kernel's loop: [w, z, y, x] = shape left-padded to 4-D; function chosen by dim."""
    rank = inputs[0].dim()
    d4 = dim + 4 - rank
    shapes = [[1] * (4 - rank) + list(t.shape) for t in inputs]
    total = list(shapes[0])
    total[d4] = sum(s[d4] for s in shapes)
    out = [None] * (total[0] * total[1] * total[2] * total[3])
    offset = 0
    for tensor, (w, z, y, x) in zip(inputs, shapes, strict=True):
        src = tensor.reshape(-1).tolist()
        if d4 == 3:
            concat_x(src, x, y, z, w, out, total[3], offset)
        elif d4 == 2:
            concat_y(src, x, y, z, w, out, total[2], offset)
        elif d4 == 1:
            concat_z(src, x, y, z, w, out, total[1], offset)
        else:
            concat_w(src, x, y, z, w, out, offset)
        offset += [w, z, y, x][d4]
    assert None not in out
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[torch.Tensor], int]:
    rank = draw(st.integers(1, 4))
    dim = draw(st.integers(0, rank - 1))
    shape = [draw(st.integers(1, 4)) for _ in range(rank)]
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    inputs = []
    for _ in range(draw(st.integers(1, 4))):
        shape[dim] = draw(st.integers(1, 4))
        inputs.append(torch.randint(-128, 128, shape, generator=gen, dtype=torch.int8))
    return inputs, dim


@settings(max_examples=120, deadline=None)
@given(cases())
def test_concat_matches_the_c_functions(case: tuple[list[torch.Tensor], int]) -> None:
    inputs, dim = case
    got = concat(inputs, dim)
    assert got.reshape(-1).tolist() == expected(inputs, dim)
    assert got.shape[dim] == sum(t.shape[dim] for t in inputs)


@pytest.mark.parametrize(
    ("shapes", "dim", "message"),
    [
        ([(2, 3), (3, 3)], 1, "cannot concatenate"),
        ([(2, 3), (2, 3, 1)], 0, "cannot concatenate"),
        ([(2, 3)], 2, "not one of"),
        ([(2, 3)], -1, "not one of"),
        ([(1, 1, 1, 1, 1)], 0, "1-4 dims"),
        ([(40000,), (30000,)], 0, "uint16"),
        ([(65536,)], 0, "uint16"),
    ],
)
def test_concat_refuses_invalid_arguments(shapes, dim: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        concat([torch.zeros(s, dtype=torch.int8) for s in shapes], dim)


def test_concat_functional_out_and_fake() -> None:
    a = torch.randint(-128, 128, (1, 2, 3, 4), dtype=torch.int8)
    b = torch.randint(-128, 128, (1, 2, 3, 1), dtype=torch.int8)
    out = OP([a, b], 3)
    assert out.reshape(-1).tolist() == expected([a, b], 3)
    buffer = torch.empty_like(out)
    torch.ops.cortex_m_nn.concat.out([a, b], 3, out=buffer)
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = OP([torch.empty((1, 2, 3, 4), dtype=torch.int8)] * 3, 1)
    assert fake.shape == (1, 6, 3, 4) and fake.dtype == torch.int8
