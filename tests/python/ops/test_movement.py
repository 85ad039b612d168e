"""Data movement (slice, narrow, select, split, chunk, unbind, stack, cat of slices, expand,
repeat, flip, roll, pixel_shuffle/unshuffle, channel shuffle, unflatten, movedim, t, permute)
and ``cortex_m_nn::strided_copy``.

One case table: every row is a model taking an NCHW input and moving its bytes. Each row is
checked twice: its lowering (no fallback, ``--verify`` passes, the operators expected; a pure
view adds none, and PT2E inserts no requantization), and its implementation: the lowered
graph's output equals the row's function applied by torch to the int8 input, dequantized.
The operator's reference is held against index arithmetic in Python ints.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.check.harness import check_dialect, count_operators
from cortex_m_nn.core.families import QUANTIZE
from cortex_m_nn.core.target import Target
from cortex_m_nn.lower.gather import as_strided
from cortex_m_nn.ops.strided_copy import strided_copy, strided_span

Move = Callable[[torch.Tensor], torch.Tensor | tuple[torch.Tensor, ...]]
COPY, TRANSPOSE, CONCAT = "cortex_m_nn.strided_copy", "cortex_m_nn.transpose", "cortex_m_nn.concat"


def row(
    name: str,
    shape: tuple[int, ...],
    move: Move,
    copies: int = 0,
    transposes: int = 0,
    concats: int = 0,
) -> object:
    after = {COPY: copies, TRANSPOSE: transposes, CONCAT: concats}
    return pytest.param(name, shape, move, after, id=name)


def shuffle(x: torch.Tensor, groups: int = 2) -> torch.Tensor:
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)


ROWS = [
    row("slice_channels", (1, 4, 6, 6), lambda x: x[:, 1:3], copies=1),
    row("slice_step_height", (1, 4, 6, 6), lambda x: x[:, :, ::2], copies=1),
    row("slice_step_width", (1, 4, 6, 7), lambda x: x[..., 1::3], copies=1),
    row("slice_every_dim", (1, 4, 6, 6), lambda x: x[:, 1:, 1:5:2, ::4], copies=1),
    row("slice_batch", (3, 2, 4, 4), lambda x: x[1:], copies=1),
    row("select_single_channel", (1, 1, 4, 5), lambda x: x[:, 0]),
    row("slice_3d", (2, 5, 9), lambda x: x[:, 1:4, 2::2], copies=1),
    row("narrow", (1, 4, 6, 6), lambda x: x.narrow(3, 2, 3), copies=1),
    row("select_channel", (1, 4, 6, 6), lambda x: x[:, 2], copies=1),
    row("select_negative", (1, 4, 6, 6), lambda x: x[:, :, -1], copies=1),
    row("select_batch", (2, 3, 4, 4), lambda x: x[-1], copies=1),
    row("chunk", (1, 4, 5, 5), lambda x: x.chunk(2, 1), copies=2),
    row("split", (1, 4, 5, 6), lambda x: x.split(4, dim=3), copies=2),
    row("split_with_sizes", (1, 4, 5, 5), lambda x: x.split([1, 3], 1), copies=2),
    row("unbind", (1, 3, 4, 5), lambda x: x.unbind(2), copies=4),
    # slices of one tensor put back together: one move of that tensor when one does it
    row("stack_of_slices", (1, 4, 5, 5), lambda x: torch.stack([x[:, 0], x[:, 2]], 1), copies=1),
    row("stack_of_unbind", (1, 3, 4, 5), lambda x: torch.stack(x.unbind(2)[::-1], 2), copies=1),
    row("cat_of_slices", (1, 4, 5, 5), lambda x: torch.cat([x[:, :1], x[:, 1:3]], 1), copies=1),
    row("cat_of_slices_in_order", (1, 4, 5, 5), lambda x: torch.cat([x[:, :2], x[:, 2:]], 1)),
    row("cat_of_swapped_halves", (1, 4, 5, 5), lambda x: torch.cat([x[:, 2:], x[:, :2]], 1), 1),
    row(
        "cat_of_rotated_slices", (1, 4, 5, 5), lambda x: torch.cat([x[:, 1:], x[:, :1]], 1), 2, 0, 1
    ),
    row("expand", (1, 4, 5, 5), lambda x: x[:, :1].expand(-1, 3, -1, -1), copies=1),
    row("expand_batch", (1, 1, 4, 4), lambda x: x.expand(2, 3, 4, 4), copies=1),
    row("repeat", (1, 2, 3, 4), lambda x: x.repeat(1, 2, 1, 3), copies=1),
    row("repeat_new_dim", (1, 2, 3, 4), lambda x: x.repeat(2, 1, 1, 1, 1), copies=1),
    row("flip_width", (1, 4, 5, 6), lambda x: x.flip(3), copies=1),
    row("flip_channels_height", (1, 4, 5, 6), lambda x: x.flip(1, 2), copies=1),
    row("roll_width", (1, 4, 5, 6), lambda x: x.roll(2, 3), 2, 0, 1),
    row("roll_two_dims", (1, 4, 5, 6), lambda x: x.roll((1, -2), (1, 2)), 4, 0, 2),
    row("pixel_shuffle", (1, 8, 3, 3), lambda x: F.pixel_shuffle(x, 2), copies=1),
    row("pixel_unshuffle", (1, 2, 6, 6), lambda x: F.pixel_unshuffle(x, 3), copies=1),
    # a permute of the graph input is folded into the input quantize: no operator
    row("channel_shuffle", (1, 8, 4, 4), shuffle),
    row("channel_shuffle_of_a_slice", (1, 9, 4, 4), lambda x: shuffle(x[:, 1:]), copies=1),
    row("channel_shuffle_of_a_flip", (1, 8, 4, 4), lambda x: shuffle(x.flip(3)), copies=1),
    row("unflatten_channels", (1, 4, 3, 3), lambda x: x.unflatten(1, (2, 2)), transposes=1),
    row("movedim_to_channels_last", (1, 4, 5, 6), lambda x: x.movedim(1, 3)),
    row("movedim_3d", (2, 4, 6), lambda x: x.movedim(2, 0), transposes=1),
    row("t", (5, 7), lambda x: x.t()),
    row("t_of_a_slice", (5, 7), lambda x: x[1:].t(), copies=1),
    row("permute_5d", (2, 3, 1, 4, 5), lambda x: x[1:].permute(4, 2, 0, 3, 1), copies=1),
    row("permute_6d", (2, 3, 2, 4, 2, 3), lambda x: x.permute(5, 3, 1, 4, 0, 2)),
    row(
        "permute_6d_of_a_flip",
        (2, 3, 2, 4, 2, 3),
        lambda x: x.flip(0).permute(5, 3, 1, 4, 0, 2),
        copies=1,
    ),
]


class Moves(nn.Module):
    def __init__(self, move: Move) -> None:
        super().__init__()
        self.move = move

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        return self.move(x)


@functools.cache
def compiled(name: str, target: str):
    (param,) = [p for p in ROWS if p.values[0] == name]
    _, shape, move, after = param.values
    example = torch.randn(*shape, generator=torch.Generator().manual_seed(3))
    return check_dialect(Moves(move), (example,), target=Target.parse(target), after=after)[0]


#: Rows also compiled for cortex-m33 (the layout decisions do not depend on the core).
ON_M33 = {"slice_every_dim", "unbind", "repeat", "roll_width", "pixel_shuffle", "permute_6d"}
TARGETS = [
    pytest.param(p.values[0], t, id=f"{p.values[0]}-{t}")
    for p in ROWS
    for t in ("cortex-m55", "cortex-m33")
    if t == "cortex-m55" or p.values[0] in ON_M33
]


@pytest.mark.parametrize(("name", "target"), TARGETS)
def test_lowers_with_no_fallback(name: str, target: str) -> None:
    """0 fallbacks, verify passes and the operator counts are those of the row (in
    ``compiled``); only our operators and views remain, and no requantization."""
    program = compiled(name, target)
    assert not [r for r in program.records if not r.lowered]
    counts = count_operators(program.lowered)
    (after,) = [p.values[3] for p in ROWS if p.values[0] == name]
    allowed = {"cortex_m_nn.quantize", "cortex_m_nn.dequantize", *after}
    assert set(counts) <= {*allowed, "aten.view", "aten.reshape"}  # reshape: of the float input
    quantizes = [n for n in program.stages.quantized.graph.nodes if n.target in QUANTIZE]
    assert len({(float(q.args[1]), int(q.args[2])) for q in quantizes}) == 1


@pytest.mark.parametrize(("name", "shape", "move", "after"), ROWS)
def test_moves_the_int8_bytes_torch_moves(name: str, shape, move: Move, after) -> None:
    """The lowered graph on float inputs equals ``move`` applied by torch to the quantized
    int8 input, then dequantized: exact, as nothing is computed."""
    program = compiled(name, "cortex-m55")
    (quantize,) = [n for n in program.stages.quantized.graph.nodes if n.target in QUANTIZE][:1]
    scale, zero_point = float(quantize.args[1]), int(quantize.args[2])
    for seed in range(3):
        x = 2 * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
        q = torch.clamp(torch.round(x / scale) + zero_point, -128, 127).to(torch.int8)
        want = move(q)
        want = want if isinstance(want, tuple) else (want,)
        got = program.lowered(x)
        got = got if isinstance(got, tuple | list) else (got,)
        for w, g in zip(want, got, strict=True):
            assert torch.equal((w.to(torch.float32) - zero_point) * scale, g)


# --- the reference of cortex_m_nn::strided_copy --------------------------------------------


def index_arithmetic(
    values: list[int], sizes: list[int], strides: list[int], offset: int
) -> list[int]:
    """Row-major over ``sizes``: element ``offset + Σ i_k · strides[k]`` of ``values``."""
    return [
        values[offset + sum(i * s for i, s in zip(index, strides, strict=True))]
        for index in itertools.product(*(range(n) for n in sizes))
    ]


@st.composite
def copies(draw: st.DrawFn) -> tuple[torch.Tensor, list[int], list[int], int]:
    rank = draw(st.integers(1, 8))
    sizes = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    strides = draw(st.lists(st.integers(-6, 6), min_size=rank, max_size=rank))
    low, high = strided_span(sizes, strides, 0)
    offset = -low + draw(st.integers(0, 2))
    numel = offset + high + 1 + draw(st.integers(0, 2))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    return (
        torch.randint(-128, 128, (numel,), generator=gen, dtype=torch.int8),
        sizes,
        strides,
        offset,
    )


@settings(max_examples=100, deadline=None)
@given(copies())
def test_strided_copy_matches_index_arithmetic(case) -> None:
    x, sizes, strides, offset = case
    got = strided_copy(x, sizes, strides, offset)
    assert list(got.shape) == sizes and got.dtype == torch.int8
    assert got.reshape(-1).tolist() == index_arithmetic(x.tolist(), sizes, strides, offset)


@settings(max_examples=100, deadline=None)
@given(copies())
def test_as_strided_finds_every_affine_map(case) -> None:
    """Positions made by any strided copy are recognised, with no more dims than given."""
    x, sizes, strides, offset = case
    mapping = torch.tensor(index_arithmetic(list(range(x.numel())), sizes, strides, offset))
    found = as_strided(mapping)
    assert found is not None
    found_sizes, found_strides, found_offset = found
    assert len(found_sizes) <= max(1, sum(n > 1 for n in sizes))
    rebuilt = index_arithmetic(list(range(x.numel())), found_sizes, found_strides, found_offset)
    assert rebuilt == mapping.tolist()


@pytest.mark.parametrize("order", [[0, 1, 3, 2], [2, 0, 1], [0, 1, 2, 4]])
def test_as_strided_refuses_maps_that_are_not_affine(order: list[int]) -> None:
    assert as_strided(torch.tensor(order)) is None


@pytest.mark.parametrize(
    ("numel", "sizes", "strides", "offset", "message"),
    [
        (3, [2, 3], [1, 1], 0, "outside"),
        (4, [2], [-1], 0, "outside"),
        (4, [0], [1], 0, "positive"),
        (4, [1] * 9, [1] * 9, 0, "1-8"),
        (4, [2], [1, 1], 0, "one stride"),
    ],
)
def test_strided_copy_refuses_reads_outside_the_input(
    numel, sizes, strides, offset, message
) -> None:
    with pytest.raises(ValueError, match=message):
        strided_copy(torch.zeros(numel, dtype=torch.int8), sizes, strides, offset)


def test_strided_copy_functional_out_and_fake() -> None:
    x = torch.arange(-6, 6, dtype=torch.int8).view(3, 4)
    out = torch.ops.cortex_m_nn.strided_copy(x, [2, 3], [0, -2], 11)
    assert out.tolist() == [[5, 3, 1], [5, 3, 1]]
    buffer = torch.empty_like(out)
    torch.ops.cortex_m_nn.strided_copy.out(x, [2, 3], [0, -2], 11, out=buffer)
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = torch.ops.cortex_m_nn.strided_copy(
            torch.empty(12, dtype=torch.int8), [2, 3], [0, -2], 11
        )
    assert fake.shape == (2, 3) and fake.dtype == torch.int8 and math.prod(fake.shape) == 6
