"""The ``cortex-m-compile`` command line, end to end: inputs, outputs, report and exit status.

The CLI runs in-process through ``cli.main``; one test runs it as a real process for the exit
status. Compiles are shared through module-scoped fixtures and use small models, except the
no-argument run, whose default model (DS-CNN) is the point.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from executorch.runtime import Runtime

import cortex_m_nn
from cortex_m_nn.check import verify
from cortex_m_nn.cli import main as cli
from cortex_m_nn.pipeline import planned_buffer_bytes, pte_operators

ROOT = Path(__file__).resolve().parents[2]
MODELS = Path(__file__).with_name("models.py")
OPERATORS_YAML = ROOT / "python" / "cortex_m_nn" / "ops" / "operators.yaml"

#: What DS-CNN lowers to: every operator a cortex_m_nn kernel, nothing left in aten.
DS_CNN_OPERATORS = {
    f"cortex_m_nn::{name}.out"
    for name in (
        "quantize",
        "conv2d",
        "depthwise_conv2d",
        "avg_pool2d",
        "linear",
        "softmax",
        "dequantize",
    )
}

TINY_INPUT_SHAPE = (1, 2, 5, 5)
TINY_SOURCE = f"""
import torch
import yaml
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        y = nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1)
        return self.fc(torch.flatten(y, 1))


def make():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        return Tiny().eval(), (torch.randn{TINY_INPUT_SHAPE},)


def explode():
    raise ValueError("the factory exploded")
"""


#: tqdm's calibration progress bar (stderr, redrawn with carriage returns).
PROGRESS = re.compile(r"^calibrating: +\d+%\|.*|^$")


@dataclass
class Run:
    status: int
    out: str
    err: str


def invoke(*arguments: object) -> Run:
    """``cli.main`` in-process, for module-scoped fixtures (where capsys is unavailable)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main([str(a) for a in arguments])
    return Run(status, out.getvalue(), err.getvalue())


def invoke_to(directory: Path, stem: str, *arguments: object) -> tuple[Run, Path, Path]:
    """``invoke`` writing ``stem.pte`` and its JSON report ``stem.json`` in ``directory``."""
    pte, report = directory / f"{stem}.pte", directory / f"{stem}.json"
    return invoke(*arguments, "-o", pte, "--report-json", report), pte, report


def run(capsys: pytest.CaptureFixture[str], *arguments: object) -> Run:
    status = cli.main([str(a) for a in arguments])
    captured = capsys.readouterr()
    return Run(status, captured.out, captured.err)


def error_line(result: Run) -> str:
    """The one line a failing run prints on stderr (beside the calibration progress bar)."""
    assert result.status == 2, result
    lines = [line for line in result.err.splitlines() if not PROGRESS.match(line)]
    assert len(lines) == 1, result.err
    assert lines[0].startswith("cortex-m-compile: error: "), lines[0]
    return lines[0]


def metadata(path: Path) -> dict[str, list[str]]:
    """The records a .pte holds, read with ExecuTorch's runtime: its one metadata method's
    ``name=value`` lines."""
    program = Runtime.get().load_program(path)
    records = {}
    for line in program.load_method("cortex_m_nn_metadata").execute([])[0].splitlines():
        name, _, value = line.partition("=")
        records[f"cortex_m_nn_{name}"] = [value]
    return records


def operator_rows(text: str) -> list[str]:
    """The numbered rows of the operator table (above the totals, before the layer table)."""
    table = text.split("\noperators: ")[0]
    return [line for line in table.splitlines() if re.match(r"\s*\d+  \S", line)]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "tiny.py"
    path.write_text(TINY_SOURCE)
    return path


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Path, Path]:
    """The no-argument run (DS-CNN for cortex-m55), with --verify and a JSON report."""
    directory = tmp_path_factory.mktemp("default")
    pte, report = directory / "ds.pte", directory / "r.json"
    return invoke("-o", pte, "--verify", "--report-json", report), pte, report


