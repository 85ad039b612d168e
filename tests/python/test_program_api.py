"""The front door: ``cortex_m_nn.compile(model, example_inputs, **options) -> Program``.

The options are the command line's, one for one and with its defaults, and the command line
is a thin layer over the same function, so both give the same bytes.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
from pathlib import Path

import pytest
import torch

import cortex_m_nn
from cortex_m_nn.cli import main as cli
from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.ops.library import run_references

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "samples" / "hello_cortex_m_nn" / "model.py"


def hello() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    spec = importlib.util.spec_from_file_location("hello_model", HELLO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.hello()


def _parser_defaults() -> dict[str, object]:
    parser = cli.add_arguments(argparse.ArgumentParser())
    return {action.dest: action.default for action in parser._actions}


def test_every_compile_option_of_the_command_line_is_an_option_with_its_default() -> None:
    defaults = _parser_defaults()
    fields = {field.name: field.default for field in dataclasses.fields(cortex_m_nn.Options)}
    assert set(fields) <= set(defaults), set(fields) - set(defaults)
    for name, default in fields.items():
        assert defaults[name] == default, name
    # the rest of the parser's options are about files to write and messages
    outputs = {"help", "model", "output", "calibration", "report_json", "intermediates"}
    outputs |= {"test_vector", "plot", "quiet", "debug"}
    assert set(defaults) - set(fields) == outputs


@pytest.mark.parametrize(
    ("options", "arguments"),
    [
        ({}, []),
        (
            {"target": "cortex-m33", "rounding": "single", "calibration_method": "minmax"},
            ["--target", "cortex-m33", "--rounding", "single", "--calibration-method", "minmax"],
        ),
    ],
)
def test_the_api_writes_the_bytes_the_command_line_writes(
    tmp_path: Path, options: dict, arguments: list[str]
) -> None:
    module, example = hello()
    saved = cortex_m_nn.compile(module, example, **options).save(tmp_path / "api.pte")
    command = [f"{HELLO}:hello", "-o", str(tmp_path / "cli.pte"), "-q", *arguments]
    assert cli.main(command) == 0
    assert saved.read_bytes() == (tmp_path / "cli.pte").read_bytes()


def test_a_program_runs_with_its_own_rounding() -> None:
    """Program.run computes what the device does: the references under the program's ABI,
    which for a single-rounding program is not what a call without the rounding gives."""
    module, example = hello()
    program = cortex_m_nn.compile(module, example, rounding="single", calibration_method="minmax")
    assert program.abi.rounding is Rounding.SINGLE
    # a sample on which the two roundings give different outputs (found by trying seeds)
    sample = (torch.randn(1, 1, 8, 8, generator=torch.Generator().manual_seed(62)),)
    (ran,) = program.run(*sample)
    (single,) = run_references(program.compiled.lowered, sample, Rounding.SINGLE)
    (double,) = run_references(program.compiled.lowered, sample, Rounding.DOUBLE)
    assert torch.equal(ran, single)
    assert not torch.equal(ran, double)
    report = program.report
    assert report.data["target"] and str(report).strip()
    assert program.memory.arena_bytes == program.compiled.arena_bytes


def test_a_named_model_brings_its_own_inputs() -> None:
    with pytest.raises(CompileError, match="example_inputs go with a module"):
        cortex_m_nn.compile("ds_cnn", torch.zeros(1, 1, 49, 10))
    with pytest.raises(CompileError, match="needs its example_inputs"):
        cortex_m_nn.compile(torch.nn.ReLU())


def test_an_unknown_option_is_refused_naming_the_options() -> None:
    with pytest.raises(CompileError, match=r"unknown option calibraton_method; the options are"):
        cortex_m_nn.compile(*hello(), calibraton_method="mse")
