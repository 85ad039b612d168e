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


CASES = sorted((name, case) for name in SCHEMAS for case in yaml_operators()[name].case_names)


@pytest.mark.parametrize(("name", "case"), CASES)
def test_kernel_signature_matches_the_generated_declaration(name: str, case: str) -> None:
    """Each case's function is defined in the operator's one kernel file, with the schema's
    parameters."""
    function = yaml_operators()[name].case_function(case)
    declared = re.search(
        rf"void {function}\((.*?)\);",
        kernel_codegen.header(1, [yaml_operators()[name]]),
        re.S,
    ).group(1)
    source = (KERNELS / f"op_{name}.cpp").read_text()
    defined = re.search(rf"void {function}\((.*?)\)\s*\{{", source, re.S)
    assert defined, f"kernels/op_{name}.cpp does not define {function}"
    assert _normalise(defined.group(1)) == _normalise(declared)


def test_generated_registration_covers_each_operator(tmp_path: Path) -> None:
    kernel_codegen.generate(tmp_path)
    source = (tmp_path / kernel_codegen.SOURCE_NAME).read_text()
    header = (tmp_path / kernel_codegen.HEADER_NAME).read_text()
    version = operators.ops_version()
    assert f"#define CORTEX_M_NN_OPS_VERSION {version}" in header
    for name, op in yaml_operators().items():
        assert f'Kernel("cortex_m_nn::{name}.out", {name}_boxed)' in source
        # one letter per argument (+ the return value): the boxed entry refuses another count
        # or kind
        kinds = re.search(rf'arguments_match\(runtime, stack, "{name}", "(\w*)"\)', source)
        assert kinds is not None and len(kinds.group(1)) == len(op.arguments)
        letters = {"tensor": "t", "out": "t", "optional_tensor": "o", "int": "i", "int_list": "l"}
        assert all(
            letters[a.kind] == letter
            for a, letter in zip(op.arguments, kinds.group(1), strict=True)
            if a.kind in letters
        )


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
    with pytest.raises(SystemExit, match=r"unknown operators or cases \['conv2d.int2'\]"):
        kernel_codegen.main(["--output-dir", str(tmp_path), "--only", "conv2d.int2"])


def _boxed(source: str, name: str) -> str:
    start = source.index(f"void {name}_boxed(")
    return source[start : source.index("\n}\n", start)]


def test_registration_of_cases_references_only_the_linked_ones(tmp_path: Path) -> None:
    """conv2d.int16 alone: its boxed entry calls conv2d_int16_out, refuses the other two cases
    with one line and has no prepared path (a prepared call is of the default case); add
    selected whole calls both its cases."""
    kernel_codegen.main(["--output-dir", str(tmp_path), "--only", "conv2d.int16,add"])
    source = (tmp_path / kernel_codegen.SOURCE_NAME).read_text()
    conv2d = _boxed(source, "conv2d")
    assert "native::conv2d_int16_out(" in conv2d
    assert "native::conv2d_out(" not in conv2d and "native::conv2d_int4_out(" not in conv2d
    assert 'missing_case(runtime, "conv2d", "int4");' in conv2d
    assert 'missing_case(runtime, "conv2d", "int8");' in conv2d
    assert "conv2d_prepared" not in conv2d
    # the int16 test comes first: an int16 input with uint8 weights is the int16 case's to refuse
    assert conv2d.index("ScalarType::Short") < conv2d.index("ScalarType::Byte")
    add = _boxed(source, "add")
    assert "native::add_out(" in add and "native::add_int16_out(" in add
    assert "add_prepared" in add and "missing_case" not in add


