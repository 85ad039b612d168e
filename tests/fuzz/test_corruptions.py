"""Corrupted inputs through the CLI: a ``.pt2`` to compile, ``.pt``/``.npz`` calibration files,
a ``.pte`` to embed or to inspect (as if it were the firmware image). Each case ends in a
verified program or a one-line refusal that writes nothing (tests/fuzz/harness.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fuzz import mutations
from tests.fuzz.harness import Seeds, check, fuzz_settings, run_cli

pytestmark = pytest.mark.xdist_group("fuzz")


def _case(kind: str, name: str, data: bytes, arguments) -> None:
    """Write ``data`` as ``name`` and run the CLI on it; the outputs go to a fresh directory."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as scratch:
        given_file = Path(scratch) / name
        given_file.write_bytes(data)
        output_dir = Path(scratch) / "out"
        output_dir.mkdir()
        argv, written = arguments(given_file, output_dir)
        check(kind, run_cli(argv), output_dir, written)


def _compile(model: str | None, calibration: bool):
    def arguments(given_file: Path, output_dir: Path):
        argv = [model or given_file, "-o", output_dir / "model.pte", "--verify", "-q"]
        if calibration:
            argv += ["--calibration", given_file]
        return argv, {"model.pte"}

    return arguments


def _corrupted(data: st.DataObject, seed: bytes, is_zip: bool) -> bytes:
    return data.draw(mutations.corruptions(seed, is_zip), label="corruption")[1]


@fuzz_settings(8)
@given(data=st.data())
def test_corrupted_pt2(seeds: Seeds, data: st.DataObject) -> None:
    corrupted = _corrupted(data, seeds.pt2, is_zip=True)
    _case("pt2", "model.pt2", corrupted, _compile(None, calibration=False))


@fuzz_settings(10)
@given(data=st.data())
def test_corrupted_pt_calibration(seeds: Seeds, data: st.DataObject) -> None:
    corrupted = _corrupted(data, seeds.pt, is_zip=True)
    _case("pt", "calibration.pt", corrupted, _compile(seeds.factory, calibration=True))


@fuzz_settings(15)
@given(data=st.data())
def test_corrupted_npz_calibration(seeds: Seeds, data: st.DataObject) -> None:
    corrupted = _corrupted(data, seeds.npz, is_zip=True)
    _case("npz", "calibration.npz", corrupted, _compile(seeds.factory, calibration=True))


def _embed(given_file: Path, output_dir: Path):
    embedded = {"cortex_m_nn_model.c", "cortex_m_nn_model.h", "cortex_m_nn_model.cmake"}
    return ["embed", given_file, "--output-dir", output_dir, "-q"], embedded


def _inspect(given_file: Path, output_dir: Path):
    return ["inspect", given_file, "--json", output_dir / "report.json"], {"report.json"}


@fuzz_settings(60)
@given(data=st.data())
def test_corrupted_pte_embed(seeds: Seeds, data: st.DataObject) -> None:
    _case("pte-embed", "model.pte", _corrupted(data, seeds.pte, is_zip=False), _embed)


@fuzz_settings(15)
@given(data=st.data())
def test_corrupted_pte_as_firmware_image(seeds: Seeds, data: st.DataObject) -> None:
    _case("pte-inspect", "model.pte", _corrupted(data, seeds.pte, is_zip=False), _inspect)
