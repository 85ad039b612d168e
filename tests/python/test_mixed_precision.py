"""``--precision auto --min-snr-db X``: int8 or int16 per layer, chosen by measurement.

The search's promises, checked on a small classifier whose softmax and convolutions gain from
int16: the program reaches the target on the calibration samples its ranges were not fitted to
(the odd-numbered ones); every layer it puts in int16 is needed (without any one of them the
SNR falls below the target, measured again here); a target int8 meets keeps
everything int8; an unreachable one is refused naming both bounds; the CLI refuses the
option combinations that mean nothing, in one line."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch import nn

from cortex_m_nn.check.verify import verify_program
from cortex_m_nn.core.abi import ProgramAbi, Rounding
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.options import QuantizationOptions
from cortex_m_nn.core.target import Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.pipeline import compile_model
from cortex_m_nn.search import activations as mixed_precision
from cortex_m_nn.search import layers as search_layers

from .test_cli import error_line, run


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pointwise = nn.Conv2d(8, 12, 1)
        self.head = nn.Linear(12, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.pointwise(torch.relu(self.depthwise(torch.relu(self.conv(x))))))
        return torch.softmax(self.head(y.mean(dim=(2, 3))) * 3, dim=-1)


def classifier_setting() -> tuple[ModelSource, ProgramAbi, object]:
    """The classifier (seed 11) as a model source, cortex-m55's program ABI (double rounding)
    and 8 synthetic calibration samples."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        module = Classifier().eval()
        example = (torch.randn(1, 1, 10, 8),)
    source = ModelSource("classifier", module, example)
    abi = ProgramAbi.for_target(Target.parse("cortex-m55"), Rounding.DOUBLE)
    return source, abi, synthetic(example, count=8)


@pytest.fixture(scope="module")
def setting() -> tuple[ModelSource, ProgramAbi, object]:
    return classifier_setting()


def _snr(setting: tuple, layers: tuple[str, ...]) -> float:
    """The SNR the search measures, computed here: ranges fitted on the even-numbered
    samples, measured on the odd-numbered ones."""
    source, abi, calibration = setting
    options = QuantizationOptions(int16_layers=layers)
    fitted = replace(calibration, samples=calibration.samples[0::2])
    program = compile_model(source, abi, fitted, progress=False, options=options, serialise=False)
    return search_layers.output_snr(program.lowered, abi, source.module, calibration.samples[1::2])


def test_bounds_are_the_uniform_programs(setting: tuple) -> None:
    source, abi, calibration = setting
    _, plan = mixed_precision.choose(source, abi, calibration, QuantizationOptions(), -100.0)
    assert plan.int8_snr_db < plan.int16_snr_db  # int16 keeps more of the float function
    assert plan.snr_db == pytest.approx(plan.int8_snr_db)
    assert all(not layer.int16 for layer in plan.layers)
    names = {layer.name for layer in plan.layers}
    assert {"conv2d", "conv2d_1", "conv2d_2", "linear", "softmax"} <= names


def test_the_target_is_reached_with_needed_layers_only(setting: tuple) -> None:
    source, abi, calibration = setting
    _, bounds = mixed_precision.choose(source, abi, calibration, QuantizationOptions(), -100.0)
    target = (bounds.int8_snr_db + bounds.int16_snr_db) / 2
    options, plan = mixed_precision.choose(source, abi, calibration, QuantizationOptions(), target)
    chosen = options.int16_layers
    assert chosen and plan.snr_db >= target
    assert _snr(setting, chosen) == pytest.approx(plan.snr_db)  # the program's own number
    # the kept program: the smallest arena of those measured that reach the target, no more
    # than every candidate in int16 (measured too)
    meeting = [(arena, len(layers)) for layers, snr, arena in plan.measured if snr >= target]
    assert (plan.arena_bytes, len(chosen)) == min(meeting)
    everything = {row["name"] for row in plan.as_dict()["layers"]}
    (full,) = [arena for layers, _, arena in plan.measured if set(layers) == everything]
    assert plan.arena_bytes <= full
    if all(c.why == "the target fails without it" for c in plan.layers if c.int16):
        for name in chosen:  # the greedy set kept: each chosen layer is needed
            assert _snr(setting, tuple(n for n in chosen if n != name)) < target
    program = compile_model(source, abi, calibration, progress=False, options=options)
    assert verify_program(program).passed
    int16 = {r.name for r in program.records if "_s16" in (r.cmsis_function or "")}
    assert set(chosen) <= int16
    report = plan.as_dict()
    assert {row["name"] for row in report["layers"] if row["precision"] == "int16"} == set(chosen)


def test_an_unreachable_target_is_refused(setting: tuple) -> None:
    source, abi, calibration = setting
    with pytest.raises(CompileError, match=r"cannot be reached: .* \(int8: "):
        mixed_precision.choose(source, abi, calibration, QuantizationOptions(), 500.0)


def test_options_record_the_choice() -> None:
    options = replace(QuantizationOptions(), int16_layers=("conv2d", "softmax"))
    assert options.as_dict()["int16_layers"] == ["conv2d", "softmax"]


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (["--precision", "auto"], "needs --min-snr-db"),
        (["--min-snr-db", "40"], "--precision auto"),
        (["--precision", "auto", "--min-snr-db", "40", "--activations", "int16"], "int8"),
        (["--precision", "auto", "--min-snr-db", "nan"], "finite"),
    ],
)
def test_cli_refuses_meaningless_combinations(capsys, tmp_path, arguments, words) -> None:
    result = run(capsys, *arguments, "-o", tmp_path / "x.pte")
    assert words in error_line(result)
    assert list(tmp_path.iterdir()) == []


def test_a_1d_model_whose_export_keeps_symbolic_sizes() -> None:
    """The zoo's 1-D audio model: its graph's sizes are SymInts; the search still counts them."""
    from tests.zoo import ZOO

    module, example = ZOO["audio1d"]()
    source = ModelSource("audio1d", module, example)
    abi = ProgramAbi.for_target(Target.parse("cortex-m55"), Rounding.DOUBLE)
    calibration = synthetic(example, count=4)
    _, bounds = mixed_precision.choose(source, abi, calibration, QuantizationOptions(), -100.0)
    assert all(isinstance(layer.activation_bytes, int) for layer in bounds.layers)
    target = (bounds.int8_snr_db + bounds.int16_snr_db) / 2
    options, plan = mixed_precision.choose(source, abi, calibration, QuantizationOptions(), target)
    assert options.int16_layers and plan.snr_db >= target
