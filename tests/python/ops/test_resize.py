"""``cortex_m_nn::resize``: one case table (modes, align_corners, scale-factor and size forms)
feeding the implementation check and the lowering check.

* nearest and nearest-exact equal PyTorch's ``F.interpolate`` of the same int8 values exactly;
* bilinear equals a straightforward integer evaluation of the documented formula (four
  weights ``(ONE - wx)(ONE - wy)``, …, exact sum, ties up) and is within 1 LSB of PT2E's float
  computation (dequantize, float ``F.interpolate``, quantize half to even);
* a model with the layer lowers with 0 fallbacks for cortex-m55 and cortex-m33 and verifies.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.target import Target
from cortex_m_nn.ops.resize import (
    FRACTION_BITS,
    ONE,
    RESIZE_BILINEAR,
    RESIZE_NEAREST,
    bilinear_table,
    nearest_table,
    resize,
)

from ..models import seeded


@dataclass(frozen=True)
class Case:
    """One way a model upsamples: ``F.interpolate(x, mode=…, …)`` or an ``nn`` layer."""

    mode: str  # "nearest", "nearest-exact" or "bilinear"
    scale: float | None = None  # scale_factor form
    size: tuple[int, int] | None = None  # size form
    align_corners: bool = False
    layer: str = "interpolate"  # or "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"

    def module(self) -> nn.Module:
        given = {"scale_factor": self.scale} if self.size is None else {"size": self.size}
        if self.layer == "UpsamplingNearest2d":
            return nn.UpsamplingNearest2d(**given)
        if self.layer == "UpsamplingBilinear2d":
            return nn.UpsamplingBilinear2d(**given)
        corners = {"align_corners": self.align_corners} if self.mode == "bilinear" else {}
        if self.layer == "Upsample":
            return nn.Upsample(**given, mode=self.mode, **corners)
        return Interpolate(given, self.mode, corners)

    def corners(self) -> bool:
        return self.align_corners or self.layer == "UpsamplingBilinear2d"

    def tables(self, height: int, width: int, out_h: int, out_w: int) -> tuple:
        """(rows, columns, mode) as the rule builds them for an input of height × width."""
        if self.mode == "bilinear":
            rows = bilinear_table(height, out_h, self.corners(), self.scale)
            columns = bilinear_table(width, out_w, self.corners(), self.scale)
            return rows, columns, RESIZE_BILINEAR
        exact = self.mode == "nearest-exact"
        rows = nearest_table(height, out_h, self.scale, exact)
        return rows, nearest_table(width, out_w, self.scale, exact), RESIZE_NEAREST


class Interpolate(nn.Module):
    def __init__(self, given: dict, mode: str, corners: dict) -> None:
        super().__init__()
        self.given, self.mode, self.corners = given, mode, corners

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, **self.given, mode=self.mode, **self.corners)


CASES = {
    "nearest-x2-Upsample": Case("nearest", scale=2.0, layer="Upsample"),
    "nearest-x3": Case("nearest", scale=3.0),
    "nearest-x1.5": Case("nearest", scale=1.5),
    "nearest-x1.7": Case("nearest", scale=1.7),
    "nearest-size-not-multiple": Case("nearest", size=(11, 7), layer="UpsamplingNearest2d"),
    "nearest-size-down": Case("nearest", size=(3, 4)),
    "nearest-exact-x2": Case("nearest-exact", scale=2.0),
    "nearest-exact-size": Case("nearest-exact", size=(9, 13)),
    "bilinear-x2": Case("bilinear", scale=2.0),
    "bilinear-x2-corners-layer": Case("bilinear", scale=2.0, layer="UpsamplingBilinear2d"),
    "bilinear-x1.7": Case("bilinear", scale=1.7, layer="Upsample"),
    "bilinear-size": Case("bilinear", size=(11, 13)),
    "bilinear-size-corners": Case("bilinear", size=(11, 13), align_corners=True),
}


def _output_size(case: Case, height: int, width: int) -> tuple[int, int]:
    """What PyTorch makes of the case for this input (the lowering reads it from the graph)."""
    probe = case.module()(torch.zeros(1, 1, height, width))
    return int(probe.shape[2]), int(probe.shape[3])


def _ours(case: Case, x: torch.Tensor) -> torch.Tensor:
    """The reference on NCHW int8 ``x`` (stored NHWC, as the kernel reads it), back in NCHW."""
    height, width = x.shape[2:]
    rows, columns, mode = case.tables(height, width, *_output_size(case, height, width))
    return resize(x.permute(0, 2, 3, 1).contiguous(), rows, columns, mode).permute(0, 3, 1, 2)


def _bilinear_by_hand(x: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """The documented formula, one element at a time with exact fractions, ties up."""
    n, channels = x.shape[:2]
    data, out = x.tolist(), torch.empty(n, channels, len(rows), len(columns), dtype=torch.int8)
    for oy, (y0, y1, wy) in enumerate(rows.tolist()):
        for ox, (x0, x1, wx) in enumerate(columns.tolist()):
            corners = [
                (y0, x0, (ONE - wy) * (ONE - wx)),
                (y0, x1, (ONE - wy) * wx),
                (y1, x0, wy * (ONE - wx)),
                (y1, x1, wy * wx),
            ]
            for b in range(n):
                for c in range(channels):
                    total = sum(data[b][c][y][xx] * weight for y, xx, weight in corners)
                    value = Fraction(total, 1 << (2 * FRACTION_BITS)) + Fraction(1, 2)
                    out[b, c, oy, ox] = value.__floor__()
    return out


@st.composite
def inputs(draw: st.DrawFn) -> torch.Tensor:
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)))
    shape += (draw(st.integers(1, 9)), draw(st.integers(1, 9)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    low, high = draw(st.sampled_from([(-128, 128), (-128, -120), (120, 128)]))
    return torch.randint(low, high, shape, generator=gen, dtype=torch.int8)


@pytest.mark.parametrize("name", list(CASES))
@settings(max_examples=30, deadline=None)
@given(x=inputs(), scale=st.floats(0.001, 1.0), zero_point=st.integers(-128, 127))
def test_resize_against_pytorch(name: str, x: torch.Tensor, scale: float, zero_point: int) -> None:
    case = CASES[name]
    ours = _ours(case, x)
    if case.mode != "bilinear":
        assert torch.equal(ours.to(torch.float32), case.module()(x.to(torch.float32)))
        return
    rows, columns, _ = case.tables(*x.shape[2:], *ours.shape[2:])
    assert torch.equal(ours, _bilinear_by_hand(x, rows, columns))
    floats = (x.to(torch.float32) - zero_point) * scale
    pt2e = torch.round(case.module()(floats) / scale) + zero_point
    assert (ours.to(torch.float32) - pt2e.clamp(-128, 127)).abs().max() <= 1


class Decoder(nn.Module):
    """conv → relu → the case's upsampling → conv: the resize between two NHWC kernels."""

    def __init__(self, case: Case) -> None:
        super().__init__()
        self.encode = nn.Conv2d(3, 6, 3, stride=2, padding=1)
        self.up = case.module()
        self.decode = nn.Conv2d(6, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.up(torch.relu(self.encode(x))))


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m33"])
@pytest.mark.parametrize("name", list(CASES))
def test_resize_lowers_without_fallback(name: str, target: str) -> None:
    module = Decoder(CASES[name]).eval()
    _, (x,) = seeded(nn.Identity, 1, 3, 10, 8)
    _, verification = check_dialect(
        module, (x,), target=Target.parse(target), after={"cortex_m_nn.resize": 1}
    )
    assert verification.passed and verification.max_lsb <= 1


