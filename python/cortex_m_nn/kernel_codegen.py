"""Generate the kernels' C++ declarations and ExecuTorch registration from ``operators.yaml``.

``operators.yaml`` (next to the operator definitions) lists every ``cortex_m_nn`` operator's
``.out`` schema and the operator ABI version. From it this writes:

- ``cortex_m_nn_operators.h``: one declaration per operator,
  ``void <name>_out(CallContext&, <inputs>, Tensor& out[, Tensor& scratch])``, which
  ``kernels/op_<name>.cpp`` defines; a kernel whose signature disagrees with the schema leaves
  the declared function undefined and the library fails to link.
- ``cortex_m_nn_register.cpp``: a boxed entry point per operator that finds the call's mode
  (``kernels/include/cortex_m_nn/call_mode.h``), checks the number and kinds of the arguments
  the program passes unless a proof pass has (so a ``.pte`` from another operator version is
  refused with a message instead of misread) and registers it under ``cortex_m_nn::<name>.out``.
  An operator with a ``prepared`` kind (``kernels/include/cortex_m_nn/prepared.h``) also gets
  its argument positions (``<name>_args``) and ``<name>_prepared(CallContext&, EValue**)``,
  which its kernel defines and its boxed entry calls for a proven call with a prepared entry.

``--only`` restricts registration to the operators a program uses (selective build).
Run: ``python -m cortex_m_nn.kernel_codegen --output-dir DIR [--only conv2d,add]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

YAML_NAME = "operators.yaml"
HEADER_NAME = "cortex_m_nn_operators.h"
SOURCE_NAME = "cortex_m_nn_register.cpp"


@dataclass(frozen=True)
class Argument:
    name: str
    kind: str  # tensor | optional_tensor | int | float | int_list | tensor_list | bool | out

    @property
    def cpp_type(self) -> str:
        return {
            "tensor": "const Tensor&",
            "optional_tensor": "const std::optional<Tensor>&",
            "int": "int64_t",
            "float": "double",
            "int_list": "IntArrayRef",
            "tensor_list": "executorch::aten::ArrayRef<Tensor>",
            "bool": "bool",
            "out": "Tensor&",
        }[self.kind]

    @property
    def check(self) -> str:
        """C++ condition on ``EValue* v`` that this argument's kind holds."""
        return {
            "tensor": "v->isTensor()",
            "optional_tensor": "v->isTensor() || v->isNone()",
            "int": "v->isInt()",
            "float": "v->isDouble()",
            "int_list": "v->isIntList()",
            "tensor_list": "v->isTensorList()",
            "bool": "v->isBool()",
            "out": "v->isTensor()",
        }[self.kind]

    def convert(self, index: int) -> str:
        value = f"stack[{index}]"
        return {
            "tensor": f"{value}->toTensor()",
            "optional_tensor": f"{value}->toOptional<Tensor>()",
            "int": f"{value}->toInt()",
            "float": f"{value}->toDouble()",
            "int_list": f"{value}->toIntList()",
            "tensor_list": f"{value}->toTensorList()",
            "bool": f"{value}->toBool()",
            "out": f"{value}->toTensor()",
        }[self.kind]


@dataclass(frozen=True)
class Operator:
    name: str
    func: str
    arguments: tuple[Argument, ...]
    returns: int
    #: its kind in kernels/include/cortex_m_nn/prepared.h; 0: no prepared form
    prepared: int = 0

    @property
    def stack_size(self) -> int:
        """ExecuTorch passes the arguments, then the return value (a list if several)."""
        return len(self.arguments) + 1


_KINDS = {
    "Tensor": "tensor",
    "Tensor?": "optional_tensor",
    "int": "int",
    "float": "float",
    "int[]": "int_list",
    "Tensor[]": "tensor_list",
    "bool": "bool",
}
_SCHEMA = re.compile(r"^cortex_m_nn::(\w+)\.out\((.*)\) -> (.+)$")
_OUT = re.compile(r"^Tensor\([a-z]!\)$")


