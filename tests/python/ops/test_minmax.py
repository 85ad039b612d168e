"""``cortex_m_nn::maximum`` and ``::minimum`` against arm_maximum_s8's and arm_minimum_s8's
pointer walk transcribed in Python: one table, a row per operator."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.ops.broadcast import cmsis_minmax_supported, collapse, padded
from cortex_m_nn.ops.maximum import maximum
from cortex_m_nn.ops.minimum import minimum

from .independent import broadcast_pairs, cmsis_minmax_walk
from .test_broadcast import shape_pairs


@dataclass(frozen=True)
class MinMax:
    """One operator of the family: its reference, its C element rule and expected values."""

    name: str
    reference: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    #: the C kernel's comparison of one pair (which of a, b it writes)
    pick: Callable[[int, int], int]
    #: the Python builtin of the same choice, for the functional-form check
    builtin: Callable[[int, int], int]
    #: the result of ``ties_and_extremes`` (written out, not computed)
    extremes: tuple[int, ...]

    @property
    def op(self) -> torch._ops.OpOverloadPacket:
        return getattr(torch.ops.cortex_m_nn, self.name)


CASES = [
    MinMax("maximum", maximum, lambda a, b: a if a >= b else b, max, (127, 127, 5, 0)),
    MinMax("minimum", minimum, lambda a, b: b if a >= b else a, min, (-128, -128, 5, -1)),
]
TABLE = pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)


def c_walk(case: MinMax, x1: torch.Tensor, x2: torch.Tensor) -> list[int | None] | None:
    """What arm_<case>_s8 writes (None if its walk leaves the buffers)."""
    d1, d2 = padded(x1.shape), padded(x2.shape)
    out = [max(a, b) for a, b in zip(d1, d2, strict=True)]
    try:
        return cmsis_minmax_walk(
            d1, x1.reshape(-1).tolist(), d2, x2.reshape(-1).tolist(), out, case.pick
        )
    except IndexError:
        return None


def broadcast(case: MinMax, x1: torch.Tensor, x2: torch.Tensor) -> list[int]:
    pairs, _ = broadcast_pairs(x1, x2)
    return [case.pick(a, b) for a, b in pairs]


def _masked(full: list[int], mask: tuple[int, ...]) -> list[int]:
    return [d if keep else 1 for d, keep in zip(full, mask, strict=True)]


@TABLE
def test_c_walk_is_right_exactly_where_supported(case: MinMax) -> None:
    """All 4-D broadcast patterns: the C walk equals broadcasting iff the op accepts them."""
    generator = torch.Generator().manual_seed(3)
    masks = list(itertools.product([0, 1], repeat=4))
    for m1, m2 in itertools.product(masks, masks):
        x1 = torch.randint(-128, 128, _masked([2, 3, 2, 3], m1), generator=generator)
        x2 = torch.randint(-128, 128, _masked([2, 3, 2, 3], m2), generator=generator)
        x1, x2 = x1.to(torch.int8), x2.to(torch.int8)
        right = c_walk(case, x1, x2) == broadcast(case, x1, x2)
        assert right == cmsis_minmax_supported(x1.shape, x2.shape), (x1.shape, x2.shape)
        if right:
            assert case.reference(x1, x2).reshape(-1).tolist() == broadcast(case, x1, x2)
        else:
            with pytest.raises(ValueError, match="collapse"):
                case.reference(x1, x2)


@TABLE
@settings(max_examples=150, deadline=None)
@given(shape_pairs(), st.integers(0, 2**31))
def test_on_collapsed_shapes(case: MinMax, shapes: tuple[list[int], list[int]], seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    x1 = torch.randint(-128, 128, shapes[0], generator=generator, dtype=torch.int8)
    x2 = torch.randint(-128, 128, shapes[1], generator=generator, dtype=torch.int8)
    c1, c2, out = collapse(shapes[0], shapes[1])
    got = case.reference(x1.reshape(c1), x2.reshape(c2))
    assert list(got.shape) == out and got.dtype == torch.int8
    assert got.reshape(-1).tolist() == broadcast(case, x1, x2)
    assert got.reshape(-1).tolist() == c_walk(case, x1.reshape(c1), x2.reshape(c2))


@TABLE
def test_ties_and_extremes(case: MinMax) -> None:
    x1 = torch.tensor([-128, 127, 5, -1], dtype=torch.int8)
    x2 = torch.tensor([127, -128, 5, 0], dtype=torch.int8)
    assert tuple(case.reference(x1, x2).tolist()) == case.extremes


@TABLE
def test_functional_out_and_fake(case: MinMax) -> None:
    x1 = torch.randint(-128, 128, (6, 4), dtype=torch.int8)
    x2 = torch.randint(-128, 128, (1, 4), dtype=torch.int8)
    out = case.op(x1, x2)
    assert out.tolist() == [
        [case.builtin(a, b) for a, b in zip(row, x2[0].tolist(), strict=True)]
        for row in x1.tolist()
    ]
    buffer = torch.empty_like(out)
    assert case.op.out(x1, x2, out=buffer) is buffer
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = case.op(torch.empty(3, 1, dtype=torch.int8), torch.empty(1, 5, dtype=torch.int8))
    assert fake.shape == (3, 5) and fake.dtype == torch.int8
    with pytest.raises(ValueError, match="same rank"):
        case.reference(x1, x2[0])
