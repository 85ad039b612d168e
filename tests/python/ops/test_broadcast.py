"""Broadcasting of the binary operators: shape checks and the lowering's shape collapsing."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cortex_m_nn.ops.broadcast import (
    broadcast_shape,
    cmsis_minmax_supported,
    collapse,
    padded,
)

from .independent import broadcast_pairs


@st.composite
def shape_pairs(draw: st.DrawFn, max_rank: int = 4) -> tuple[list[int], list[int]]:
    """Two broadcastable shapes of the same rank (each dimension full or 1 in either)."""
    out = draw(st.lists(st.integers(1, 4), min_size=1, max_size=max_rank))
    first = [d if draw(st.booleans()) else 1 for d in out]
    second = [d if draw(st.booleans()) else 1 for d in out]
    return first, second


def test_broadcast_shape_accepts_and_refuses() -> None:
    assert broadcast_shape("add", [2, 1, 3], [1, 4, 3]) == [2, 4, 3]
    with pytest.raises(ValueError, match="same rank"):
        broadcast_shape("add", [2, 3], [3])
    with pytest.raises(ValueError, match="same rank"):
        broadcast_shape("add", [1] * 5, [1] * 5)
    with pytest.raises(ValueError, match="do not broadcast"):
        broadcast_shape("mul", [2, 3], [2, 2])


@settings(max_examples=200, deadline=None)
@given(shape_pairs(max_rank=6))
def test_collapse_keeps_every_element_pairing(shapes: tuple[list[int], list[int]]) -> None:
    first, second = shapes
    generator = torch.Generator().manual_seed(0)
    x1 = torch.randint(-128, 128, first, generator=generator)
    x2 = torch.randint(-128, 128, second, generator=generator)
    c1, c2, out = collapse(first, second)
    pairs, full = broadcast_pairs(x1, x2)
    collapsed_pairs, collapsed_out = broadcast_pairs(x1.reshape(c1), x2.reshape(c2))
    assert collapsed_pairs == pairs and collapsed_out == out
    assert c1 == [1] or all(max(a, b) > 1 for a, b in zip(c1, c2, strict=True))
    kinds = [(a == o, b == o) for a, b, o in zip(c1, c2, out, strict=True)]
    assert all(k != j for k, j in itertools.pairwise(kinds))  # neighbours differ
    assert len(out) <= len(full)


def test_collapse_common_cases() -> None:
    nhwc, per_channel, scalar, spatial = [1, 5, 6, 8], [1, 1, 1, 8], [1, 1, 1, 1], [1, 5, 6, 1]
    assert collapse(nhwc, nhwc) == ([240], [240], [240])
    assert collapse(nhwc, per_channel) == ([30, 8], [1, 8], [30, 8])
    assert collapse(per_channel, nhwc) == ([1, 8], [30, 8], [30, 8])
    assert collapse(nhwc, scalar) == ([240], [1], [240])
    assert collapse(nhwc, spatial) == ([30, 8], [30, 1], [30, 8])
    assert collapse(scalar, scalar) == ([1], [1], [1])


def test_collapsed_shapes_are_what_cmsis_min_max_supports() -> None:
    """Every 4-D mask pair, collapsed, avoids the pattern arm_maximum_s8 walks wrongly."""
    full = [2, 3, 2, 3]
    masks = list(itertools.product([0, 1], repeat=4))
    refused = 0
    for m1, m2 in itertools.product(masks, masks):
        first = [d if k else 1 for d, k in zip(full, m1, strict=True)]
        second = [d if k else 1 for d, k in zip(full, m2, strict=True)]
        refused += not cmsis_minmax_supported(first, second)
        c1, c2, _ = collapse(first, second)
        assert cmsis_minmax_supported(c1, c2), (first, second, c1, c2)
    assert refused > 0  # uncollapsed, some pairs are refused


def test_padded() -> None:
    assert padded([5]) == [1, 1, 1, 5]
    assert padded([2, 3, 4, 5]) == [2, 3, 4, 5]
