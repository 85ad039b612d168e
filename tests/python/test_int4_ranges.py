"""int4 weight ranges (``--int4-ranges mse``): the observers choose each channel's clipping of
max |w| with the least squared error, checked on hand-made channels whose optimum is known in
closed form; the qparams reach PT2E as a symmetric scale of zero point 0."""

from __future__ import annotations

import pytest
import torch

from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.options import Int4Ranges, QuantizationOptions, Weights
from cortex_m_nn.quantize import config
from cortex_m_nn.quantize.observers import CLIP_RATIOS, best_ratios

#: the grid's step: a chosen ratio is within it of the optimum
STEP = float(CLIP_RATIOS[1] - CLIP_RATIOS[0])


def _ones_and_outlier(ones: int, outlier: float) -> tuple[torch.Tensor, float]:
    """``ones`` weights of 1 and one of ``outlier`` (> 2): for a scale s in (2/3, 2) the ones
    round to one level (error (1 - s)² each) and the outlier clips at 7s, so the error
    ones · (1 - s)² + (outlier - 7s)² is least at s = (ones + 7 · outlier) / (ones + 49),
    the ratio s · 7 / outlier (where that s lies in the interval and 7s < outlier)."""
    scale = (ones + 7 * outlier) / (ones + 49)
    return torch.tensor([1.0] * ones + [outlier]), scale * 7 / outlier


def _on_the_grid() -> tuple[torch.Tensor, float]:
    """Every level of [-7, 7] at scale 0.25: max |w| / 7 is exact (error 0), ratio 1."""
    return torch.arange(-7, 8, dtype=torch.float32) * 0.25, 1.0


CHANNELS = {
    "100-ones-and-14": _ones_and_outlier(100, 14.0),
    "400-ones-and-10": _ones_and_outlier(400, 10.0),
    "negative": (-_ones_and_outlier(100, 14.0)[0], _ones_and_outlier(100, 14.0)[1]),
    "on-the-grid": _on_the_grid(),
}


@pytest.mark.parametrize(("values", "ratio"), CHANNELS.values(), ids=CHANNELS.keys())
def test_the_known_optimum_is_chosen(values: torch.Tensor, ratio: float) -> None:
    (chosen,) = best_ratios(values[None], 7).tolist()
    assert abs(chosen - ratio) <= STEP


def test_each_channel_is_chosen_on_its_own() -> None:
    """Rows of different optima in one tensor, per channel; per tensor one ratio for all."""
    rows = [CHANNELS[k][0] for k in ("100-ones-and-14", "on-the-grid")]
    width = max(r.numel() for r in rows)
    weight = torch.stack([torch.cat([r, torch.zeros(width - r.numel())]) for r in rows])
    kwargs = {"dtype": torch.int8, "quant_min": -7, "quant_max": 7}
    per_channel = config.WEIGHT_INT4_MSE_PER_CHANNEL.observer_or_fake_quant_ctr(
        qscheme=torch.per_channel_symmetric, **kwargs
    )
    per_channel(weight)
    scale, zero_point = per_channel.calculate_qparams()
    optimum = (100 + 7 * 14.0) / (100 + 49)  # the first row's s, as above
    assert abs(float(scale[0]) - optimum) <= STEP * 14 / 7
    assert float(scale[1]) == pytest.approx(0.25) and zero_point.tolist() == [0, 0]
    per_tensor = config.WEIGHT_INT4_MSE_PER_TENSOR.observer_or_fake_quant_ctr(
        qscheme=torch.per_tensor_symmetric, **kwargs
    )
    per_tensor(weight)
    (ratio,) = best_ratios(weight.reshape(1, -1), 7).tolist()
    assert float(per_tensor.calculate_qparams()[0]) == pytest.approx(ratio * 14 / 7)


def test_a_zero_channel_keeps_a_usable_scale() -> None:
    observer = config.WEIGHT_INT4_MSE_PER_CHANNEL.observer_or_fake_quant_ctr(
        dtype=torch.int8, quant_min=-7, quant_max=7, qscheme=torch.per_channel_symmetric
    )
    observer(torch.zeros(2, 4))
    scale, _ = observer.calculate_qparams()
    assert bool(torch.all(scale > 0))


class Clipped(torch.nn.Module):
    """A 1x1 convolution whose channels each hold one large weight among 63 small ones: the
    least error clips the large one (a ratio below 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(64, 8, 1)
        with torch.no_grad():
            self.conv.weight.uniform_(-0.1, 0.1)
            self.conv.weight[:, 0] = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


@pytest.mark.parametrize("ranges", list(Int4Ranges), ids=[r.value for r in Int4Ranges])
def test_the_packed_levels_are_the_chosen_scales(ranges: Int4Ranges) -> None:
    """Through PT2E and the lowering: the packed int4 levels are the float weights rounded at
    each channel's chosen scale (ratio 1 for max), and the program matches its PT2E graph."""
    from cortex_m_nn.ops import int4

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(2)
        module = Clipped().eval()
        example = (torch.randn(1, 64, 3, 3),)
    weight = module.conv.weight.detach().reshape(8, 64)
    ratios = best_ratios(weight, 7) if ranges is Int4Ranges.MSE else torch.ones(8)
    if ranges is Int4Ranges.MSE:
        assert bool(torch.all(ratios < 1))  # the case clips
    options = QuantizationOptions(weights=Weights.INT4, int4_ranges=ranges, equalize=False)
    compiled, verification = check_dialect(module, example, options=options)
    assert verification.passed, verification.exceeding
    (node,) = [
        n for n in compiled.lowered.graph.nodes if str(n.target) == "cortex_m_nn.conv2d.default"
    ]
    levels = int4.unpack(getattr(compiled.lowered, node.args[1].target)).reshape(8, 64)
    scale = (ratios.float() * weight.abs().amax(dim=1) / 7)[:, None]
    assert torch.equal(levels, torch.round(weight / scale).clamp(-7, 7).to(torch.int8))
