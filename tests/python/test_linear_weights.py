"""Per-tensor or per-channel linear weights (``--linear-weights``): the rounding-noise rule on
hand-made weights, and a case table compiled end to end (the graph: which CMSIS-NN function,
which arguments; the numbers: ``verify`` against the PT2E graph)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.options import LinearWeights, QuantizationOptions
from cortex_m_nn.core.target import Target
from cortex_m_nn.quantize import config


def test_rounding_noise_of_hand_made_rows() -> None:
    """Rows [0.5, -0.5] and [127, -127]: one scale (1.0) rounds the small row to 0 or 1 (error
    0.5 each, energy 0.5); a scale per row (0.5/127 and 1.0) is exact."""
    weight = torch.tensor([[0.5, -0.5], [127.0, -127.0]])
    assert config.rounding_noise(weight, per_channel=False) == pytest.approx(0.5)
    assert config.rounding_noise(weight, per_channel=True) == pytest.approx(0.0, abs=1e-20)


def _spec_is_per_channel(weight: torch.Tensor, choice: LinearWeights) -> bool:
    return config.linear_weight_spec(weight, choice).qscheme == torch.per_channel_symmetric


def test_auto_takes_per_channel_only_for_3_db() -> None:
    gen = torch.Generator().manual_seed(0)
    rows = torch.randn(16, 32, generator=gen)
    balanced = rows / rows.abs().amax(dim=1, keepdim=True)  # every row's peak 1: one scale fits
    unbalanced = balanced * torch.logspace(-2, 0, 16).unsqueeze(1)  # peaks 100x apart
    assert not _spec_is_per_channel(balanced, LinearWeights.AUTO)
    assert _spec_is_per_channel(unbalanced, LinearWeights.AUTO)
    assert not _spec_is_per_channel(unbalanced, LinearWeights.PER_TENSOR)
    assert _spec_is_per_channel(balanced, LinearWeights.PER_CHANNEL)
    assert not _spec_is_per_channel(None, LinearWeights.AUTO)  # not a constant: per tensor


class Head(nn.Module):
    """Two linear layers; ``spread`` scales the first one's rows from 1/spread to 1."""

    def __init__(self, spread: float) -> None:
        super().__init__()
        self.hidden = nn.Linear(24, 12)
        self.out = nn.Linear(12, 5)
        with torch.no_grad():
            self.hidden.weight.mul_(
                torch.logspace(-torch.log10(torch.tensor(spread)), 0, 12)[:, None]
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(x)))


PER_TENSOR, PER_CHANNEL = "arm_fully_connected_s8", "arm_fully_connected_per_channel_s8"

#: (id, row spread of the first layer, choice, CMSIS-NN function of each layer)
CASES = [
    ("balanced-auto", 1.0, LinearWeights.AUTO, [PER_TENSOR, PER_TENSOR]),
    ("spread-auto", 100.0, LinearWeights.AUTO, [PER_CHANNEL, PER_TENSOR]),
    ("spread-per-tensor", 100.0, LinearWeights.PER_TENSOR, [PER_TENSOR, PER_TENSOR]),
    ("balanced-per-channel", 1.0, LinearWeights.PER_CHANNEL, [PER_CHANNEL, PER_CHANNEL]),
]


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m33", "cortex-m0plus"])
@pytest.mark.parametrize(
    ("spread", "choice", "functions"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_linear_weights_lower_and_verify(
    target: str, spread: float, choice: LinearWeights, functions: list[str]
) -> None:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        module = Head(spread).eval()
        example = (torch.randn(3, 24),)
    options = QuantizationOptions(linear_weights=choice, equalize=False)
    compiled, verification = check_dialect(
        module, example, target=Target.parse(target), options=options
    )
    assert verification.passed
    rows = [r for r in compiled.records if r.kernel == "cortex_m_nn::linear"]
    assert [r.cmsis_function for r in rows] == functions
    calls = [
        n for n in compiled.lowered.graph.nodes if str(n.target) == "cortex_m_nn.linear.default"
    ]
    for call, function in zip(calls, functions, strict=True):
        multipliers, shifts, multiplier, shift = (
            call.args[4],
            call.args[5],
            call.args[8],
            call.args[9],
        )
        if function == PER_CHANNEL:
            assert getattr(compiled.lowered, multipliers.target).shape == (
                getattr(compiled.lowered, call.args[1].target).shape[0],
            )
            assert getattr(compiled.lowered, shifts.target).dtype == torch.int32
            assert (multiplier, shift) == (0, 0)
        else:
            assert multipliers is None and shifts is None and multiplier > 0