def test_resize_functional_out_and_fake() -> None:
    x = torch.randint(-128, 128, (1, 3, 2, 4), dtype=torch.int8)
    rows = torch.tensor([0, 0, 1, 2, 2], dtype=torch.int16)
    columns = torch.tensor([1, 0], dtype=torch.int16)
    out = torch.ops.cortex_m_nn.resize(x, rows, columns, RESIZE_NEAREST)
    assert torch.equal(out, x[:, [0, 0, 1, 2, 2]][:, :, [1, 0]])
    buffer = torch.empty_like(out)
    torch.ops.cortex_m_nn.resize.out(x, rows, columns, RESIZE_NEAREST, out=buffer)
    assert torch.equal(buffer, out)
    with FakeTensorMode() as mode:
        fake = torch.ops.cortex_m_nn.resize(
            *(mode.from_tensor(t) for t in (x, rows, columns)), RESIZE_NEAREST
        )
    assert fake.shape == (1, 5, 2, 4) and fake.dtype == torch.int8


@pytest.mark.parametrize(
    ("rows", "mode", "message"),
    [
        (torch.tensor([0, 3], dtype=torch.int16), RESIZE_NEAREST, "row index"),
        (torch.tensor([0, 1], dtype=torch.int32), RESIZE_NEAREST, "table"),
        (torch.tensor([[0, 1, ONE + 1]], dtype=torch.int16), RESIZE_BILINEAR, "weights"),
        (torch.tensor([0], dtype=torch.int16), 2, "mode"),
    ],
)
def test_resize_refuses_invalid_tables(rows: torch.Tensor, mode: int, message: str) -> None:
    x = torch.zeros(1, 3, 2, 1, dtype=torch.int8)
    columns = torch.zeros(2, dtype=torch.int16)
    if mode == RESIZE_BILINEAR:
        columns = torch.tensor([[0, 1, 0], [1, 1, ONE]], dtype=torch.int16)
    with pytest.raises(ValueError, match=message):
        resize(x, rows, columns, mode)
