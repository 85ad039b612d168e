"""``cortex_m_nn::batch_matmul`` and ``::linear`` against Python-int transcriptions of
arm_batch_matmul_s8 and arm_fully_connected_s8 (and their s16 cases): the random cases are
one table, a row per operator and rounding; each operator's own shapes and forms follow."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.ops.batch_matmul import batch_matmul
from cortex_m_nn.ops.linear import kernel_sums, linear

from .independent import ref_requantize, ref_requantize_s64, wrap32

BATCH_MATMUL = torch.ops.cortex_m_nn.batch_matmul
LINEAR = torch.ops.cortex_m_nn.linear


def batch_matmul_expected(case: dict, single: bool = False) -> torch.Tensor:
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
            if lhs.dtype == torch.int16:  # the exact int64 sum, arm_nn_requantize_s64
                y = ref_requantize_s64(acc, case["multiplier"], case["shift"])
            else:
                y = ref_requantize(wrap32(acc), case["multiplier"], case["shift"], single)
            y += case["output_offset"]
            out.append(min(max(y, case["activation_min"]), case["activation_max"]))
    batch = torch.broadcast_shapes(lhs.shape[:-2], rhs.shape[:-2])
    return torch.tensor(out, dtype=lhs.dtype).reshape(*batch, rows, cols)


def _output_stage(draw: st.DrawFn, shift_low: int, int16: bool = False) -> dict:
    """The arguments both operators end with, drawn: output offset, one requantization
    (multiplier, shift from ``shift_low`` to 1) and the activation range; ``int16``: the int16
    case's, a zero output offset and an int16 range."""
    output_offset = 0 if int16 else draw(st.integers(-128, 127))
    multiplier, shift = draw(st.integers(2**30, 2**31 - 1)), draw(st.integers(shift_low, 1))
    info = torch.iinfo(torch.int16 if int16 else torch.int8)
    act_min = draw(st.integers(info.min, 0))
    return {
        "output_offset": output_offset,
        "multiplier": multiplier,
        "shift": shift,
        "activation_min": act_min,
        "activation_max": draw(st.integers(act_min, info.max)),
    }


@st.composite
def batch_matmul_cases(draw: st.DrawFn) -> dict:
    batch = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))

    def operand_batch() -> list[int]:
        kept = batch[len(batch) - draw(st.integers(0, len(batch))) :]
        return [d if draw(st.booleans()) else 1 for d in kept]

    m, n, k = draw(st.integers(1, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 40))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    lhs_shape, rhs_shape = (*operand_batch(), m, k), (*operand_batch(), n, k)
    if draw(st.sampled_from([False, False, True])):  # int16 activations: arm_batch_matmul_s16
        operands = {"lhs": _int16(lhs_shape, gen), "rhs_transposed": _int16(rhs_shape, gen)}
        offsets = {"lhs_offset": 0, "rhs_offset": 0}
        return operands | offsets | _output_stage(draw, shift_low=-30, int16=True)
    return {
        "lhs": torch.randint(-128, 128, lhs_shape, generator=gen, dtype=torch.int8),
        "rhs_transposed": torch.randint(-128, 128, rhs_shape, generator=gen, dtype=torch.int8),
        "lhs_offset": -draw(st.integers(-128, 127)),
        "rhs_offset": -draw(st.integers(-128, 127)),
    } | _output_stage(draw, shift_low=-16)


