"""``cortex_m_nn::layer_norm``: one case table feeding the lowering check (NCHW models with
LayerNorm / GroupNorm compile with no fallback for cortex-m55 and cortex-m33 and verify) and the
implementation check (the integer reference against float64 ``F.layer_norm`` / ``F.group_norm``
of the dequantized input, within the documented bound of 0.5 + 2^-7 output LSB)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.target import Target
from cortex_m_nn.ops.layer_norm import (
    MAX_GROUP,
    channel_parameters,
    epsilon_parameter,
    inverse_sqrt,
    layer_norm,
)

F = nn.functional
#: The documented bound (``ops/layer_norm.py``): |out − clamp(v)| for the exact real v.
BOUND = 0.5 + 2**-7


class Relu(nn.Module):
    """A normalization followed by a relu (fused as the kernel's activation range)."""

    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.norm = norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(x))


class AfterConv(nn.Module):
    """conv → normalization: a channels-last (NHWC / NLC) int8 input from a kernel."""

    def __init__(self, conv: nn.Module, norm: nn.Module) -> None:
        super().__init__()
        self.conv, self.norm = conv, norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(x))


@dataclass(frozen=True)
class Row:
    """A model whose last layer is ``norm``, and its input shape (NCHW)."""

    make: Callable[[], nn.Module]
    shape: tuple[int, ...]

    def norm_of(self, module: nn.Module) -> nn.Module:
        return getattr(module, "norm", module)


CASES = {
    "layer_norm-last": Row(lambda: nn.LayerNorm(16), (2, 5, 16)),
    "layer_norm-last-two": Row(lambda: nn.LayerNorm([4, 16], eps=1e-3), (2, 4, 16)),
    "layer_norm-no-affine": Row(lambda: nn.LayerNorm(12, elementwise_affine=False), (3, 12)),
    "layer_norm-no-bias": Row(lambda: nn.LayerNorm(10, bias=False), (1, 7, 10)),
    "layer_norm-image-width": Row(
        lambda: AfterConv(nn.Conv2d(3, 4, 3), nn.LayerNorm(6)), (1, 3, 8, 8)
    ),
    "layer_norm-image-chw": Row(lambda: nn.LayerNorm([4, 5, 6]), (2, 4, 5, 6)),
    "layer_norm-relu": Row(lambda: Relu(nn.LayerNorm(8)), (4, 8)),
    "group_norm": Row(lambda: AfterConv(nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8)), (1, 3, 8, 8)),
    "group_norm-per-channel": Row(lambda: nn.GroupNorm(6, 6, eps=1e-2), (2, 6, 4, 5)),
    "group_norm-one-group": Row(lambda: nn.GroupNorm(1, 5), (1, 5, 3, 3)),
    "group_norm-1d": Row(lambda: AfterConv(nn.Conv1d(2, 6, 3), nn.GroupNorm(3, 6)), (2, 2, 12)),
    "group_norm-2d-relu": Row(lambda: Relu(nn.GroupNorm(2, 8)), (3, 8)),
    "group_norm-no-affine": Row(lambda: nn.GroupNorm(4, 8, affine=False), (1, 8, 2, 3)),
}


def built(row: Row, seed: int = 7) -> nn.Module:
    """The row's model with random (seeded) gamma and beta."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = row.make().eval()
        norm = row.norm_of(module)
        with torch.no_grad():
            for name, low, high in (("weight", 0.3, 2.0), ("bias", -1.0, 1.0)):
                parameter = getattr(norm, name, None)
                if parameter is not None:
                    parameter.uniform_(low, high)
    return module


# -- lowering --------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m33"])
@pytest.mark.parametrize("name", CASES)
def test_lowers_without_fallback_and_verifies(name: str, target: str) -> None:
    row = CASES[name]
    example = torch.randn(*row.shape, generator=torch.Generator().manual_seed(3))
    after = {"cortex_m_nn.layer_norm": 1, "aten.layer_norm": 0, "aten.group_norm": 0}
    compiled, verification = check_dialect(
        built(row), (example,), target=Target.parse(target), after=after
    )
    assert not [r for r in compiled.records if not r.lowered]
    assert verification.max_lsb <= 1


# -- implementation: the reference against float64 ------------------------------------------


def geometry(norm: nn.Module, shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(spatial, groups, channels) of the kernel call for ``norm`` on a logical ``shape``."""
    if isinstance(norm, nn.LayerNorm):
        return 1, 1, math.prod(norm.normalized_shape)
    return math.prod(shape[2:]), norm.num_groups, shape[1]


