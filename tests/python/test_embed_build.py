"""``cortex-m-compile embed`` and ``--test-vector``: what a firmware build reads from a .pte.

The sizes are checked against the compile report (the memory plan computed from the graph,
independently of the .pte reader), the generated C against a C compiler, and the fit check
with the memories given the way the Zephyr module gives them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from cortex_m_nn.check import vector as test_vector
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.embed import pte_source as embed
from cortex_m_nn.plan import fit
from cortex_m_nn.serialize.pte import planned_buffer_bytes

from .models import conv_stack
from .test_cli import invoke, run

ROOT = Path(__file__).resolve().parents[2]

MODELS = Path(__file__).with_name("models.py")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, Path]:
    directory = tmp_path_factory.mktemp("embed")
    pte, report = directory / "conv.pte", directory / "report.json"
    vector = directory / "vector.h"
    result = invoke(
        f"{MODELS}:conv_stack", "--target", "cortex-m33", "-o", pte, "--report-json", report,
        "--test-vector", vector, "-q",
    )  # fmt: skip
    assert result.status == 0, result.err
    return pte, json.loads(report.read_text()), vector


def test_facts_agree_with_the_compile_report(compiled) -> None:
    pte, report, _ = compiled
    facts = embed.model_facts(pte.read_bytes())
    memory = report["memory"]
    assert sum(facts.planned_buffers) == planned_buffer_bytes(pte.read_bytes())
    assert facts.arena_bytes == sum(-(-b // 16) * 16 for b in facts.planned_buffers)
    assert facts.arena_bytes >= memory["arena_bytes"]
    scratch = sorted(t["nbytes"] for t in memory["tensors"] if t["kind"] == "scratch")
    assert sorted(facts.scratch_buffers) == scratch
    assert max(facts.scratch_buffers) == memory["largest_scratch_bytes"]
    assert facts.runtime_overhead_bytes == memory["runtime_overhead_bytes"]
    assert (facts.core, facts.isa, facts.rounding) == ("cortex-m33", "dsp", "double")
    names = {str(row["kernel"]).removeprefix("cortex_m_nn::") for row in report["operators"]}
    assert set(facts.kernels) <= names and "conv2d" in facts.kernels
    assert facts.fallback_operators == () and facts.prim_operators == ()
    assert (facts.inputs, facts.outputs) == (1, 1)


def test_method_allocator_is_the_estimate_plus_the_margin(compiled) -> None:
    pte, _, _ = compiled
    plain = embed.model_facts(pte.read_bytes(), method_margin=0)
    padded = embed.model_facts(pte.read_bytes(), method_margin=50)
    assert plain.method_allocator_bytes >= plain.runtime_overhead_bytes
    assert plain.method_allocator_bytes - plain.runtime_overhead_bytes < 16
    assert padded.method_allocator_bytes >= plain.runtime_overhead_bytes * 3 // 2
    assert padded.method_allocator_bytes % 16 == 0
    with pytest.raises(CompileError, match="percentage"):
        embed.model_facts(pte.read_bytes(), method_margin=-1)


def _macros(header: Path, source: Path) -> dict[str, str]:
    """The header's macros, after a C99 syntax check of the source: whole with CMSIS-NN's
    headers (the prepared-call entries are of its types) when ``CMSIS_NN_PATH`` is set, else
    the program array alone (the text before the prepared-call table)."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler")
    includes = ["-I", str(ROOT / "kernels" / "include")]
    if os.environ.get("CMSIS_NN_PATH"):
        includes += ["-I", str(Path(os.environ["CMSIS_NN_PATH"]) / "Include")]
    else:
        program = source.read_text().partition("\n/* The kernel calls of forward prepared")[0]
        source = source.with_name("program_only.c")
        source.write_text(program)
    checked = subprocess.run(
        [gcc, "-std=c99", "-Wall", "-Werror", "-fsyntax-only", *includes, str(source)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    defined = subprocess.run(
        [gcc, "-E", "-dM", "-x", "c", str(header)], capture_output=True, text=True, check=True
    ).stdout
    return dict(re.findall(r"^#define (CORTEX_M_NN_\w+) (.*)$", defined, re.MULTILINE))


def test_embed_writes_c_a_header_and_cmake_facts(compiled, tmp_path: Path, capsys) -> None:
    pte, _, _ = compiled
    result = run(capsys, "embed", pte, "--output-dir", tmp_path, "--method-margin", "10")
    assert result.status == 0, result.err
    facts = embed.model_facts(pte.read_bytes(), method_margin=10)
    macros = _macros(tmp_path / embed.HEADER_NAME, tmp_path / embed.SOURCE_NAME)
    assert macros["CORTEX_M_NN_ARENA_BYTES"] == f"{facts.arena_bytes}u"
    assert macros["CORTEX_M_NN_METHOD_ALLOCATOR_BYTES"] == f"{facts.method_allocator_bytes}u"
    assert macros["CORTEX_M_NN_MODEL_BYTES"] == f"{len(pte.read_bytes())}u"
    assert macros["CORTEX_M_NN_SCRATCH_BYTES_MAX"] == f"{max(facts.scratch_buffers)}u"
    assert macros["CORTEX_M_NN_MODEL_ISA"] == '"dsp"'
    sizes = ", ".join(f"{s}u" for s in facts.planned_buffers)
    assert macros["CORTEX_M_NN_PLANNED_BUFFER_SIZES"] == "{" + sizes + "}"
    cmake = dict(
        re.findall(r"^set\((\w+) (.*)\)$", (tmp_path / embed.CMAKE_NAME).read_text(), re.M)
    )
    assert cmake["CORTEX_M_NN_MODEL_KERNELS"] == '"' + ";".join(facts.kernels) + '"'
    assert cmake["CORTEX_M_NN_MODEL_FALLBACK_OPERATORS"] == '""'
    assert cmake["CORTEX_M_NN_MODEL_ISA"] == '"dsp"'
    assert cmake["CORTEX_M_NN_ARENA_BYTES"] == str(facts.arena_bytes)
    # The model bytes in the C source are the .pte's.
    source = (tmp_path / embed.SOURCE_NAME).read_text()
    body = source[source.index("{") : source.index("};")]
    assert bytes(int(b, 16) for b in re.findall(r"0x([0-9a-f]{2})", body)) == pte.read_bytes()
    assert f'section("{embed.MODEL_SECTION}")' in source and "aligned(16)" in source


def test_embed_refuses_a_model_that_does_not_fit(compiled, tmp_path: Path, capsys) -> None:
    pte, _, _ = compiled
    facts = embed.model_facts(pte.read_bytes())
    small = facts.arena_bytes + facts.method_allocator_bytes - 1
    result = run(
        capsys, "embed", pte, "--output-dir", tmp_path / "out",
        "--ram", small, "--ram-region", "DTCM", "--board", "mps3/corstone300/an547",
    )  # fmt: skip
    assert result.status == 2
    line = result.err.strip()
    assert line.startswith("cortex-m-compile embed: error: the model does not fit")
    assert f"DTCM {small:,} B < {small + 1:,} B needed" in line
    assert "ISRAM" in line  # where else the arena could go on this board
    assert not (tmp_path / "out").exists()
    # The same memory holding the arena alone fits: the runtime's RAM is elsewhere.
    alone = run(
        capsys, "embed", pte, "--output-dir", tmp_path / "alone", "--ram", small, "--arena-alone"
    )
    assert alone.status == 0, alone.err


def test_model_alone_counts_only_the_pte() -> None:
    budget = fit.budget(None, "10000", None, flash_name="DDR4")
    shared = fit.check(budget, 9000, 3, 100, 100)
    alone = fit.check(budget, 9000, 3, 100, 100, code_with_model=False)
    assert not shared["fits"] and "runtime code" in shared["error"]
    assert alone["fits"] and alone["flash"]["needed_bytes"] == 9000
    assert alone["flash"]["region"].startswith("DDR4")


def test_embed_needs_a_cortex_m_compile_program(tmp_path: Path, capsys) -> None:
    bogus = tmp_path / "bogus.pte"
    bogus.write_bytes(b"not a program")
    result = run(capsys, "embed", bogus, "--output-dir", tmp_path / "out")
    assert result.status == 2 and "give a .pte file" in result.err


@pytest.mark.parametrize(
    ("was", "now", "named"),
    [
        (b"cortex-m33", b"cordex-m33", "'cordex-m33' is not a valid Core"),
        (b"double", b"doubl0", "'doubl0' is not a valid Rounding"),
    ],
)
def test_embed_refuses_an_abi_no_build_has(
    compiled, tmp_path: Path, capsys, was: bytes, now: bytes, named: str
) -> None:
    # A .pte whose metadata reads but names no core or rounding of ours (found by tests/fuzz).
    program = compiled[0].read_bytes()
    assert program.count(was) == 1
    tampered = tmp_path / "tampered.pte"
    tampered.write_bytes(program.replace(was, now))
    result = run(capsys, "embed", tampered, "--output-dir", tmp_path / "out")
    assert result.status == 2, result.err
    assert result.err.count("\n") == 1 and named in result.err
    assert "recompile the model with cortex-m-compile" in result.err
    assert not (tmp_path / "out").exists()


def _floats(header: str, name: str) -> list[float]:
    body = re.search(rf"{name}\[\d+\][^=]*= \{{(.*?)\}};", header, re.DOTALL).group(1)
    return [float.fromhex(v.strip().removesuffix("f")) for v in body.split(",") if v.strip()]


def test_test_vector_holds_exact_values() -> None:
    inputs = [torch.tensor([[0.1, -2.5], [3.0e-8, 1.0 / 3.0]])]
    outputs = [torch.tensor([0.0, -0.0, 65504.0])]
    header = test_vector.c_header(inputs, outputs)
    assert _floats(header, "cortex_m_nn_test_input_0") == inputs[0].reshape(-1).tolist()
    assert _floats(header, "cortex_m_nn_test_output_0") == outputs[0].tolist()
    assert "#define CORTEX_M_NN_TEST_INPUTS 1u" in header
    assert "cortex_m_nn_test_output_size[] CORTEX_M_NN_TEST_UNUSED = {3u}" in header
    with pytest.raises(CompileError, match="only float32 and int8"):
        test_vector.c_header([torch.zeros(2, dtype=torch.int32)], outputs)
    with pytest.raises(CompileError, match="mix"):
        test_vector.c_header([inputs[0], torch.zeros(2, dtype=torch.int8)], outputs)
    with pytest.raises(CompileError, match="finite"):
        test_vector.c_header([torch.tensor([float("nan")])], outputs)


def test_test_vector_of_a_compile(compiled) -> None:
    _, _, vector = compiled
    header = vector.read_text()
    values = _floats(header, "cortex_m_nn_test_input_0")
    _, (example,) = conv_stack()
    assert len(values) == example.numel()
    scores = _floats(header, "cortex_m_nn_test_output_0")
    assert len(scores) == 5 and abs(sum(scores) - 1.0) < 0.1  # a softmax
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc:
        checked = subprocess.run(
            [gcc, "-x", "c", "-std=c99", "-Wall", "-Werror", "-fsyntax-only", str(vector)],
            capture_output=True, text=True,
        )  # fmt: skip
        assert checked.returncode == 0, checked.stderr


def test_fallback_operators_are_listed(tmp_path: Path, capsys) -> None:
    pte = tmp_path / "norm.pte"
    compiled = run(capsys, f"{MODELS}:with_rms_norm", "--allow-fallback", "-o", pte, "-q")
    assert compiled.status == 0, compiled.err
    facts = embed.model_facts(pte.read_bytes())
    assert facts.fallback_operators
    assert all(op.startswith("aten::") for op in facts.fallback_operators)
    assert set(facts.kernels) >= {"quantize", "dequantize"}