def _int16(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    return torch.randint(-32768, 32768, shape, generator=gen, dtype=torch.int32).to(torch.int16)


def _nibbles(packed: torch.Tensor) -> torch.Tensor:
    """uint8 pairs → int8 values, low nibble first, sign-extended by ``(v ^ 8) - 8``."""
    values = []
    for byte in packed.reshape(-1).tolist():
        values += [((byte & 0xF) ^ 8) - 8, ((byte >> 4) ^ 8) - 8]
    return torch.tensor(values, dtype=torch.int8).reshape(*packed.shape[:-1], -1)


def linear_expected(case: dict, single: bool = False) -> torch.Tensor:
    x, w = case["input"], case["weight"]
    if w.dtype == torch.uint8:  # int4 weights, packed
        w = _nibbles(w)
    bias = case["bias"].tolist() if case["bias"] is not None else [0] * w.shape[0]
    rows = x.reshape(-1, x.shape[-1]).tolist()
    out = []
    for row in rows:
        out_row = []
        for o, weights in enumerate(w.tolist()):
            acc = bias[o] + sum(
                (xi + case["input_offset"]) * wi for xi, wi in zip(row, weights, strict=True)
            )
            if case["multipliers"] is None:
                multiplier, shift = case["multiplier"], case["shift"]
            else:  # per channel
                multiplier, shift = int(case["multipliers"][o]), int(case["shifts"][o])
            if x.dtype == torch.int16:  # the exact int64 sum, arm_nn_requantize_s64
                y = ref_requantize_s64(acc, multiplier, shift)
            else:
                y = ref_requantize(wrap32(acc), multiplier, shift, single)
            y += case["output_offset"]
            out_row.append(min(max(y, case["activation_min"]), case["activation_max"]))
        out.append(out_row)
    return torch.tensor(out, dtype=x.dtype).reshape(*x.shape[:-1], w.shape[0])


@st.composite
def linear_cases(draw: st.DrawFn) -> dict:
    lead = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    n_in, n_out = draw(st.integers(1, 40)), draw(st.integers(1, 12))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    has_bias = draw(st.booleans())
    case = (
        {
            "input": torch.randint(-128, 128, (*lead, n_in), generator=gen, dtype=torch.int8),
            "weight": torch.randint(-128, 128, (n_out, n_in), generator=gen, dtype=torch.int8),
            "bias": torch.randint(-(2**18), 2**18, (n_out,), generator=gen, dtype=torch.int32)
            if has_bias
            else None,
            "kernel_sums": None,
            "multipliers": None,
            "shifts": None,
            "input_offset": -draw(st.integers(-128, 127)),
        }
        | _output_stage(draw, shift_low=-14)
        | {"path": 0}
    )
    if draw(st.sampled_from([False, False, True])):  # int16 activations (8w16a)
        return case | _s16(draw, gen, lead, n_in, n_out, has_bias)
    if draw(st.sampled_from([False, False, False, True])):  # int4 weights (4w8a), per tensor
        values = torch.randint(-8, 8, (n_out, 2 * n_in), generator=gen, dtype=torch.int8)
        pairs = (values[:, 0::2].to(torch.int32) & 0xF) | (
            (values[:, 1::2].to(torch.int32) & 0xF) << 4
        )
        return case | {
            "input": torch.randint(-128, 128, (*lead, 2 * n_in), generator=gen, dtype=torch.int8),
            "weight": pairs.to(torch.uint8),
        }
    if draw(st.booleans()):  # per channel: the vectors, the numbers 0
        case["multipliers"] = torch.randint(2**30, 2**31 - 1, (n_out,), generator=gen)
        case["shifts"] = torch.randint(-14, 2, (n_out,), generator=gen)
        case["multipliers"], case["shifts"] = (
            case["multipliers"].to(torch.int32),
            case["shifts"].to(torch.int32),
        )
        case["multiplier"], case["shift"] = 0, 0
    return case


def _s16(
    draw: st.DrawFn, gen: torch.Generator, lead: list, n_in: int, n_out: int, has_bias: bool
) -> dict:
    """The int16 case of linear's arguments: int16 input, int64 bias, zero offsets, per
    tensor, an int16 activation range."""
    return {
        "input": torch.randint(-32768, 32768, (*lead, n_in), generator=gen, dtype=torch.int16),
        "weight": torch.randint(-127, 128, (n_out, n_in), generator=gen, dtype=torch.int8),
        "bias": torch.randint(-(2**34), 2**34, (n_out,), generator=gen, dtype=torch.int64)
        if has_bias
        else None,
        "input_offset": 0,
    } | _output_stage(draw, shift_low=-24, int16=True)


#: (reference, independent result, random cases, rounding, examples)
RANDOM = [
    (batch_matmul, batch_matmul_expected, batch_matmul_cases, Rounding.DOUBLE, 80),
    (batch_matmul, batch_matmul_expected, batch_matmul_cases, Rounding.SINGLE, 30),
    (linear, linear_expected, linear_cases, Rounding.DOUBLE, 80),
    (linear, linear_expected, linear_cases, Rounding.SINGLE, 30),
]


@pytest.mark.parametrize(
    ("reference", "expected", "cases", "rounding", "examples"),
    RANDOM,
    ids=[f"{r.__name__}-{rounding.value}" for r, _, _, rounding, _ in RANDOM],
)
def test_matches_independent(
    reference: Callable[..., torch.Tensor],
    expected: Callable[..., torch.Tensor],
    cases: Callable[[], st.SearchStrategy[dict]],
    rounding: Rounding,
    examples: int,
) -> None:
    @settings(max_examples=examples, deadline=None)
    @given(cases())
    def check(case: dict) -> None:
        got = reference(*case.values(), rounding=rounding)
        assert torch.equal(got, expected(case, single=rounding is Rounding.SINGLE))

    check()


# --- batch_matmul ---------------------------------------------------------------------------


def batch_matmul_fixed(**changes: object) -> dict:
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


def batch_matmul_s16_fixed(**changes: object) -> dict:
    gen = torch.Generator().manual_seed(6)
    case = {
        "lhs": _int16((2, 1, 3, 16), gen),
        "rhs_transposed": _int16((1, 4, 5, 16), gen),
        "lhs_offset": 0,
        "rhs_offset": 0,
        "output_offset": 0,
        "multiplier": 1717986918,
        "shift": -20,
        "activation_min": -32768,
        "activation_max": 32767,
    }
    case.update(changes)
    return case


def test_batch_matmul_s16_gives_int16_and_saturates() -> None:
    case = batch_matmul_s16_fixed(shift=-10)
    out = batch_matmul(*case.values())
    assert out.dtype == torch.int16 and out.shape == (2, 4, 3, 5)
    assert torch.equal(out, batch_matmul_expected(case))
    assert {-32768, 32767} <= set(out.reshape(-1).tolist())  # products of 2^30 at shift -10


@pytest.mark.parametrize(
    "changes",
    [{"lhs_offset": 1}, {"rhs_offset": -1}, {"output_offset": 2}, {"shift": 15},
     {"activation_max": 40000}, {"rhs_transposed": torch.zeros(1, 4, 5, 16, dtype=torch.int8)}],
)  # fmt: skip
def test_batch_matmul_s16_refuses(changes: dict) -> None:
    with pytest.raises(ValueError):
        batch_matmul(*batch_matmul_s16_fixed(**changes).values())


def test_batch_matmul_broadcasts_both_batch_dimensions_and_clamps() -> None:
    case = batch_matmul_fixed()
    out = batch_matmul(*case.values())
    assert out.shape == (2, 4, 3, 5)
    assert torch.equal(out, batch_matmul_expected(case))
    assert out.min() >= -100 and out.max() <= 100


def test_the_right_operand_is_transposed() -> None:
    """Identity lhs rows pick rhs *rows*: the result is rhs_transposed itself, transposed."""
    rhs = torch.arange(-6, 6, dtype=torch.int8).reshape(3, 4)  # [N=3, K=4]
    case = batch_matmul_fixed(
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


def test_batch_matmul_functional_out_and_fake() -> None:
    case = batch_matmul_fixed()
    args = list(case.values())
    out, scratch = BATCH_MATMUL(*args, 20)
    assert out.shape == (2, 4, 3, 5) and scratch.shape == (20,) and scratch.dtype == torch.int8
    buffer, scratch_buffer = torch.empty_like(out), torch.empty(20, dtype=torch.int8)
    torch.ops.cortex_m_nn.batch_matmul.out(*args, 20, out=buffer, scratch=scratch_buffer)
    assert torch.equal(buffer, out)
    with FakeTensorMode():
        fake = [
            torch.empty(a.shape, dtype=a.dtype) if isinstance(a, torch.Tensor) else a for a in args
        ]
        fake_out, fake_scratch = BATCH_MATMUL(*fake, 20)
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
    case = batch_matmul_fixed(
        lhs=torch.zeros(lhs, dtype=torch.int8), rhs_transposed=torch.zeros(rhs, dtype=torch.int8)
    )
    with pytest.raises(ValueError, match=words):
        batch_matmul(*case.values())


# --- linear ---------------------------------------------------------------------------------


def linear_fixed() -> dict:
    gen = torch.Generator().manual_seed(2)
    return {
        "input": torch.randint(-128, 128, (2, 3, 16), generator=gen, dtype=torch.int8),
        "weight": torch.randint(-128, 128, (5, 16), generator=gen, dtype=torch.int8),
        "bias": torch.tensor([0, 1000, -1000, 2**24, -(2**24)], dtype=torch.int32),
        "kernel_sums": None,
        "multipliers": None,
        "shifts": None,
        "input_offset": 128,
        "output_offset": -128,
        "multiplier": 1717986918,
        "shift": -8,
        "activation_min": -128,
        "activation_max": 127,
        "path": 0,
    }


def test_linear_saturates() -> None:
    out = linear(*linear_fixed().values())
    assert (out[..., 3] == 127).all() and (out[..., 4] == -128).all()
    assert torch.equal(out, linear_expected(linear_fixed()))


@settings(max_examples=60, deadline=None)
@given(linear_cases())
def test_linear_kernel_sums_path(case: dict) -> None:
    """MVE form: bias folded with the input offset into per-row sums, same result."""
    # int16 activations and int4 weights have no kernel sums
    assume(case["input"].dtype == torch.int8 and case["weight"].dtype == torch.int8)
    w, bias = case["weight"].tolist(), case["bias"]
    sums = [
        wrap32((0 if bias is None else int(bias[o])) + case["input_offset"] * sum(row))
        for o, row in enumerate(w)
    ]
    assert torch.equal(kernel_sums(case["weight"], bias, case["input_offset"]), torch.tensor(sums))
    mve = dict(case, bias=None, kernel_sums=torch.tensor(sums, dtype=torch.int32))
    assert torch.equal(linear(*mve.values()), linear_expected(case))


def test_linear_quads_path_computes_the_same_and_only_int8_per_tensor() -> None:
    """Path 1 (our fully_connected_quads_s8) gives CMSIS-NN's numbers, per tensor and per
    channel; int16 calls and other paths are refused."""
    case = linear_fixed()
    assert torch.equal(linear(*dict(case, path=1).values()), linear(*case.values()))
    ones, zeros = torch.ones(5, dtype=torch.int32), torch.zeros(5, dtype=torch.int32)
    per_channel = dict(case, multipliers=ones, shifts=zeros, multiplier=0, shift=0)
    assert torch.equal(linear(*dict(per_channel, path=1).values()), linear(*per_channel.values()))
    for refused in (dict(linear_s16_fixed(), path=1), dict(case, path=2)):
        with pytest.raises(ValueError, match="linear path"):
            linear(*refused.values())


def test_linear_refuses_bias_and_kernel_sums() -> None:
    case = dict(linear_fixed(), kernel_sums=torch.zeros(5, dtype=torch.int32))
    with pytest.raises(ValueError, match="not both"):
        linear(*case.values())


def test_linear_functional_out_and_fake() -> None:
    case = linear_fixed()
    args = list(case.values())
    out = LINEAR(*args)
    assert out.shape == (2, 3, 5) and out.dtype == torch.int8
    buffer = torch.empty_like(out)
    torch.ops.cortex_m_nn.linear.out(*args, out=buffer)
    assert torch.equal(buffer, out)
    no_bias = dict(case, bias=None)
    assert torch.equal(LINEAR(*no_bias.values()), linear_expected(no_bias))
    with FakeTensorMode():
        fake = [
            torch.empty(a.shape, dtype=a.dtype) if isinstance(a, torch.Tensor) else a for a in args
        ]
        fake_out = LINEAR(*fake)
    assert fake_out.shape == (2, 3, 5) and fake_out.dtype == torch.int8


def test_linear_per_channel_requantizes_each_output() -> None:
    """Per channel: output o is output o of the per-tensor layer with o's multiplier/shift."""
    per_tensor = linear_fixed()
    multipliers = torch.tensor([1717986918, 2**30, 2**31 - 1, 1717986918, 2**30], dtype=torch.int32)
    shifts = torch.tensor([-8, -3, -12, 0, -8], dtype=torch.int32)
    case = dict(per_tensor, multipliers=multipliers, shifts=shifts, multiplier=0, shift=0)
    out = linear(*case.values())
    for o in range(5):
        alone = dict(per_tensor, multiplier=int(multipliers[o]), shift=int(shifts[o]))
        assert torch.equal(out[..., o], linear(*alone.values())[..., o])
    assert torch.equal(out, linear_expected(case))


@pytest.mark.parametrize(
    "changes",
    [
        {"multipliers": torch.ones(5, dtype=torch.int32)},  # no shifts
        {
            "multipliers": torch.ones(5, dtype=torch.int32),
            "shifts": torch.zeros(5, dtype=torch.int32),
        },  # numbers not 0
        {
            "multipliers": torch.ones(4, dtype=torch.int32),
            "shifts": torch.zeros(4, dtype=torch.int32),
            "multiplier": 0,
            "shift": 0,
        },
    ],
    ids=["multipliers-alone", "both-forms", "wrong-length"],
)
def test_linear_refuses_mixed_requantization(changes: dict) -> None:
    with pytest.raises(ValueError):
        linear(*dict(linear_fixed(), **changes).values())


def test_linear_rejects_mismatch() -> None:
    case = dict(linear_fixed(), weight=torch.zeros((5, 15), dtype=torch.int8))
    with pytest.raises(ValueError):
        linear(*case.values())


def linear_s16_fixed() -> dict:
    """linear_fixed in int16: an int16 input, weights in [-127, 127], a bias past int32, zero
    offsets, a smaller shift and the int16 range."""
    gen = torch.Generator().manual_seed(4)
    return linear_fixed() | {
        "input": torch.randint(-32768, 32768, (2, 16), generator=gen, dtype=torch.int16),
        "weight": torch.randint(-127, 128, (5, 16), generator=gen, dtype=torch.int8),
        "bias": torch.tensor([0, 1000, -1000, 2**40, -(2**40)], dtype=torch.int64),
        "input_offset": 0,
        "output_offset": 0,
        "shift": -10,
        "activation_min": -32768,
        "activation_max": 32767,
    }


def test_linear_s16_saturates_and_gives_int16() -> None:
    case = linear_s16_fixed()
    out = linear(*case.values())
    assert out.dtype == torch.int16 and out.shape == (2, 5)
    assert (out[:, 3] == 32767).all() and (out[:, 4] == -32768).all()
    assert torch.equal(out, linear_expected(case))
    with FakeTensorMode():
        fake = [
            torch.empty(a.shape, dtype=a.dtype) if isinstance(a, torch.Tensor) else a
            for a in case.values()
        ]
        assert LINEAR(*fake).dtype == torch.int16


#: int16 linear's refusals: (id, changes to the fixed case)
S16_REFUSALS = [
    ("input-offset", {"input_offset": 3}),
    ("output-offset", {"output_offset": -1}),
    ("int32-bias", {"bias": torch.zeros(5, dtype=torch.int32)}),
    ("kernel-sums", {"bias": None, "kernel_sums": torch.zeros(5, dtype=torch.int32)}),
    ("per-channel", {"multipliers": torch.ones(5, dtype=torch.int32),
                     "shifts": torch.zeros(5, dtype=torch.int32), "multiplier": 0, "shift": 0}),
    ("range", {"activation_max": 40000}),
    ("stray-shifts", {"shifts": torch.zeros(5, dtype=torch.int32)}),
    ("shift-past-14", {"shift": 15}),
]  # fmt: skip


@pytest.mark.parametrize("changes", [c for _, c in S16_REFUSALS], ids=[i for i, _ in S16_REFUSALS])
def test_linear_s16_refuses(changes: dict) -> None:
    with pytest.raises(ValueError):
        linear(*dict(linear_s16_fixed(), **changes).values())