@pytest.fixture(scope="module")
def tiny_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """The tiny model from ``file.py:factory`` with verification, JSON and intermediates."""
    directory = tmp_path_factory.mktemp("tiny")
    pte, report, stages = directory / "tiny.pte", directory / "r.json", directory / "stages"
    result = invoke(
        f"{tiny_model}:make",
        "-o",
        pte,
        "--verify",
        "--report-json",
        report,
        "--intermediates",
        stages,
    )
    return result, pte, json.loads(report.read_text()) if report.exists() else None, stages


# 1. The no-argument run ----------------------------------------------------------------


def test_default_run_succeeds_and_writes_readable_files(default_run) -> None:
    result, pte, report = default_run
    assert result.status == 0, result.err
    assert "Traceback" not in result.err and "cortex-m-compile: error" not in result.err
    umask = os.umask(0)
    os.umask(umask)
    for path in (pte, report):
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path
    assert sorted(p.name for p in pte.parent.iterdir()) == ["ds.pte", "r.json"]


def test_default_program_records_its_target(default_run) -> None:
    _, pte, _ = default_run
    program = Runtime.get().load_program(pte)
    names = set(program.method_names)
    assert names == {"forward", "cortex_m_nn_metadata"}  # one method holds every record
    recorded = metadata(pte)
    assert recorded["cortex_m_nn_core"] == ["cortex-m55"]
    assert recorded["cortex_m_nn_isa"] == ["mve"]
    assert recorded["cortex_m_nn_version"] == [cortex_m_nn.__version__]
    yaml_version = yaml.safe_load(OPERATORS_YAML.read_text())["version"]
    assert recorded["cortex_m_nn_ops_version"] == [str(yaml_version)]


def test_default_program_runs_only_cortex_m_nn_operators(default_run) -> None:
    _, pte, _ = default_run
    operators = pte_operators(pte.read_bytes())
    assert set(operators) == DS_CNN_OPERATORS
    assert not [op for op in operators if op.startswith("aten::")]


def test_default_text_report_matches_the_files(default_run) -> None:
    result, pte, report_path = default_run
    report = json.loads(report_path.read_text())
    text = result.out
    rows = operator_rows(text)
    assert len(rows) == len(report["operators"]) == report["totals"]["operators"]
    for row, operator in zip(rows, report["operators"], strict=True):
        assert operator["source_op"][:22] in row and operator["kernel"] in row, row
        assert "FALLBACK" not in row
    assert sum("cortex_m_nn::depthwise_conv2d" in row for row in rows) == 4
    size = pte.stat().st_size
    (totals,) = [line for line in text.splitlines() if line.startswith(".pte:")]
    pte_bytes, arena_bytes = (int(n.replace(",", "")) for n in re.findall(r"([\d,]+) B", totals))
    assert pte_bytes == size
    assert arena_bytes == planned_buffer_bytes(pte.read_bytes()) > 0
    assert "synthetic" in text.split("\n\n")[0]  # in the header, above the table
    assert re.search(r"verify .*PASS", text)
    assert f"wrote {pte} ({size:,} B)" in text


def test_default_json_report_matches_the_files(default_run) -> None:
    _, pte, report_path = default_run
    report = json.loads(report_path.read_text())
    data = pte.read_bytes()
    assert report["cortex_m_nn_version"] == cortex_m_nn.__version__
    assert report["model"] == "ds_cnn"
    assert report["target"] == {"name": "cortex-m55", "core": "cortex-m55", "isa": "mve"}
    totals = report["totals"]
    assert totals["pte_bytes"] == len(data)
    assert totals["arena_bytes"] == planned_buffer_bytes(data)
    assert totals["fallbacks"] == 0 and totals["lowered"] == totals["operators"]
    assert totals["macs"] == totals["lowered_macs"] == 2_656_768  # the published DS-CNN
    assert totals["fp32_macs"] == 0
    assert report["pte_operators"] == sorted(set(pte_operators(data)))
    assert report["calibration"]["synthetic"] is True
    assert report["calibration"]["samples"] > 0
    assert report["verify"]["passed"] is True
    assert report["verify"]["max_lsb_vs_pt2e"] <= report["verify"]["max_lsb_allowed"]


