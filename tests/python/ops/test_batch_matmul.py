"""``cortex_m_nn::batch_matmul`` against a Python-int transcription of arm_batch_matmul_s8."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.arithmetic import Rounding, use_rounding
from cortex_m_nn.ops.batch_matmul import batch_matmul

from .independent import ref_requantize, wrap32

OP = torch.ops.cortex_m_nn.batch_matmul


def expected(case: dict, single: bool = False) -> torch.Tensor:
    """Rows times rows: out[b, m, n] = sum_k (lhs[b, m, k] + lo) * (rhs[b, n, k] + ro)."""
    lhs, rhs = case["lhs"], case["rhs_transposed"]
    # CMSIS-NN's view: both operands as [B0, B1, rows, K], a batch dimension of 1 repeats.
    lhs4 = lhs.reshape((1,) * (4 - lhs.dim()) + tuple(lhs.shape))
    rhs4 = rhs.reshape((1,) * (4 - rhs.dim()) + tuple(rhs.shape))
    b0, b1 = max(lhs4.shape[0], rhs4.shape[0]), max(lhs4.shape[1], rhs4.shape[1])
    rows, cols = lhs4.shape[2], rhs4.shape[2]
    left, right = lhs4.tolist(), rhs4.tolist()
    out = []
    for i, j in itertools.product(range(b0), range(b1)):
        a = left[i % lhs4.shape[0]][j % lhs4.shape[1]]
        b = right[i % rhs4.shape[0]][j % rhs4.shape[1]]
        for m, n in itertools.product(range(rows), range(cols)):
            acc = sum(
                (x + case["lhs_offset"]) * (y + case["rhs_offset"])
                for x, y in zip(a[m], b[n], strict=True)
            )
            y = ref_requantize(wrap32(acc), case["multiplier"], case["shift"], single)
            y += case["output_offset"]
            out.append(min(max(y, case["activation_min"]), case["activation_max"]))
    batch = torch.broadcast_shapes(lhs.shape[:-2], rhs.shape[:-2])
    return torch.tensor(out, dtype=torch.int8).reshape(*batch, rows, cols)


@st.composite
def cases(draw: st.DrawFn) -> dict:
    batch = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))

    def operand_batch() -> list[int]:
        kept = batch[len(batch) - draw(st.integers(0, len(batch))) :]
        return [d if draw(st.booleans()) else 1 for d in kept]

    m, n, k = draw(st.integers(1, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 40))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    act_min = draw(st.integers(-128, 0))
    return {
        "lhs": torch.randint(-128, 128, (*operand_batch(), m, k), generator=gen, dtype=torch.int8),
        "rhs_transposed": torch.randint(
            -128, 128, (*operand_batch(), n, k), generator=gen, dtype=torch.int8
        ),
        "lhs_offset": -draw(st.integers(-128, 127)),
        "rhs_offset": -draw(st.integers(-128, 127)),
        "output_offset": draw(st.integers(-128, 127)),
        "multiplier": draw(st.integers(2**30, 2**31 - 1)),
        "shift": draw(st.integers(-16, 1)),
        "activation_min": act_min,
        "activation_max": draw(st.integers(act_min, 127)),
    }


@settings(max_examples=80, deadline=None)
@given(cases())
def test_batch_matmul_matches_independent(case: dict) -> None:
    assert torch.equal(batch_matmul(*case.values()), expected(case))


@settings(max_examples=30, deadline=None)
@given(cases())
def test_batch_matmul_single_rounding(case: dict) -> None:
    with use_rounding(Rounding.SINGLE):
        got = batch_matmul(*case.values())
    assert torch.equal(got, expected(case, single=True))


def fixed_case(**changes: object) -> dict:
    gen = torch.Generator().manual_seed(5)
    case = {
        "lhs": torch.randint(-128, 128, (2, 1, 3, 16), generator=gen, dtype=torch.int8),
        "rhs_transposed": torch.randint(-128, 128, (1, 4, 5, 16), generator=gen, dtype=torch.int8),
        "lhs_offset": 128,
        "rhs_offset": -127,
        "output_offset": 5,
        "multiplier": 1717986918,
        "shift": -12,
        "activation_min": -100,
        "activation_max": 100,
    }
    case.update(changes)
    return case


def test_broadcasts_both_batch_dimensions_and_clamps() -> None:
    case = fixed_case()
    out = batch_matmul(*case.values())
    assert out.shape == (2, 4, 3, 5)
    assert torch.equal(out, expected(case))
    assert out.min() >= -100 and out.max() <= 100


def test_the_right_operand_is_transposed() -> None:
    """Identity lhs rows pick rhs *rows*: the result is rhs_transposed itself, transposed."""
    rhs = torch.arange(-6, 6, dtype=torch.int8).reshape(3, 4)  # [N=3, K=4]
    case = fixed_case(
        lhs=torch.eye(4, dtype=torch.int8),
        rhs_transposed=rhs,
        lhs_offset=0,
        rhs_offset=0,
        output_offset=0,
        multiplier=2**30,
        shift=1,  # x 1
        activation_min=-128,
        activation_max=127,
    )
    assert torch.equal(batch_matmul(*case.values()), rhs.T)


def test_functional_out_and_fake() -> None:
    case = fixed_case()
    args = list(case.values())
    out, scratch = OP(*args, 20)
    assert out.shape == (2, 4, 3, 5) and scratch.shape == (20,) and scratch.dtype == torch.int8
    buffer, scratch_buffer = torch.empty_like(out), torch.empty(20, dtype=torch.int8)
    torch.ops.cortex_m_nn.batch_matmul.out(*args, 20, out=buffer, scratch=scratch_buffer)
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = [
            torch.empty(a.shape, dtype=a.dtype) if isinstance(a, torch.Tensor) else a for a in args
        ]
        fake_out, fake_scratch = OP(*fake, 20)
    assert fake_out.shape == (2, 4, 3, 5) and fake_out.dtype == torch.int8
    assert fake_scratch.shape == (20,)


@pytest.mark.parametrize(
    ("lhs", "rhs", "words"),
    [
        ((3, 16), (5, 15), "inner dimension"),
        ((2, 3, 16), (3, 5, 16), "broadcast"),
        ((16,), (5, 16), "2-D to 4-D"),
        ((1, 1, 1, 3, 16), (5, 16), "2-D to 4-D"),
    ],
)
def test_rejects_shapes_cmsis_nn_cannot_multiply(lhs, rhs, words) -> None:
    case = fixed_case(
        lhs=torch.zeros(lhs, dtype=torch.int8), rhs_transposed=torch.zeros(rhs, dtype=torch.int8)
    )
    with pytest.raises(ValueError, match=words):
        batch_matmul(*case.values())