def parse_operator(func: str) -> Operator:
    """One ``cortex_m_nn::<name>.out(...) -> ...`` schema string (the subset our ops use)."""
    match = _SCHEMA.match(func.strip())
    if not match:
        raise ValueError(f"{func}: expected cortex_m_nn::<name>.out(...) -> ...")
    name, argument_text, returns = match.groups()
    arguments = []
    for part in (p.strip() for p in argument_text.split(",")):
        if part == "*":
            continue
        type_text, _, arg_name = part.rpartition(" ")
        if _OUT.match(type_text):
            arguments.append(Argument(arg_name, "out"))
        elif type_text in _KINDS:
            arguments.append(Argument(arg_name, _KINDS[type_text]))
        else:
            raise ValueError(f"{name}: argument {part!r} has no kernel mapping")
    if not any(a.kind == "out" for a in arguments):
        raise ValueError(f"{name}: an .out schema needs Tensor(a!) out")
    return Operator(name, func, tuple(arguments), returns.count("Tensor"))


def yaml_path() -> Path:
    return Path(__file__).parent / "ops" / YAML_NAME


def load_yaml(path: Path | None = None) -> tuple[int, list[Operator]]:
    """(operator ABI version, operators) from ``operators.yaml``."""
    data = yaml.safe_load((path or yaml_path()).read_text())
    operators = [
        dataclasses.replace(parse_operator(entry["func"]), prepared=int(entry.get("prepared", 0)))
        for entry in data["operators"]
    ]
    return int(data["version"]), operators


def ops_version() -> int:
    """The operator ABI version of this release (``operators.yaml``'s ``version``)."""
    return load_yaml()[0]


def header(version: int, operators: list[Operator]) -> str:
    lines = [
        "// Generated by cortex_m_nn.kernel_codegen from operators.yaml. Do not edit.",
        "#pragma once",
        "",
        "#include <executorch/runtime/kernel/kernel_includes.h>",
        "",
        '#include "cortex_m_nn/call_mode.h"',
        "",
        f"#define CORTEX_M_NN_OPS_VERSION {version}",
        "",
        "namespace cortex_m_nn {",
        "namespace native {",
        "",
        "using executorch::aten::IntArrayRef;",
        "using executorch::aten::Tensor;",
        "using executorch::runtime::EValue;",
        "using executorch::runtime::KernelRuntimeContext;",
        "",
    ]
    for op in operators:
        params = ",\n    ".join(
            ["CallContext& context"] + [f"{a.cpp_type} {a.name}" for a in op.arguments]
        )
        lines += [f"// {op.func}", f"void {op.name}_out(\n    {params});", ""]
        if op.prepared:
            positions = ", ".join(f"{a.name} = {i}" for i, a in enumerate(op.arguments))
            lines += [
                f"// {op.name}'s argument positions, and its proven calls with a prepared entry.",
                f"struct {op.name}_args {{",
                f"  enum : size_t {{ {positions} }};",
                "};",
                f"void {op.name}_prepared(CallContext& context, EValue** args);",
                "",
            ]
    lines += ["}  // namespace native", "}  // namespace cortex_m_nn", ""]
    return "\n".join(lines)


#: The registration source up to the first boxed kernel: includes and the argument checks.
_SOURCE_PRELUDE = (
    "// Generated by cortex_m_nn.kernel_codegen from operators.yaml. Do not edit.",
    f'#include "{HEADER_NAME}"',
    "",
    "#include <executorch/runtime/kernel/operator_registry.h>",
    "",
    "namespace cortex_m_nn {",
    "namespace {",
    "",
    "using executorch::aten::Tensor;",
    "using executorch::runtime::Error;",
    "using executorch::runtime::EValue;",
    "using executorch::runtime::Kernel;",
    "using executorch::runtime::KernelRuntimeContext;",
    "using executorch::runtime::Span;",
    "",
    "// A program built for another operator version passes other arguments: refuse it.",
    "bool arguments_match(",
    "    KernelRuntimeContext& context,",
    "    Span<EValue*> stack,",
    "    const char* name,",
    "    size_t expected) {",
    "  if (stack.size() != expected) {",
    '    ET_LOG(Error, "cortex_m_nn::%s: %zu arguments, kernels expect %zu: the .pte was "',
    '        "compiled for another cortex_m_nn operator version (kernels: %d); recompile "',
    '        "it with the matching cortex-m-compile", name, (size_t)stack.size(), expected,',
    "        CORTEX_M_NN_OPS_VERSION);",
    "    context.fail(Error::InvalidProgram);",
    "    return false;",
    "  }",
    "  return true;",
    "}",
    "",
    "bool argument_kind(KernelRuntimeContext& context, bool ok, const char* name, int index) {",
    "  if (!ok) {",
    '    ET_LOG(Error, "cortex_m_nn::%s: argument %d has the wrong type: the .pte was "',
    '        "compiled for another cortex_m_nn operator version (kernels: %d)", name, index,',
    "        CORTEX_M_NN_OPS_VERSION);",
    "    context.fail(Error::InvalidProgram);",
    "  }",
    "  return ok;",
    "}",
    "",
)