def test_default_memory_plan(default_run) -> None:
    _, pte, report_path = default_run
    memory = json.loads(report_path.read_text())["memory"]
    data = pte.read_bytes()
    assert memory["arena_bytes"] == planned_buffer_bytes(data)
    # The peak: a depthwise layer's 25×5×64 int8 input and output and its MVE scratch
    # (4 bytes × CMSIS-NN's 124-channel block × 3×3). The plan reaches the bound.
    assert memory["lower_bound_bytes"] == 2 * 25 * 5 * 64 + 4 * 124 * 9 == 20_464
    assert memory["arena_bytes"] == memory["lower_bound_bytes"]
    assert memory["planner"] == "greedy"  # ExecuTorch's own reaches it: kept on the tie
    assert memory["peak"]["scratch_bytes"] == 4 * 124 * 9
    # int8 weights: first conv 10×4×64, four depthwise 3×3×64 and pointwise 64×64, linear 64×12
    constants = memory["constants"]
    assert constants["weights"] == 10 * 4 * 64 + 4 * (9 * 64 + 64 * 64) + 64 * 12
    assert constants["total"] == memory["pte_constant_bytes"]
    assert memory["runtime_overhead_is_estimate"] is True


# 2. Targets -------------------------------------------------------------------------------


def test_target_override_is_recorded(capsys, tiny_model: Path, tmp_path: Path) -> None:
    pte, report = tmp_path / "m33.pte", tmp_path / "r.json"
    result = run(
        capsys,
        f"{tiny_model}:make",
        "--target",
        "cortex-m33+scalar",
        "-o",
        pte,
        "-q",
        "--report-json",
        report,
    )
    assert result.status == 0, result.err
    assert result.out == ""  # --quiet
    recorded = metadata(pte)
    assert recorded["cortex_m_nn_core"] == ["cortex-m33"]
    assert recorded["cortex_m_nn_isa"] == ["scalar"]
    assert json.loads(report.read_text())["target"]["isa"] == "scalar"
    assert recorded["cortex_m_nn_rounding"] == ["double"]  # CMSIS-NN's default


def test_single_rounding_is_recorded_and_verified(capsys, tiny_model: Path, tmp_path: Path) -> None:
    pte = tmp_path / "single.pte"
    result = run(capsys, f"{tiny_model}:make", "--rounding", "single", "--verify", "-o", pte)
    assert result.status == 0, result.err
    assert metadata(pte)["cortex_m_nn_rounding"] == ["single"]
    assert "PASS" in result.out


def test_isa_the_core_lacks_is_a_one_line_error(capsys, tmp_path: Path) -> None:
    pte = tmp_path / "out" / "m4.pte"
    line = error_line(run(capsys, "--target", "cortex-m4+mve", "-o", pte))
    assert "cortex-m4" in line and "mve" in line
    assert not pte.parent.exists()


# 3. Model sources -------------------------------------------------------------------------


def test_python_factory_compiles(tiny_run) -> None:
    result, pte, report, _ = tiny_run
    assert result.status == 0, result.err
    assert report["model"] == "tiny:make"
    assert report["totals"]["fallbacks"] == 0
    assert report["verify"]["passed"] is True
    operators = set(pte_operators(pte.read_bytes()))
    assert {"cortex_m_nn::conv2d.out", "cortex_m_nn::linear.out"} <= operators
    assert "cortex_m_nn::depthwise_conv2d.out" not in operators  # not the default model


#: Example inputs of the same values with the strides users' code gives them.
EXAMPLE_FORMS = {
    "contiguous": lambda x: x,
    # torch.from_numpy(a[None]): NumPy gives the new axis stride 0
    "numpy-new-axis": lambda x: torch.from_numpy(x[0].numpy()[None]),
    "channels-last": lambda x: x.contiguous(memory_format=torch.channels_last),
}


