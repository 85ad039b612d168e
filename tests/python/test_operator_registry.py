"""operators.yaml, the Python operator definitions and the C++ kernels agree: every operator
has one kernel file whose function matches the declaration generated from its schema."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import cortex_m_nn.ops  # noqa: F401  (registers the operators)
from cortex_m_nn.core import operators
from cortex_m_nn.embed import kernel_codegen
from cortex_m_nn.ops.library import SCHEMAS

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"


def yaml_operators() -> dict[str, operators.Operator]:
    return {op.name: op for op in operators.load_yaml()[1]}


def test_yaml_lists_exactly_the_python_operators() -> None:
    assert sorted(yaml_operators()) == sorted(SCHEMAS)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_yaml_schema_is_the_registered_schema(name: str) -> None:
    registered = str(getattr(torch.ops.cortex_m_nn, name).out._schema)
    assert yaml_operators()[name].func == registered


def test_every_operator_has_one_kernel_file_and_no_more() -> None:
    files = {path.stem.removeprefix("op_") for path in KERNELS.glob("op_*.cpp")}
    assert files == set(SCHEMAS)


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).replace("( ", "(").replace(" )", ")").strip()


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_kernel_signature_matches_the_generated_declaration(name: str) -> None:
    declared = re.search(
        rf"void {name}_out\((.*?)\);",
        kernel_codegen.header(1, [yaml_operators()[name]]),
        re.S,
    ).group(1)
    source = (KERNELS / f"op_{name}.cpp").read_text()
    defined = re.search(rf"void {name}_out\((.*?)\)\s*\{{", source, re.S)
    assert defined, f"kernels/op_{name}.cpp does not define {name}_out"
    assert _normalise(defined.group(1)) == _normalise(declared)


def test_generated_registration_covers_each_operator(tmp_path: Path) -> None:
    kernel_codegen.generate(tmp_path)
    source = (tmp_path / kernel_codegen.SOURCE_NAME).read_text()
    header = (tmp_path / kernel_codegen.HEADER_NAME).read_text()
    version = operators.ops_version()
    assert f"#define CORTEX_M_NN_OPS_VERSION {version}" in header
    for name, op in yaml_operators().items():
        assert f'Kernel("cortex_m_nn::{name}.out", {name}_boxed)' in source
        # arguments + one return value; the boxed entry refuses any other count
        assert f'arguments_match(runtime, stack, "{name}", {len(op.arguments) + 1})' in source


def test_selective_registration(tmp_path: Path) -> None:
    kernel_codegen.main(["--output-dir", str(tmp_path), "--only", "cortex_m_nn::conv2d.out,add"])
    source = (tmp_path / kernel_codegen.SOURCE_NAME).read_text()
    registered = re.findall(r'Kernel\("cortex_m_nn::(\w+)\.out"', source)
    assert registered == ["add", "conv2d"]
    # every declaration stays, so all kernel files still compile
    header = (tmp_path / kernel_codegen.HEADER_NAME).read_text()
    assert all(f"void {name}_out(" in header for name in SCHEMAS)


def test_selective_registration_rejects_unknown_operators(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="unknown operators"):
        kernel_codegen.main(["--output-dir", str(tmp_path), "--only", "conv3d"])


def test_schema_parser_rejects_unmapped_types() -> None:
    with pytest.raises(ValueError, match="no kernel mapping"):
        operators.parse_operator(
            "cortex_m_nn::x.out(Tensor input, float[] scales, *, Tensor(a!) out) -> Tensor(a!)"
        )
