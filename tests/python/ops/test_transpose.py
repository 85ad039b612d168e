"""``cortex_m_nn::transpose`` against index arithmetic in Python ints, and the layout pass that
composes a model's permutes with the channels-last storage and collapses them."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx import GraphModule

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.core.target import Target
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import as_transpose, collapse, permute
from cortex_m_nn.ops.transpose import transpose

OP = torch.ops.cortex_m_nn.transpose
NHWC = [0, 2, 3, 1]


def expected(values: list[int], shape: list[int], permutation: list[int]) -> list[int]:
    """Output in row-major order: output index o reads input index i with i[p[k]] = o[k]."""
    out_shape = [shape[p] for p in permutation]
    strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    result = []
    for index in itertools.product(*(range(s) for s in out_shape)):
        source = sum(index[k] * strides[permutation[k]] for k in range(len(shape)))
        result.append(values[source])
    return result


@st.composite
def cases(draw: st.DrawFn) -> tuple[torch.Tensor, list[int]]:
    rank = draw(st.integers(2, 4))
    shape = [draw(st.integers(1, 5)) for _ in range(rank)]
    permutation = draw(st.permutations(list(range(rank))))
    assume(permutation != list(range(rank)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    dtype = draw(st.sampled_from([torch.int8, torch.int16]))  # int16: the int16 case
    low, high = torch.iinfo(dtype).min, torch.iinfo(dtype).max
    return torch.randint(low, high + 1, shape, generator=gen).to(dtype), list(permutation)


@settings(max_examples=100, deadline=None)
@given(cases())
def test_transpose_matches_index_arithmetic(case: tuple[torch.Tensor, list[int]]) -> None:
    x, permutation = case
    got = transpose(x, permutation)
    assert got.dtype == x.dtype
    assert list(got.shape) == [x.shape[p] for p in permutation]
    assert got.reshape(-1).tolist() == expected(x.reshape(-1).tolist(), list(x.shape), permutation)


def test_rank_one_is_a_copy() -> None:
    x = torch.arange(-5, 5, dtype=torch.int8)
    assert torch.equal(transpose(x, [0]), x)


@pytest.mark.parametrize(
    ("shape", "permutation", "message"),
    [
        ((2, 3), [0, 1], "identity"),  # C swaps 2-D whatever the permutation says
        ((2, 3, 4), [0, 1, 2], "identity"),
        ((2, 3, 4), [0, 0, 2], "not a permutation"),
        ((1, 2, 1, 2, 1), [4, 3, 2, 1, 0], "1-4 dims"),
        ((65536, 2), [1, 0], "uint16"),
    ],
)
def test_transpose_refuses_what_the_c_code_cannot_do(
    shape: tuple[int, ...], permutation: list[int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        transpose(torch.zeros(shape, dtype=torch.int8), permutation)


def test_transpose_functional_out_and_fake() -> None:
    x = torch.randint(-128, 128, (2, 3, 4), dtype=torch.int8)
    out = OP(x, [2, 0, 1])
    assert out.reshape(-1).tolist() == expected(x.reshape(-1).tolist(), [2, 3, 4], [2, 0, 1])
    buffer = torch.empty_like(out)
    torch.ops.cortex_m_nn.transpose.out(x, [2, 0, 1], out=buffer)
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = OP(torch.empty((2, 3, 4), dtype=torch.int8), [2, 0, 1])
    assert fake.shape == (4, 2, 3) and fake.dtype == torch.int8


# --- collapsing and composing permutations (lower/layout.py) -------------------------------


@st.composite
def permuted_shapes(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    rank = draw(st.integers(1, 6))
    shape = [draw(st.sampled_from([1, 1, 2, 3])) for _ in range(rank)]
    return shape, list(draw(st.permutations(list(range(rank)))))


@settings(max_examples=150, deadline=None)
@given(permuted_shapes())
def test_collapse_moves_the_same_bytes_with_fewest_dims(case) -> None:
    shape, permutation = case
    dims, collapsed = collapse(shape, permutation)
    x = torch.arange(math.prod(shape)).view(shape)
    want = x.permute(permutation).reshape(-1)
    if len(collapsed) <= 1:
        assert torch.equal(want, torch.arange(math.prod(shape)))  # nothing moves
        return
    got = x.reshape(dims).permute(collapsed).reshape(-1)
    assert torch.equal(got, want)
    assert 1 not in dims  # no size-1 dims left
    assert all(b != a + 1 for a, b in itertools.pairwise(collapsed))  # no mergeable runs


def _lowered(shape: list[int], nhwc: bool, permutation: list[int], out_nhwc: bool):
    context = LoweringContext(None, Target.parse("cortex-m55"))
    node = context.graph.placeholder("x")
    value = QValue(node, 0.5, 3, tuple(shape), nhwc)
    result = permute(context, value, permutation, out_nhwc)
    context.graph.output(result.node)
    return GraphModule(context.root, context.graph), result


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=5).flatmap(
        lambda shape: st.tuples(st.just(shape), st.permutations(list(range(len(shape)))))
    )
)
def test_as_transpose_finds_the_collapsed_transpose(case) -> None:
    """Byte positions produced by any transpose are recognised as that transpose, collapsed."""
    shape, permutation = case
    positions = torch.arange(math.prod(shape)).view(shape).permute(permutation).reshape(-1)
    assert as_transpose(positions) == collapse(shape, permutation)


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 24).flatmap(lambda n: st.permutations(list(range(n)))))
def test_as_transpose_refuses_other_orders(order: list[int]) -> None:
    """Any other order is refused; what is accepted moves the bytes exactly so."""
    positions = torch.tensor(order)
    found = as_transpose(positions)
    if found is None:
        return
    dims, permutation = found
    moved = torch.arange(len(order)).view(dims or [len(order)]).permute(permutation or [0])
    assert moved.reshape(-1).tolist() == order


@pytest.mark.parametrize("order", [[1, 0, 2], [2, 1, 0], [0, 2, 1, 3, 4, 5], [0, 1, 3, 2, 4, 5]])
def test_as_transpose_refuses_orders_no_transpose_gives(order: list[int]) -> None:
    assert as_transpose(torch.tensor(order)) is None


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=4, max_size=4),
    st.permutations([0, 1, 2, 3]),
    st.booleans(),
    st.booleans(),
)
def test_permute_composes_with_channels_last_storage(
    shape: list[int], permutation: list[int], nhwc: bool, out_nhwc: bool
) -> None:
    """Stored input → stored output equals: undo the input storage, permute, apply the output
    storage; and at most one transpose (none when no byte moves)."""
    logical = torch.randint(-128, 128, shape, dtype=torch.int8)
    module, result = _lowered(shape, nhwc, list(permutation), out_nhwc)
    stored = logical.permute(NHWC).contiguous() if nhwc else logical
    want = logical.permute(list(permutation))
    want = want.permute(NHWC) if out_nhwc else want
    assert torch.equal(module(stored), want.contiguous())
    assert tuple(want.shape) == result.stored_shape
    transposes = [n for n in module.graph.nodes if "cortex_m_nn.transpose" in str(n.target)]
    moved = _positions_after(shape, nhwc, list(permutation), out_nhwc)
    moves = not torch.equal(moved, torch.arange(math.prod(shape)))
    assert len(transposes) == (1 if moves else 0)


def _positions_after(shape, nhwc, permutation, out_nhwc) -> torch.Tensor:
    """For each stored output byte, its position in the stored input."""
    positions = torch.arange(math.prod(shape)).view([shape[d] for d in NHWC] if nhwc else shape)
    logical = positions.permute([0, 3, 1, 2]) if nhwc else positions
    out = logical.permute(permutation)
    return (out.permute(NHWC) if out_nhwc else out).reshape(-1)


def test_permute_of_a_channels_last_tensor_to_nhwc_order_is_a_view() -> None:
    module, result = _lowered([1, 8, 4, 4], True, [0, 2, 3, 1], False)
    assert not [n for n in module.graph.nodes if "transpose" in str(n.target)]
    assert result.stored_shape == (1, 4, 4, 8)


def test_permute_folds_into_the_input_quantize() -> None:
    context = LoweringContext(None, Target.parse("cortex-m55"))
    x = context.graph.placeholder("x")
    quantized = context.call("quantize", x, 0.5, 3, NHWC, 1)
    value = QValue(quantized, 0.5, 3, (1, 4, 5, 3), nhwc=True)
    result = permute(context, value, [0, 3, 1, 2], nhwc=True, fold=True)
    context.graph.output(result.node)
    context.graph.eliminate_dead_code()
    module = GraphModule(context.root, context.graph)
    targets = [str(n.target) for n in module.graph.nodes if n.op == "call_function"]
    assert targets == ["cortex_m_nn.quantize.default"]  # one quantize, no transpose
    (node,) = [n for n in module.graph.nodes if n.op == "call_function"]
    assert list(node.args[3]) == []  # NHWC input permuted to NCHW, stored NHWC: as given
    floats = torch.randn(1, 4, 5, 3)
    want = torch.ops.cortex_m_nn.quantize(floats.permute(0, 3, 1, 2), 0.5, 3, NHWC, 1)
    assert torch.equal(module(floats), want)