@pytest.mark.parametrize("form", list(EXAMPLE_FORMS))
def test_pt2_archive_compiles(
    capsys, tiny_model: Path, tiny_run, tmp_path: Path, form: str
) -> None:
    namespace: dict[str, object] = {}
    exec(compile(tiny_model.read_text(), str(tiny_model), "exec"), namespace)
    module, (example,) = namespace["make"]()
    inputs = (EXAMPLE_FORMS[form](example),)
    assert torch.equal(inputs[0], example)
    assert form != "numpy-new-axis" or inputs[0].stride()[0] == 0
    archive = tmp_path / "exported_tiny.pt2"
    torch.export.save(torch.export.export(module, inputs), archive)
    pte, report = tmp_path / "from_pt2.pte", tmp_path / "r.json"
    result = run(capsys, archive, "-o", pte, "--report-json", report)
    assert result.status == 0, result.err
    document = json.loads(report.read_text())
    assert document["model"] == "exported_tiny"
    # Same model, same synthetic calibration: the same program as from file.py:factory.

    def rows(operators: list[dict]) -> list[tuple]:
        return [(r["kernel"], r["macs"], r["weight_bytes"]) for r in operators]

    assert rows(document["operators"]) == rows(tiny_run[2]["operators"])
    assert pte_operators(pte.read_bytes()) == pte_operators(tiny_run[1].read_bytes())
    assert document["totals"]["pte_bytes"] == tiny_run[2]["totals"]["pte_bytes"]


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("absent.py:make", "absent.py"),
        ("absent.pt2", "absent.pt2"),
        ("not_a_model.pt2", "not_a_model.pt2"),
        ("TINY:no_such_factory", "no_such_factory"),
        ("TINY:explode", "the factory exploded"),
        ("no_such_model", "no_such_model"),
    ],
)
def test_bad_model_is_a_one_line_error_and_writes_nothing(
    capsys, tiny_model: Path, tmp_path: Path, spec: str, named: str
) -> None:
    (tmp_path / "not_a_model.pt2").write_bytes(np.random.default_rng(0).bytes(4096))
    spec = spec.replace("TINY", str(tiny_model))
    if not spec.startswith("/") and spec != "no_such_model":
        spec = str(tmp_path / spec)
    output = tmp_path / "out"
    output.mkdir()
    result = run(capsys, spec, "-o", output / "model.pte", "--report-json", output / "r.json")
    assert named in error_line(result)
    assert result.out == ""
    assert list(output.iterdir()) == []  # neither the outputs nor a temporary file


