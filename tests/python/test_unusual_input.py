"""Unusual models and calibration files through the command line: each compiles (and verifies)
or is refused in one line on stderr with exit status 2, writing nothing (issue 13)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import torch

from cortex_m_nn.cli import main as cli

MODELS = Path(__file__).with_name("unusual_models.py")

#: factory → None (compiles, verifies) or a fragment of the one-line refusal.
CASES: dict[str, str | None] = {
    "int_input": "input 0 is torch.int32; the compiler quantizes floating-point inputs",
    "bool_input": "input 0 is torch.bool",
    "zero_size": "input 0 has no elements (shape [1, 2, 0, 5])",
    "scalar_input": "example inputs must be tensors",
    "list_inputs": None,
    "batch4": None,
    "dict_output": None,
    "nested_output": None,
    "none_output": "returns None as output 1; a compiled model returns tensors only",
    "int_output": "returns 3 as output 1",
    "training": None,
    "training_dropout": None,
    "wrong_type": "must return (torch.nn.Module, example_inputs tuple)",
    "not_module": "must return (torch.nn.Module, example_inputs tuple)",
    "tensor_only": "must return (torch.nn.Module, example_inputs tuple)",
    "raises": "factory unusual_models:raises failed: KeyError: 'nope'",
}


def compile_cli(capsys, *arguments: object) -> tuple[int, str, str]:
    status = cli.main([str(a) for a in arguments])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def refused(status: int, err: str, tmp_path: Path, expected: str, keep: set[str]) -> None:
    lines = [line for line in err.splitlines() if not line.startswith("calibrating:")]
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("cortex-m-compile: error: "), err
    assert expected in lines[0]
    assert {p.name for p in tmp_path.iterdir()} == keep


@pytest.mark.parametrize("factory", list(CASES))
def test_unusual_model(capsys, tmp_path: Path, factory: str) -> None:
    pte = tmp_path / "out.pte"
    status, out, err = compile_cli(capsys, f"{MODELS}:{factory}", "-o", pte, "--verify")
    if CASES[factory] is not None:
        refused(status, err, tmp_path, CASES[factory], set())
        return
    assert status == 0, err
    assert "PASS" in out and pte.stat().st_size > 0


def test_training_mode_is_compiled_as_eval_mode(capsys, tmp_path: Path) -> None:
    programs = []
    for factory in ("training_dropout", "training_dropout_eval"):
        pte = tmp_path / f"{factory}.pte"
        assert compile_cli(capsys, f"{MODELS}:{factory}", "-o", pte, "-q")[0] == 0
        programs.append(pte.read_bytes())
    assert programs[0] == programs[1]


def _pickled(path: Path) -> None:
    torch.save([torch.zeros(4, 4, 2, 5, 5), argparse.Namespace(a=1)], path)


#: calibration file → (writer, fragment of the refusal); the model takes [4, 2, 5, 5].
CALIBRATION = {
    "pickled.pt": (_pickled, "holds Python objects other than tensors (argparse.Namespace)"),
    "objects.npz": (
        lambda p: np.savez(p, np.array([object(), 1], dtype=object)),
        "Object arrays cannot be loaded",
    ),
    "int8.npz": (
        lambda p: np.savez(p, np.zeros((3, 4, 2, 5, 5), np.int8)),
        "input 0 is torch.int8; give the float samples the model takes (torch.float32)",
    ),
    "rank.npz": (lambda p: np.savez(p, np.zeros((3, 2, 5, 5), np.float32)), "expected [samples"),
    "empty.npz": (lambda p: np.savez(p), "has 0 arrays; the model takes 1 inputs"),
    "truncated.npz": (lambda p: p.write_bytes(b"PK\x03\x04" + bytes(40)), "cannot read"),
}


@pytest.mark.parametrize("name", list(CALIBRATION))
def test_unusual_calibration_file(capsys, tmp_path: Path, name: str) -> None:
    write, expected = CALIBRATION[name]
    write(tmp_path / name)
    pte = tmp_path / "out.pte"
    status, _, err = compile_cli(
        capsys, f"{MODELS}:batch4", "-o", pte, "--calibration", tmp_path / name
    )
    refused(status, err, tmp_path, expected, {name})


def test_float64_calibration_is_taken_as_float32(capsys, tmp_path: Path) -> None:
    samples = np.random.default_rng(0).standard_normal((3, 4, 2, 5, 5))
    np.savez(tmp_path / "f64.npz", samples)
    np.savez(tmp_path / "f32.npz", samples.astype(np.float32))
    programs = []
    for name in ("f64", "f32"):
        pte = tmp_path / f"{name}.pte"
        calibration = tmp_path / f"{name}.npz"
        assert compile_cli(capsys, f"{MODELS}:batch4", "-o", pte, "--calibration", calibration,
                           "-q")[0] == 0  # fmt: skip
        programs.append(pte.read_bytes())
    assert programs[0] == programs[1]


def _two_programs() -> dict[str, torch.export.ExportedProgram]:
    from tests.python.unusual_models import batch4

    module, (example,) = batch4()
    first = torch.export.export(module, (example,))
    second = torch.export.export(torch.nn.ReLU(), (example,))
    return {"forward": first, "relu": second}


def test_a_pt2_with_several_programs_is_refused_naming_them(capsys, tmp_path: Path) -> None:
    from torch.export.pt2_archive._package import package_pt2

    package_pt2(tmp_path / "two.pt2", exported_programs=_two_programs())
    status, _, err = compile_cli(capsys, tmp_path / "two.pt2", "-o", tmp_path / "two.pte")
    assert status == 2
    (line,) = [line for line in err.splitlines() if line.strip()]
    assert "holds 2 programs (forward, relu)" in line and "torch.export.save" in line
    assert list(tmp_path.iterdir()) == [tmp_path / "two.pt2"]


def test_a_pt2_with_one_program_under_another_name_compiles(capsys, tmp_path: Path) -> None:
    from torch.export.pt2_archive._package import package_pt2

    package_pt2(tmp_path / "one.pt2", exported_programs={"forward": _two_programs()["forward"]})
    status, _, err = compile_cli(capsys, tmp_path / "one.pt2", "-o", tmp_path / "one.pte")
    assert status == 0, err
    assert (tmp_path / "one.pte").stat().st_size > 0


def test_dynamic_pt2_compiles_at_its_example_shape(capsys, tmp_path: Path) -> None:
    # A .pt2 exported with a dynamic batch: the program takes the example input's shape.
    import json

    from tests.python.unusual_models import batch4

    module, (example,) = batch4()
    batch = torch.export.Dim("batch", min=1, max=8)
    program = torch.export.export(module, (example,), dynamic_shapes=({0: batch},))
    torch.export.save(program, tmp_path / "dynamic.pt2")
    pte, report = tmp_path / "dynamic.pte", tmp_path / "r.json"
    status, out, err = compile_cli(
        capsys, tmp_path / "dynamic.pt2", "-o", pte, "--report-json", report, "--verify"
    )
    assert status == 0, err
    assert "PASS" in out
    tensors = json.loads(report.read_text())["memory"]["tensors"]
    inputs = [t["nbytes"] for t in tensors if t["kind"] == "input"]
    assert inputs == [4 * example.numel()], tensors  # float32 [4, 2, 5, 5], batch fixed at 4