def stored(x: torch.Tensor, norm: nn.Module) -> torch.Tensor:
    """The bytes the kernel reads: channels-last for group norm, logical for layer norm."""
    if isinstance(norm, nn.GroupNorm) and x.dim() > 2:
        return x.flatten(2).transpose(1, 2).contiguous()
    return x.contiguous()


def float_norm(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The layer in float64: an independent computation by torch."""
    weight = None if norm.weight is None else norm.weight.detach().double()
    bias = None if getattr(norm, "bias", None) is None else norm.bias.detach().double()
    if isinstance(norm, nn.LayerNorm):
        return F.layer_norm(x, norm.normalized_shape, weight, bias, norm.eps)
    return F.group_norm(x, norm.num_groups, weight, bias, norm.eps)


def affine(norm: nn.Module, channels: int) -> tuple[torch.Tensor, torch.Tensor]:
    weight, bias = norm.weight, getattr(norm, "bias", None)
    gamma = torch.ones(channels) if weight is None else weight.detach().flatten()
    beta = torch.zeros(channels) if bias is None else bias.detach().flatten()
    return gamma.double(), beta.double()


@st.composite
def quantization(draw: st.DrawFn, shape: tuple[int, ...]) -> dict:
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    spread = draw(st.sampled_from([1, 2, 8, 64, 128]))
    middle = draw(st.integers(-128, 127))
    q = torch.randint(-spread, spread + 1, shape, generator=gen) + middle
    return {
        "q": q.clamp(-128, 127).to(torch.int8),
        "input": (10 ** draw(st.floats(-3.0, 0.0)), draw(st.integers(-128, 127))),
        "output": (10 ** draw(st.floats(-2.5, -0.5)), draw(st.integers(-128, 127))),
        "eps": 10 ** draw(st.floats(-8.0, 0.0)),
    }


def check_against_float(norm: nn.Module, p: dict, activation: tuple[int, int]) -> None:
    q = p["q"]
    spatial, groups, channels = geometry(norm, tuple(q.shape))
    (s_in, zp_in), (s_out, zp_out) = p["input"], p["output"]
    m, t, b = channel_parameters(*affine(norm, channels), s_out, zp_out)
    n = spatial * channels // groups
    eps = epsilon_parameter(norm.eps, s_in, n)
    got = layer_norm(stored(q, norm), m, t, b, spatial, groups, eps, *activation)
    real = float_norm(norm, (q.double() - zp_in) * s_in) / s_out + zp_out
    expected = stored(real, norm).clamp(*activation)
    assert got.shape == expected.shape
    assert (got.double() - expected).abs().max().item() <= BOUND


@settings(max_examples=25, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("name", CASES)
def test_reference_within_bound_of_float(name: str, data: st.DataObject) -> None:
    row = CASES[name]
    module = built(row, data.draw(st.integers(0, 100)))
    norm = row.norm_of(module)
    shape = row.shape
    if isinstance(module, AfterConv):  # the norm reads the conv's output
        shape = tuple(module.conv(torch.zeros(row.shape)).shape)
    p = data.draw(quantization(shape))
    norm.eps = p["eps"]
    low = p["output"][1] if isinstance(module, Relu) else -128  # relu: the zero point
    check_against_float(norm, p, (low, 127))


@st.composite
def random_norms(draw: st.DrawFn) -> tuple[nn.Module, tuple[int, ...]]:
    """Layer norms over the last 1-3 dims and group norms of 2-D to 4-D inputs, any extents."""
    rank = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 7)) for _ in range(rank))
    if draw(st.booleans()):
        k = draw(st.integers(1, rank - 1))
        affine_ = draw(st.booleans())
        return nn.LayerNorm(shape[-k:], elementwise_affine=affine_), shape
    if math.prod(shape) == shape[1]:  # torch refuses one value per channel
        shape = (2, *shape[1:])
    groups = draw(st.sampled_from([d for d in range(1, shape[1] + 1) if shape[1] % d == 0]))
    return nn.GroupNorm(groups, shape[1], affine=draw(st.booleans())), shape


@settings(max_examples=200, deadline=None)
@given(case=random_norms(), data=st.data())
def test_random_shapes_within_bound_of_float(case: tuple, data: st.DataObject) -> None:
    norm, shape = case
    p = data.draw(quantization(shape))
    with torch.no_grad():
        for name in ("weight", "bias"):
            parameter = getattr(norm, name, None)
            if parameter is not None:
                parameter.copy_(torch.randn(parameter.shape, dtype=torch.float64) * 1.5)
    norm.eps = p["eps"]
    low = data.draw(st.integers(-128, 0))
    check_against_float(norm, p, (low, data.draw(st.integers(low, 127))))


# -- hand-computed cases and the operator's forms --------------------------------------------


def test_constant_group_outputs_beta() -> None:
    """Zero variance: (x − mean) is 0, the output is beta (eps 0 too: D = 0, R = 0)."""
    m, t, b = channel_parameters(torch.ones(3), torch.tensor([0.5, -1.0, 0.0]), 0.25, 3)
    for eps in (0, 123):
        out = layer_norm(torch.full((2, 3), 17, dtype=torch.int8), m, t, b, 1, 1, eps, -128, 127)
        assert out.tolist() == [[5, -1, 3], [5, -1, 3]]  # 3 + 0.5 / 0.25, 3 - 4, 3


def test_two_values_normalize_to_plus_minus_one() -> None:
    """[a, b] with eps 0 normalizes to [−1, +1] exactly: gamma 1 at scale 1/64 gives ∓64."""
    m, t, b = channel_parameters(torch.ones(2), torch.zeros(2), 1 / 64, 0)
    out = layer_norm(torch.tensor([[-100, 30]], dtype=torch.int8), m, t, b, 1, 1, 0, -128, 127)
    assert out.tolist() == [[-64, 64]]


def test_inverse_sqrt_is_floor_exact() -> None:
    for d in [1, 2, 3, 4, 2**14, 10**9 + 7, 2**46 * 2**14, 2**61 + 2**60 + 12345]:
        r, k = inverse_sqrt(d)
        root = math.isqrt(d << (2 * k))
        assert 2**60 <= d << (2 * k) < 2**62 and r == 2**60 // root
        assert abs(r * 2.0**k / 2**60 - 1 / math.sqrt(d)) <= 2**-28 / math.sqrt(d)
    assert inverse_sqrt(0) == (0, 0)


def test_epsilon_and_channel_parameters() -> None:
    assert epsilon_parameter(1e-5, 0.01, 4) == round(1e-5 / 1e-4 * 16 * 2**14)
    m, t, b = channel_parameters(torch.tensor([1.0, -2.0, 0.0]), torch.zeros(3), 0.5, -7)
    for multiplier, shift, gamma in zip(m.tolist(), t.tolist(), [2.0, -4.0, 0.0], strict=True):
        assert multiplier * 2.0 ** (16 - shift) == gamma and 1 <= shift <= 52
    assert b.tolist() == [-7 * 2**s for s in t.tolist()]
    with pytest.raises(ValueError, match="too large"):
        channel_parameters(torch.tensor([1e30]), torch.zeros(1), 1e-3, 0)


@pytest.mark.parametrize(
    ("shape", "spatial", "groups", "channels", "message"),
    [
        ((4, 6), 1, 4, 6, "groups"),
        ((4, 6), 4, 1, 5, "elements"),
        ((2, MAX_GROUP + 1), 1, 1, MAX_GROUP + 1, "at most"),
    ],
)
def test_refuses_invalid_calls(shape, spatial, groups, channels, message: str) -> None:
    ones = torch.ones(channels, dtype=torch.int32)
    with pytest.raises(ValueError, match=message):
        layer_norm(
            torch.zeros(shape, dtype=torch.int8),
            ones,
            ones,
            ones.long(),
            spatial,
            groups,
            0,
            -128,
            127,
        )


def test_functional_out_and_fake() -> None:
    m, t, b = channel_parameters(torch.ones(4), torch.zeros(4), 0.02, 0)
    x = torch.randint(-128, 128, (3, 5, 4), dtype=torch.int8)
    args = (m, t, b, 5, 2, 99, -128, 127)
    out = torch.ops.cortex_m_nn.layer_norm(x, *args)
    assert torch.equal(out, layer_norm(x, *args))
    buffer = torch.empty_like(out)
    torch.ops.cortex_m_nn.layer_norm.out(x, *args, out=buffer)
    assert torch.equal(buffer, out)
    with FakeTensorMode(allow_non_fake_inputs=True):
        fake = torch.ops.cortex_m_nn.layer_norm(torch.empty((3, 5, 4), dtype=torch.int8), *args)
    assert fake.shape == (3, 5, 4) and fake.dtype == torch.int8