def test_console_script_exit_status(tmp_path: Path) -> None:
    """The real process: a corrupt .pt2 exits 2 with one stderr line, nothing else (torch's
    own loggers write to the real stderr, out of capsys' sight)."""
    archive = tmp_path / "corrupt.pt2"
    archive.write_bytes(np.random.default_rng(1).bytes(4096))
    script = shutil.which("cortex-m-compile", path=str(Path(sys.executable).parent))
    command = [script] if script else [sys.executable, "-m", "cortex_m_nn.cli.main"]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "python"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    result = subprocess.run(
        [*command, str(archive), "-o", str(tmp_path / "out.pte")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("cortex-m-compile: error: ") and "corrupt.pt2" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corrupt.pt2"]


#: bad input → (its arguments, relative to the test's directory; what must not be imported yet)
BAD_INPUT = {
    "model": (["model.pt2"], "executorch.exir"),
    "calibration": (["--calibration", "samples.npz"], "executorch.exir"),
    "missing model file": (["absent.py:make"], "torch"),
}


@pytest.mark.parametrize("bad", list(BAD_INPUT))
def test_bad_input_is_refused_before_the_compiler_is_imported(tmp_path: Path, bad: str) -> None:
    """A corrupt model or calibration file is answered before ExecuTorch's compiler (seconds
    of imports) is loaded, a missing model file before torch: the process checks what it was
    given first."""
    names, heavy = BAD_INPUT[bad]
    arguments = [str(tmp_path / name) if "." in name else name for name in names]
    for name in ("model.pt2", "samples.npz"):
        if name in names:
            (tmp_path / name).write_bytes(b"not an archive")
    probe = (
        "import sys; from cortex_m_nn.cli import main as cli; "
        f"status = cli.main({[*arguments, '-o', str(tmp_path / 'out.pte')]!r}); "
        f"print(status, {heavy!r} in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    result = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.stdout.split() == ["2", "False"], result.stdout + result.stderr
    assert Path(arguments[-1].split(":")[0]).name in result.stderr


# 4. Calibration files -----------------------------------------------------------------------

CALIBRATION_SAMPLES = 5


def _calibration_data() -> torch.Tensor:
    generator = torch.Generator().manual_seed(11)
    # Far from the synthetic N(0, 1): the quantization parameters must change.
    return 6.0 * torch.rand(CALIBRATION_SAMPLES, *TINY_INPUT_SHAPE, generator=generator)


def _write_calibration(path: Path, data: torch.Tensor) -> None:
    if path.suffix == ".npz":
        np.savez(path, data.numpy())
    else:
        torch.save(data, path)


@pytest.fixture(scope="module")
def calibrated_runs(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """One compile per calibration file form: .npz/.pt × [S, *shape]/[S, *shape[1:]]."""
    directory = tmp_path_factory.mktemp("calibrated")
    data = _calibration_data()
    runs = {}
    for suffix in (".npz", ".pt"):
        for form, array in (("full", data), ("squeezed", data.squeeze(1))):
            calibration = directory / f"samples_{form}{suffix}"
            _write_calibration(calibration, array)
            result, pte, report = invoke_to(
                directory, form + suffix, f"{tiny_model}:make", "--calibration", calibration
            )
            runs[form + suffix] = (result, pte, report, calibration)
    return runs


@pytest.mark.parametrize("form", ["full.npz", "squeezed.npz", "full.pt", "squeezed.pt"])
def test_calibration_file_is_used(calibrated_runs, form: str) -> None:
    result, pte, report_path, calibration = calibrated_runs[form]
    assert result.status == 0, result.err
    header = result.out.split("\n\n")[0]
    assert f"calibration: {calibration.name}: {CALIBRATION_SAMPLES} samples" in header
    assert "synthetic" not in result.out
    report = json.loads(report_path.read_text())
    assert report["calibration"]["synthetic"] is False
    assert report["calibration"]["samples"] == CALIBRATION_SAMPLES


def test_calibration_forms_agree_and_differ_from_synthetic(calibrated_runs, tiny_run) -> None:
    programs = {form: run[1].read_bytes() for form, run in calibrated_runs.items()}
    assert len(set(programs.values())) == 1, "same samples must give the same program"
    assert programs["full.npz"] != tiny_run[1].read_bytes(), "calibration data was ignored"


def _spoilt(value: float, *samples: int) -> torch.Tensor:
    """Four calibration samples, ``value`` at one element of each of ``samples``."""
    data = torch.zeros(4, *TINY_INPUT_SHAPE)
    for sample in samples:
        data[sample, 0, 1, 2, 3] = value
    return data


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ([torch.zeros(4, 1, 2, 5, 4)], "expected [samples, 1, 2, 5, 5]"),
        ([torch.zeros(4, 2, 5)], "expected [samples, 1, 2, 5, 5]"),
        ([torch.zeros(4, *TINY_INPUT_SHAPE)] * 2, "has 2 arrays"),
        ([_spoilt(math.nan, 2)], "input 0 of sample 2 holds NaN or ±Inf (1 of 4 samples do)"),
        ([_spoilt(-math.inf, 1, 3)], "input 0 of sample 1 holds NaN or ±Inf (2 of 4 samples do)"),
    ],
    ids=["wrong-shape", "wrong-rank", "two-arrays", "nan", "infinity"],
)
@pytest.mark.parametrize("suffix", [".npz", ".pt"])
def test_bad_calibration_is_a_one_line_error(
    capsys, tiny_model: Path, tmp_path: Path, arrays, message: str, suffix: str
) -> None:
    calibration = tmp_path / f"bad{suffix}"
    if suffix == ".npz":
        np.savez(calibration, *(a.numpy() for a in arrays))
    else:
        torch.save(list(arrays), calibration)
    pte = tmp_path / "out.pte"
    result = run(capsys, f"{tiny_model}:make", "-o", pte, "--calibration", calibration)
    assert message in error_line(result)
    assert not pte.exists()


def test_nonfinite_samples_can_be_left_out_and_are_counted(
    capsys, tiny_model: Path, tmp_path: Path
) -> None:
    data = _calibration_data()
    spoilt = data.clone()
    spoilt[1, 0, 0, 0, 0] = math.nan
    spoilt[3, 0, 1, 4, 4] = math.inf
    _write_calibration(tmp_path / "spoilt.npz", spoilt)
    _write_calibration(tmp_path / "clean.npz", data[[0, 2, 4]])
    runs = {}
    for name in ("spoilt", "clean"):
        pte, report = tmp_path / f"{name}.pte", tmp_path / f"{name}.json"
        extra = ["--skip-nonfinite-samples"] if name == "spoilt" else []
        calibration = tmp_path / f"{name}.npz"
        result = run(capsys, f"{tiny_model}:make", "-o", pte, "--calibration", calibration,
                     "--report-json", report, *extra)  # fmt: skip
        assert result.status == 0, result.err
        runs[name] = (result, pte.read_bytes(), json.loads(report.read_text()))
    result, program, report = runs["spoilt"]
    assert "calibration: spoilt.npz: 3 samples (2 with NaN or ±Inf left out)" in result.out
    assert report["calibration"]["samples"] == 3
    assert report["calibration"]["skipped_nonfinite"] == 2
    assert runs["clean"][2]["calibration"]["skipped_nonfinite"] == 0
    assert program == runs["clean"][1], "the samples left must calibrate as the clean file"


# 5. Operators without a lowering ------------------------------------------------------------


def model_line(text: str) -> str:
    """``path:line`` of the line of models.py holding ``text``, as the compiler names it: the
    path relative to the working directory when the file is inside it."""
    lines = MODELS.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if text in line)
    path = os.path.relpath(MODELS) if MODELS.is_relative_to(Path.cwd()) else str(MODELS)
    return f"{path}:{number}"


def test_unsupported_operator_is_refused(capsys, tmp_path: Path) -> None:
    pte = tmp_path / "ln.pte"
    line = error_line(run(capsys, f"{MODELS}:with_rms_norm", "-o", pte))
    assert "rms_norm" in line and "--allow-fallback" in line
    assert f"aten.rms_norm at {model_line('self.norm(self.conv(x))')} in norm (RMSNorm)" in line
    assert "BatchNorm" in line  # the nearest supported rewrite
    assert list(tmp_path.iterdir()) == []


def test_unsupported_operator_error_names_op_line_and_rewrite(capsys, tmp_path: Path) -> None:
    output = tmp_path / "out"
    output.mkdir()
    result = run(
        capsys,
        f"{MODELS}:grouped_conv",
        "-o",
        output / "g.pte",
        "--report-json",
        output / "r.json",
        "--intermediates",
        output / "stages",
    )
    line = error_line(result)
    where = model_line("self.grouped(y)  # the unsupported operator")
    assert (
        f"error: aten.conv_transpose2d.input at {where} in grouped (ConvTranspose2d) cannot be "
        "lowered: " in line
    )
    assert "grouped transposed convolution (groups=2)" in line  # why
    assert "rewrite: " in line and "groups=1" in line and "block-diagonal" in line  # what to do
    assert line.endswith("or pass --allow-fallback to keep it in fp32")  # the only fallback
    assert result.out == ""
    assert list(output.iterdir()) == []
    if where.startswith("tests/python/"):  # run from the repository root: the docs' example
        page = ROOT / "docs" / "operators.md"
        assert line in page.read_text(), "update the example error of docs/operators.md"


def test_allow_fallback_counts_the_macs_left_in_fp32(capsys, tmp_path: Path) -> None:
    pte, report = tmp_path / "g.pte", tmp_path / "r.json"
    result = run(
        capsys, f"{MODELS}:grouped_conv", "-o", pte, "--allow-fallback", "--report-json", report
    )
    assert result.status == 0, result.err
    # The grouped transposed conv, 8 → 8 channels in 2 groups, 3×3, on 8×8: each of the
    # 8 × 8 × 8 input elements reaches 4 output channels × 9 taps.
    fp32 = 8 * 8 * 8 * 4 * 9
    assert fp32 == 18_432
    # Lowered: the first conv (8 × 8 × 8 outputs of 3 × 9) and the linear (4 outputs of 8).
    lowered = 8 * 8 * 8 * 3 * 9 + 4 * 8
    document = json.loads(report.read_text())
    totals = document["totals"]
    assert totals["fp32_macs"] == fp32
    assert totals["lowered_macs"] == lowered
    assert totals["lowered_macs_percent"] == pytest.approx(100 * lowered / (lowered + fp32))
    (row,) = [r for r in document["operators"] if not r["lowered"]]
    assert (
        row["source_op"] == "aten.conv_transpose2d.input"
        and row["fp32_macs"] == row["macs"] == fp32
    )
    assert "block-diagonal" in row["rewrite"]
    share = 100 * lowered / (lowered + fp32)
    assert f"MACs in cortex_m_nn ops: {lowered:,} ({share:.1f} %), left in fp32: {fp32:,}" in (
        result.out
    )
    (fallback_row,) = [r for r in operator_rows(result.out) if "FALLBACK" in r]
    assert f"{fp32:,}" in fallback_row
    assert f"{fp32:,} MACs left in fp32" in result.out
    assert "aten::convolution.out" in pte_operators(pte.read_bytes())


def test_allow_fallback_keeps_it_in_fp32(capsys, tmp_path: Path) -> None:
    pte, report = tmp_path / "ln.pte", tmp_path / "r.json"
    result = run(
        capsys,
        f"{MODELS}:with_rms_norm",
        "-o",
        pte,
        "--allow-fallback",
        "--report-json",
        report,
    )
    assert result.status == 0, result.err
    (row,) = [r for r in operator_rows(result.out) if "FALLBACK" in r]
    assert "rms_norm" in row
    totals = json.loads(report.read_text())["totals"]
    assert totals["fallbacks"] == 1
    assert totals["fp32_macs"] == 4 * 6 * 6 * 3  # per element: squares, scale, affine weight
    operators = pte_operators(pte.read_bytes())
    assert "aten::rsqrt.out" in operators  # the float RMS norm, decomposed by ExecuTorch
    assert "cortex_m_nn::conv2d.out" in operators


# 6. Intermediates ---------------------------------------------------------------------------


def test_equalize_and_bias_correction_are_recorded_verified_and_deterministic(
    capsys, tiny_model: Path, tiny_run, tmp_path: Path
) -> None:
    reports, programs = [], []
    for name in ("a", "b"):
        pte, report = tmp_path / f"{name}.pte", tmp_path / f"{name}.json"
        arguments = ("--equalize", "--bias-correction", "--verify", "-q", "--report-json", report)
        result = run(capsys, f"{tiny_model}:make", *arguments, "-o", pte)
        assert result.status == 0, result.err
        reports.append(json.loads(report.read_text()))
        programs.append(pte.read_bytes())
    options = reports[0]["calibration"]["options"]
    assert options["equalize"] is True and options["bias_correction"] is True
    default = tiny_run[2]["calibration"]["options"]
    assert default["equalize"] is True and default["bias_correction"] is False  # the defaults
    assert reports[0]["verify"]["passed"] is True
    assert programs[0] == programs[1]  # the same calibration set: the same program
    assert programs[0] != tiny_run[1].read_bytes()  # the weights and biases changed


def test_intermediates_are_written(tiny_run) -> None:
    result, _, _, stages = tiny_run
    assert result.status == 0, result.err
    files = sorted(stages.iterdir())
    assert len(files) == 5, files
    texts = {path.name: path.read_text() for path in files}
    assert all(text.strip() for text in texts.values()), texts
    (exported,) = [text for name, text in texts.items() if "export" in name and "exec" not in name]
    (lowered,) = [text for name, text in texts.items() if "lowered" in name]
    assert "aten.conv2d" in exported and "cortex_m_nn" not in exported
    assert "cortex_m_nn.conv2d" in lowered and "aten.conv2d" not in lowered


# 7, 8. Failures write nothing and keep what was there ------------------------------------


def test_verification_failure_writes_nothing(
    capsys, monkeypatch, tiny_model: Path, tmp_path: Path
) -> None:
    monkeypatch.setattr(verify, "MAX_LSB", -1)  # even a bit-exact program fails
    pte, report = tmp_path / "v.pte", tmp_path / "r.json"
    result = run(capsys, f"{tiny_model}:make", "-o", pte, "--verify", "--report-json", report)
    assert "verification failed" in error_line(result)
    assert "FAIL" in result.out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("failure", ["verification", "unsupported-op"])
def test_existing_output_survives_a_failed_compile(
    capsys, monkeypatch, tiny_model: Path, tmp_path: Path, failure: str
) -> None:
    pte, report = tmp_path / "keep.pte", tmp_path / "keep.json"
    pte.write_bytes(b"sentinel program")
    report.write_text("sentinel report")
    if failure == "verification":
        monkeypatch.setattr(verify, "MAX_LSB", -1)
        model = f"{tiny_model}:make"
    else:
        model = f"{MODELS}:with_rms_norm"
    result = run(capsys, model, "-o", pte, "--verify", "--report-json", report)
    error_line(result)
    assert pte.read_bytes() == b"sentinel program"
    assert report.read_text() == "sentinel report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.json", "keep.pte"]


