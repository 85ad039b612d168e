"""Random models from a grammar of layers (tests/fuzz/grammar.py) compiled through the CLI as
``path.py:factory``: each compiles to a program that passes ``--verify``, or is refused in one
line that writes nothing (an operator CMSIS-NN cannot run, without ``--allow-fallback``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fuzz.grammar import model_sources
from tests.fuzz.harness import check, fuzz_settings, run_cli

pytestmark = pytest.mark.xdist_group("fuzz")


@fuzz_settings(4)
@given(source=model_sources(), allow_fallback=st.booleans())
def test_grammar_model(source: str, allow_fallback: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="fuzz-") as scratch:
        factory = Path(scratch) / "model.py"
        factory.write_text(source)
        output_dir = Path(scratch) / "out"
        output_dir.mkdir()
        argv = [f"{factory}:factory", "-o", output_dir / "model.pte", "--verify", "-q"]
        if allow_fallback:
            argv.append("--allow-fallback")
        check("model", run_cli(argv), output_dir, {"model.pte"})
