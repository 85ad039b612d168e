"""Mean over H and W is a global average pool: ``cortex_m_nn::avg_pool2d`` with the whole
H×W window (this CMSIS-NN has no mean kernel). Checked against integer means rounded half away
from zero (arm_avgpool_s8), against PT2E's float mean within 1 LSB, and in lowered models."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.ops.avg_pool2d import avg_pool2d

from ..models import seeded


def global_mean(x: torch.Tensor, act_min: int, act_max: int) -> list[list[int]]:
    """Per (batch, channel): the exact mean, ties away from zero, clamped."""
    n, h, w, c = x.shape
    data = x.tolist()
    result = []
    for b in range(n):
        row = []
        for ch in range(c):
            mean = Fraction(sum(data[b][y][xx][ch] for y in range(h) for xx in range(w)), h * w)
            magnitude = int(abs(mean) + Fraction(1, 2))  # floor(|m| + 1/2): ties away from 0
            row.append(min(max(magnitude if mean >= 0 else -magnitude, act_min), act_max))
        result.append(row)
    return result


@st.composite
def cases(draw: st.DrawFn) -> tuple[torch.Tensor, int, int]:
    shape = (
        draw(st.integers(1, 2)),
        draw(st.integers(1, 12)),
        draw(st.integers(1, 12)),
        draw(st.integers(1, 5)),
    )
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    low, high = draw(st.sampled_from([(-128, 128), (-2, 2), (120, 128), (-128, -126)]))
    x = torch.randint(low, high, shape, generator=gen, dtype=torch.int8)
    act_min = draw(st.integers(-128, 127))
    return x, act_min, draw(st.integers(act_min, 127))


def pool(x: torch.Tensor, act_min: int, act_max: int) -> torch.Tensor:
    window = [x.shape[1], x.shape[2]]
    return avg_pool2d(x, window, window, [0, 0], False, act_min, act_max)


@settings(max_examples=100, deadline=None)
@given(cases())
def test_global_pool_is_the_rounded_mean(case: tuple[torch.Tensor, int, int]) -> None:
    x, act_min, act_max = case
    got = pool(x, act_min, act_max)
    assert got.shape == (x.shape[0], 1, 1, x.shape[3])
    assert got.reshape(x.shape[0], x.shape[3]).tolist() == global_mean(x, act_min, act_max)


@settings(max_examples=60, deadline=None)
@given(cases(), st.floats(0.001, 1.0), st.integers(-128, 127))
def test_global_pool_within_one_lsb_of_pt2e(case, scale: float, zero_point: int) -> None:
    """PT2E: dequantize, float mean, quantize with the same (shared) parameters."""
    x, _, _ = case
    floats = (x.to(torch.float32) - zero_point) * scale
    pt2e = torch.round(floats.mean(dim=(1, 2)) / scale) + zero_point
    ours = pool(x, -128, 127).reshape(pt2e.shape).to(torch.float32)
    assert (ours - pt2e.clamp(-128, 127)).abs().max() <= 1


class Means(nn.Module):
    def __init__(self, variant: str) -> None:
        super().__init__()
        self.variant = variant
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if self.variant == "adaptive":
            return nn.functional.adaptive_avg_pool2d(y, 1)
        dims, keepdim = {
            "23": ((2, 3), False),
            "-2-1": ((-2, -1), False),
            "23-keepdim": ((2, 3), True),
            "-1-2-keepdim": ((-1, -2), True),
        }[self.variant]
        return y.mean(dims, keepdim=keepdim)


@pytest.mark.parametrize("variant", ["23", "-2-1", "23-keepdim", "-1-2-keepdim", "adaptive"])
def test_mean_lowers_to_a_whole_window_pool(variant: str) -> None:
    module = Means(variant).eval()
    _, (x,) = seeded(nn.Identity, 1, 3, 7, 9)
    compiled, verification = check_dialect(module, (x,), after={"cortex_m_nn.avg_pool2d": 1})
    (node,) = [n for n in compiled.lowered.graph.nodes if "avg_pool2d" in str(n.target)]
    assert list(node.args[1]) == [5, 7] and list(node.args[2]) == [5, 7]  # kernel = stride = H×W
    assert verification.max_lsb <= 1