# 9. Internal errors and outputs ------------------------------------------------------------


def _boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("boom\nsecond line of the message")


#: Where an unexpected exception is raised → the stage the CLI names.
INTERNAL = {
    "lower": ("cortex_m_nn.pipeline.lower", "lower"),
    "calibrate": ("cortex_m_nn.pipeline.prepare_pt2e", "calibrate"),
    "serialise": ("cortex_m_nn.pipeline.memory_planning_pass", "serialise"),
    "per-layer SNR": ("cortex_m_nn.check.layer_snr.layer_snr", "per-layer SNR"),
    "write": ("cortex_m_nn.core.outputs.os.replace", "write"),
}


@pytest.mark.parametrize("where", list(INTERNAL))
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_internal_error_is_one_line_exit_3_and_writes_nothing(
    capsys, monkeypatch, tiny_model: Path, tmp_path: Path, where: str, debug: bool
) -> None:
    target, stage = INTERNAL[where]
    monkeypatch.setattr(target, _boom)
    pte, report = tmp_path / "out.pte", tmp_path / "r.json"
    extra = ["--debug"] if debug else []
    result = run(capsys, f"{tiny_model}:make", "-o", pte, "--report-json", report, "-q", *extra)
    assert result.status == 3
    expected = (
        f"cortex-m-compile: internal error in {stage}: RuntimeError: boom; rerun with --debug "
        "for the traceback"
    )
    lines = [line for line in result.err.splitlines() if not PROGRESS.match(line)]
    if debug:
        assert lines[0] == "Traceback (most recent call last):" and "_boom" in result.err
        assert lines[-1] == expected
    else:
        assert lines == [expected]
    assert list(tmp_path.iterdir()) == []