#: After the kernel table: the registration function and its static call.
_SOURCE_EPILOGUE = (
    "};",
    "",
    "}  // namespace",
    "",
    "// Called once at start-up (static initialisation also calls it; a second call is a",
    "// no-op), so firmware that links the kernels from a static library can force it.",
    'extern "C" int cortex_m_nn_register_kernels(void) {',
    "  static const Error status = executorch::runtime::register_kernels(",
    "      Span<const Kernel>(kernels, sizeof(kernels) / sizeof(kernels[0])));",
    "  return static_cast<int>(status);",
    "}",
    "",
    "namespace {",
    "const int registered = cortex_m_nn_register_kernels();",
    "}  // namespace",
    "",
    "}  // namespace cortex_m_nn",
    "",
)


def _boxed(op: Operator) -> list[str]:
    """The boxed entry point of one operator: the call's mode, the stack's checks (unless
    proven), then the kernel."""
    lines = [
        f"void {op.name}_boxed(KernelRuntimeContext& runtime, Span<EValue*> stack) {{",
        "  CallContext context(runtime, stack.data());",
    ]
    if op.prepared:
        lines += [
            "  if (context.prepared() != nullptr) {",
            f"    native::{op.name}_prepared(context, stack.data());",
            "    return;",
            "  }",
        ]
    lines += [
        "  if (context.checks()) {",
        f'    if (!arguments_match(runtime, stack, "{op.name}", {op.stack_size})) {{',
        "      return;",
        "    }",
    ]
    if not op.prepared:  # a kernel with a prepared form compares its entry itself
        lines += [
            f'    if (!context.prepared_agrees("{op.name}", CORTEX_M_NN_PREPARED_NONE, nullptr,'
            " 0)) {",
            "      return;",
            "    }",
        ]
    for index, argument in enumerate(op.arguments):
        lines += [
            "    {",
            f"      const EValue* v = stack[{index}];",
            f'      if (!argument_kind(runtime, {argument.check}, "{op.name}", {index})) {{',
            "        return;",
            "      }",
            "    }",
        ]
    lines.append("  }")
    calls = ",\n      ".join(["context"] + [a.convert(i) for i, a in enumerate(op.arguments)])
    return [*lines, f"  native::{op.name}_out(\n      {calls});", "}", ""]


def source(operators: list[Operator]) -> str:
    """The generated registration source: one boxed entry point per operator, one table."""
    lines = list(_SOURCE_PRELUDE)
    for op in operators:
        lines += _boxed(op)
    lines += ["const Kernel kernels[] = {"]
    lines += [f'    Kernel("cortex_m_nn::{op.name}.out", {op.name}_boxed),' for op in operators]
    return "\n".join([*lines, *_SOURCE_EPILOGUE])


def generate(output_dir: Path, only: set[str] | None = None, yaml_path: Path | None = None) -> None:
    version, operators = load_yaml(yaml_path)
    if only is not None:
        unknown = only - {op.name for op in operators}
        if unknown:
            raise SystemExit(f"unknown operators {sorted(unknown)}; see {YAML_NAME}")
        selected = [op for op in operators if op.name in only]
    else:
        selected = operators
    output_dir.mkdir(parents=True, exist_ok=True)
    # All declarations (every kernel file compiles); registration only of the selected ones.
    _write_if_changed(output_dir / HEADER_NAME, header(version, operators))
    _write_if_changed(output_dir / SOURCE_NAME, source(selected))


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path)
    parser.add_argument("--yaml", type=Path, help=f"default: the package's {YAML_NAME}")
    parser.add_argument(
        "--only", help="comma-separated operator names (or ns::name.out) to register"
    )
    args = parser.parse_args(argv)
    if args.output_dir is None:
        parser.error("--output-dir is required")
    only = None
    if args.only is not None:
        only = {
            part.strip().removeprefix("cortex_m_nn::").removesuffix(".out")
            for part in args.only.split(",")
            if part.strip()
        }
    generate(args.output_dir, only, args.yaml)


if __name__ == "__main__":
    main()