def test_a_case_with_a_prepared_form_is_dispatched_among_the_prepared_calls(
    tmp_path: Path,
) -> None:
    """linear's per_channel case has its own prepared function: a proven call with an entry and
    a multipliers tensor goes there; per tensor alone, a per-channel entry is refused."""
    kernel_codegen.main(["--output-dir", str(tmp_path), "--only", "linear.per_channel,conv2d"])
    source = (tmp_path / kernel_codegen.SOURCE_NAME).read_text()
    linear = _boxed(source, "linear")
    prepared = linear[linear.index("context.prepared() != nullptr") : linear.index("checks()")]
    assert "stack[4]->isTensor()" in prepared  # multipliers, argument 4
    assert "native::linear_per_channel_prepared(" in prepared
    assert 'missing_case(runtime, "linear", "int8")' in prepared
    header = (tmp_path / kernel_codegen.HEADER_NAME).read_text()
    assert "void linear_per_channel_prepared(CallContext& context, EValue** args);" in header
    kernel_codegen.main(["--output-dir", str(tmp_path), "--only", "linear.int8"])
    linear = _boxed((tmp_path / kernel_codegen.SOURCE_NAME).read_text(), "linear")
    assert "native::linear_prepared(" in linear
    assert 'missing_case(runtime, "linear", "per_channel")' in linear


def test_case_conditions_read_the_schema() -> None:
    """A condition tests a tensor's dtype, an optional tensor given, or an int's value; one on
    an argument the schema lacks, or of the wrong kind, is refused when the yaml is read."""
    op = yaml_operators()["quantize"]
    with pytest.raises(ValueError, match="cannot test argument 'scale'"):
        operators.parse_cases(op, {"int16": {"scale": 2}})
    with pytest.raises(ValueError, match="cannot test argument 'nope'"):
        operators.parse_cases(op, {"int16": {"nope": "int16"}})
    with pytest.raises(ValueError, match="case name 'int8'"):
        operators.parse_cases(op, {"int8": {"dtype": 1}})


class _Call:
    """Arguments of one call, for Operator.case_of."""

    def __init__(self, dtypes: dict[str, int | None], ints: dict[str, int]) -> None:
        self.dtypes, self.ints = dtypes, ints

    def scalar_type(self, name: str) -> int:
        dtype = self.dtypes[name]
        assert dtype is not None
        return dtype

    def given(self, name: str) -> bool:
        return self.dtypes.get(name) is not None

    def value(self, name: str) -> int:
        return self.ints[name]


@pytest.mark.parametrize(
    ("name", "dtypes", "ints", "case"),
    [
        ("conv2d", {"input": 1, "weight": 1}, {"path": 0}, "int8"),
        ("conv2d", {"input": 2, "weight": 1}, {"path": 0}, "int16"),
        ("conv2d", {"input": 1, "weight": 0}, {"path": 0}, "int4"),
        ("conv2d", {"input": 2, "weight": 0}, {"path": 0}, "int16"),  # first that holds
        ("conv2d", {"input": 1, "weight": 1}, {"path": 1}, "rows"),
        ("conv2d", {"input": 2, "weight": 1}, {"path": 1}, "rows"),  # which refuses int16
        ("depthwise_conv2d", {"input": 1, "weight": 1}, {"path": 1}, "three_by_three"),
        ("quantize", {}, {"dtype": 1}, "int8"),
        ("quantize", {}, {"dtype": 2}, "int16"),
        ("svdf", {"state": 2}, {}, "int16"),
        ("linear", {"input": 1, "weight": 1, "multipliers": None}, {"path": 0}, "int8"),
        ("linear", {"input": 1, "weight": 1, "multipliers": 3}, {"path": 0}, "per_channel"),
        ("linear", {"input": 2, "weight": 1, "multipliers": None}, {"path": 0}, "int16"),
        ("linear", {"input": 1, "weight": 1, "multipliers": None}, {"path": 1}, "quads"),
        ("transpose", {"input": 2}, {}, "int8"),  # no cases: one function
    ],
)
def test_case_of_a_call(
    name: str, dtypes: dict[str, int | None], ints: dict[str, int], case: str
) -> None:
    assert yaml_operators()[name].case_of(_Call(dtypes, ints)) == case


def test_schema_parser_rejects_unmapped_types() -> None:
    with pytest.raises(ValueError, match="no kernel mapping"):
        operators.parse_operator(
            "cortex_m_nn::x.out(Tensor input, float[] scales, *, Tensor(a!) out) -> Tensor(a!)"
        )