def test_embed_internal_error_is_one_line(capsys, monkeypatch, tmp_path: Path) -> None:
    from cortex_m_nn.embed import pte_source as embed

    monkeypatch.setattr(embed, "model_facts", _boom)
    pte = tmp_path / "model.pte"
    pte.write_bytes(b"whatever")
    result = run(capsys, "embed", pte, "--output-dir", tmp_path / "out")
    assert result.status == 3
    assert result.err.splitlines() == [
        "cortex-m-compile embed: internal error in embed: RuntimeError: boom; rerun with "
        "--debug for the traceback"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pte"]


@pytest.mark.parametrize(
    ("option", "named"),
    [("--report-json", "--report-json"), ("--plot", "--plot"), ("--test-vector", "--test-vector")],
)
def test_two_outputs_to_one_file_are_refused_before_compiling(
    capsys, monkeypatch, tmp_path: Path, option: str, named: str
) -> None:
    monkeypatch.setattr("cortex_m_nn.pipeline.compile_model", _boom)  # never reached
    pte = tmp_path / "model.pte"
    result = run(capsys, "-o", pte, option, tmp_path / "." / "model.pte")
    assert f"{named} {tmp_path}/model.pte is the file -o/--output names too" in error_line(result)
    assert list(tmp_path.iterdir()) == []


def test_output_that_cannot_be_written_is_one_line_and_nothing_is_left(
    capsys, tiny_model: Path, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    pte, report = tmp_path / "ok.pte", tmp_path / "a-file" / "r.json"
    result = run(capsys, f"{tiny_model}:make", "-o", pte, "--report-json", report, "-q")
    assert "cannot write" in error_line(result) and "choose another path" in error_line(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
