"""``--weights auto --min-snr-db X``: int4 or int8 weights per layer, chosen by measurement.

On the mixed-precision tests' classifier (three layers with an int4 case: the depthwise and
pointwise convolutions and the head; the first convolution's rows of KW * Cin = 3 have none):
the candidates are the layers ``--weights int4`` packs; for a table of targets from all int4's
SNR to all int8's, the program reaches the target (its SNR measured again here), has the
fewest weight bytes of the programs measured that do, and keeps no more int4 layers for a
higher target; an unreachable target and int16 activations are refused in one line; the
choice round-trips through the options into the compiled program and the report; the CLI
runs it and refuses the combinations that mean nothing."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cortex_m_nn.check.verify import verify_program
from cortex_m_nn.core.abi import ProgramAbi
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.options import Activations, QuantizationOptions, Weights
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.pipeline import compile_model
from cortex_m_nn.report.compile_report import weight_precision_lines
from cortex_m_nn.search import layers as search_layers
from cortex_m_nn.search import weights as weight_precision

from .test_cli import error_line, run, tiny_model  # noqa: F401  (tiny_model: the fixture)
from .test_mixed_precision import classifier_setting

#: the classifier's layers with an int4 case (exported-graph names)
INT4_CAPABLE = {"conv2d_1", "conv2d_2", "linear"}


@pytest.fixture(scope="module")
def setting() -> tuple[ModelSource, ProgramAbi, object]:
    return classifier_setting()


@pytest.fixture(scope="module")
def bounds(setting: tuple) -> weight_precision.WeightPlan:
    """The search with a target every program meets: all int4 kept, both bounds measured."""
    source, abi, calibration = setting
    return weight_precision.choose(source, abi, calibration, QuantizationOptions(), -100.0)[1]


def _compiled(setting: tuple, int4_layers: tuple[str, ...], fitted: bool = True):
    source, abi, calibration = setting
    if fitted:  # as the search compiles: ranges fitted on the even-numbered samples
        calibration = replace(calibration, samples=calibration.samples[0::2])
    options = QuantizationOptions(int4_layers=int4_layers)
    return compile_model(source, abi, calibration, progress=False, options=options, serialise=False)


def _snr(setting: tuple, int4_layers: tuple[str, ...]) -> float:
    """The SNR the search measures, computed here on the odd-numbered samples."""
    source, abi, calibration = setting
    program = _compiled(setting, int4_layers)
    return search_layers.output_snr(program.lowered, abi, source.module, calibration.samples[1::2])


def test_candidates_are_what_weights_int4_packs(setting: tuple, bounds) -> None:
    source, abi, calibration = setting
    options = QuantizationOptions(weights=Weights.INT4)
    program = compile_model(source, abi, calibration, progress=False, options=options)
    packed = {r.name for r in program.records if "_s4" in (r.cmsis_function or "")}
    assert packed == INT4_CAPABLE == {layer.name for layer in bounds.layers}
    assert all(layer.int4 for layer in bounds.layers)
    assert bounds.snr_db == pytest.approx(bounds.int4_snr_db)
    assert bounds.int4_snr_db < bounds.int8_snr_db
    assert bounds.weight_bytes == bounds.int4_weight_bytes < bounds.int8_weight_bytes
    assert bounds.int4_snr_db == pytest.approx(_snr(setting, tuple(sorted(INT4_CAPABLE))))


#: targets as a share of the way from all int4's SNR to all int8's
SHARES = [0.05, 0.3, 0.6, 0.9, 1.0]


@pytest.fixture(scope="module")
def chosen(setting: tuple, bounds) -> list[tuple[float, QuantizationOptions, object]]:
    source, abi, calibration = setting
    found = []
    for share in SHARES:
        target = bounds.int4_snr_db + share * (bounds.int8_snr_db - bounds.int4_snr_db)
        options, plan = weight_precision.choose(
            source, abi, calibration, QuantizationOptions(), target
        )
        found.append((target, options, plan))
    return found


@pytest.mark.parametrize("index", range(len(SHARES)), ids=[f"share-{s}" for s in SHARES])
def test_the_target_is_met_with_the_fewest_bytes_measured(setting: tuple, chosen, index) -> None:
    target, options, plan = chosen[index]
    layers = options.int4_layers
    assert set(layers) <= INT4_CAPABLE and plan.snr_db >= target
    assert _snr(setting, layers) == pytest.approx(plan.snr_db)  # the program's own number
    meeting = [(size, len(s)) for s, snr, size in plan.measured if snr >= target]
    assert (plan.weight_bytes, len(layers)) == min(meeting)
    int8_bytes = next(size for s, _, size in plan.measured if not s)
    assert plan.weight_bytes <= int8_bytes == plan.int8_weight_bytes
    rows = plan.as_dict()["layers"]
    assert {row["name"] for row in rows if row["precision"] == "int4"} == set(layers)


def test_a_higher_target_keeps_no_more_int4(chosen) -> None:
    counts = [len(options.int4_layers) for _, options, _ in chosen]
    sizes = [plan.weight_bytes for _, _, plan in chosen]
    assert counts == sorted(counts, reverse=True) and sizes == sorted(sizes)
    assert counts[0] > counts[-1]  # the table spans a choice


def test_the_choice_compiles_as_chosen(setting: tuple, chosen) -> None:
    """The options carry the layers into the quantizer: exactly they run s4 kernels, the
    program verifies, and the report's weight bytes are the plan's."""
    _, options, plan = next(c for c in chosen if 0 < len(c[1].int4_layers) < len(INT4_CAPABLE))
    assert options.as_dict()["int4_layers"] == list(options.int4_layers)
    program = _compiled(setting, options.int4_layers)
    s4 = {r.name for r in program.records if "_s4" in (r.cmsis_function or "")}
    assert s4 == set(options.int4_layers)
    assert sum(r.weight_bytes for r in program.records) == plan.weight_bytes
    final = _compiled(setting, options.int4_layers, fitted=False)
    assert verify_program(final).passed


def test_report_rows(chosen) -> None:
    _, options, plan = chosen[2]
    lines = weight_precision_lines(plan.as_dict())
    assert f"{plan.weight_bytes:,} B of weights" in lines[1]
    for layer in plan.layers:
        (line,) = [row for row in lines if row.strip().startswith(layer.name + " ")]
        assert ("int4" if layer.name in options.int4_layers else "int8") in line.split()
        assert f"{layer.saved_bytes:,}" in line.split() and layer.why in line


@pytest.mark.parametrize(
    ("options", "target", "words"),
    [
        (QuantizationOptions(), 500.0, r"cannot be reached with --weights auto: .*all int4: "),
        (QuantizationOptions(activations=Activations.INT16), 0.0, "leave --activations"),
        (QuantizationOptions(int16_layers=("linear",)), 0.0, "--precision at uniform"),
    ],
    ids=["unreachable", "int16-activations", "int16-layers"],
)
def test_refusals(setting: tuple, options, target, words) -> None:
    source, abi, calibration = setting
    with pytest.raises(CompileError, match=words):
        weight_precision.choose(source, abi, calibration, options, target)


def test_cli_weights_auto(capsys, tiny_model, tmp_path) -> None:  # noqa: F811
    """A target all int4 misses and all int8 meets (measured by the same CLI with -100 dB):
    the JSON records the plan and the options, and exactly the int4 layers run s4 kernels."""
    plans = {}
    for name, target in (("low", "-100"), ("high", None)):
        if target is None:
            low = plans["low"]
            target = str((low["int4_snr_db"] + 2 * low["int8_snr_db"]) / 3)
        document = tmp_path / f"{name}.json"
        arguments = ["--weights", "auto", "--min-snr-db", target, "--verify"]
        result = run(capsys, f"{tiny_model}:make", *arguments, "--report-json", document,
                     "-o", tmp_path / f"{name}.pte")  # fmt: skip
        assert result.status == 0, result.err
        report = json.loads(document.read_text())
        plans[name] = plan = report["weight_precision"]
        assert report["precision"] is None and "weights per layer" in result.out
        int4 = report["calibration"]["options"]["int4_layers"]
        assert {r["name"] for r in plan["layers"] if r["precision"] == "int4"} == set(int4)
        s4 = {r["name"] for r in report["operators"] if "_s4" in (r["cmsis_function"] or "")}
        assert s4 == set(int4) and plan["snr_db"] >= float(target)
    assert plans["low"]["weight_bytes"] == plans["low"]["int4_weight_bytes"]
    assert len(plans["high"]["layers"]) == len(plans["low"]["layers"]) > 0


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (["--weights", "auto"], "--weights auto needs --min-snr-db"),
        (["--weights", "auto", "--min-snr-db", "30", "--precision", "auto"], "use one"),
        (["--weights", "auto", "--min-snr-db", "30", "--activations", "int16"], "int8"),
        (["--min-snr-db", "30"], "--weights auto"),
    ],
)
def test_cli_refuses_meaningless_combinations(capsys, tmp_path, arguments, words) -> None:
    result = run(capsys, *arguments, "-o", tmp_path / "x.pte")
    assert words in error_line(result)
    assert list(tmp_path.iterdir()) == []
