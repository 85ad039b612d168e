"""The operators' schemas: ``ops/operators.yaml`` read into typed records.

``operators.yaml`` (next to the operator definitions) lists every ``cortex_m_nn`` operator's
``.out`` schema, its prepared kind, its kernel cases and the operator ABI version. The kernel
ABI (``core.abi``), the ``.pte`` reader, the prepared-call table, the cases a program calls
and the kernels' generated declarations and dispatch (``embed.kernel_codegen``) all read it
through here. Torch-free.

A case is one of an operator's kernel functions: ``<name>_out`` runs the default case
(:data:`DEFAULT_CASE`, int8 activations), ``<name>_<case>_out`` each other one. A case's
condition is on the call's arguments (a tensor's dtype, an optional tensor given, an int's
value); the first case whose condition holds runs, else the default. The generated dispatch
(C++) and :meth:`Operator.case_of` (Python, for ``cortex-m-compile embed``) both read the same
conditions, so an image links exactly the cases its program calls.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import yaml

YAML_NAME = "operators.yaml"

#: The argument kinds a schema's types map to.
KINDS = {
    "Tensor": "tensor",
    "Tensor?": "optional_tensor",
    "int": "int",
    "float": "float",
    "int[]": "int_list",
    "Tensor[]": "tensor_list",
    "bool": "bool",
}


@dataclass(frozen=True)
class Argument:
    name: str
    kind: str  # one of KINDS' values, or out


#: The case an operator runs when no other case's condition holds: its ``<name>_out``.
DEFAULT_CASE = "int8"
#: The operators a ``stage`` call's steps call (``ops.stage``): their kernels run inside its
#: kernel, called directly, so an image with a stage compiles their kernel files too.
STAGE_STEP_OPERATORS = ("conv2d", "depthwise_conv2d", "add", "mul", "lut", "strided_copy")

#: The dtype names a case condition may test a tensor argument for, as ExecuTorch's ScalarType
#: codes and enumerators (runtime/core/portable_type/scalar_type.h).
DTYPES = {
    "uint8": (0, "Byte"),
    "int8": (1, "Char"),
    "int16": (2, "Short"),
    "int32": (3, "Int"),
    "int64": (4, "Long"),
    "float32": (6, "Float"),
}

#: A condition's test of an optional tensor: that the call passes one (not None).
GIVEN = "given"


class CallArguments(Protocol):
    """What a case condition reads of one call's arguments, by schema name."""

    def scalar_type(self, name: str) -> int: ...

    def given(self, name: str) -> bool: ...

    def value(self, name: str) -> int: ...


@dataclass(frozen=True)
class Case:
    """One non-default kernel case: its name and condition, (argument, expected) pairs that
    must all hold: a dtype name for a tensor, :data:`GIVEN` for an optional tensor, an int."""

    name: str
    when: tuple[tuple[str, str | int], ...]

    def holds(self, call: CallArguments) -> bool:
        for argument, expected in self.when:
            if expected == GIVEN:
                if not call.given(argument):
                    return False
            elif isinstance(expected, int):
                if call.value(argument) != expected:
                    return False
            elif not call.given(argument) or call.scalar_type(argument) != DTYPES[expected][0]:
                return False
        return True


@dataclass(frozen=True)
class Operator:
    name: str
    func: str
    arguments: tuple[Argument, ...]
    returns: int
    #: its kind in kernels/include/cortex_m_nn/prepared.h; 0: no prepared form
    prepared: int = 0
    #: its non-default kernel cases, in the order their conditions are tried
    cases: tuple[Case, ...] = ()
    #: the non-default cases with a prepared form too (``<name>_<case>_prepared``; the default
    #: case has one when ``prepared`` is set)
    prepared_cases: tuple[str, ...] = ()

    @property
    def case_names(self) -> tuple[str, ...]:
        """Every case of its kernel, the default first."""
        return (DEFAULT_CASE, *(case.name for case in self.cases))

    def case_of(self, call: CallArguments) -> str:
        """The case a call with these arguments runs."""
        return next((case.name for case in self.cases if case.holds(call)), DEFAULT_CASE)

    def case_function(self, case: str) -> str:
        """The kernel function (namespace cortex_m_nn::native) that runs ``case``."""
        return f"{self.name}_out" if case == DEFAULT_CASE else f"{self.name}_{case}_out"

    def prepared_function(self, case: str) -> str:
        """The kernel function that runs a proven call of ``case`` from its prepared entry."""
        return f"{self.name}_prepared" if case == DEFAULT_CASE else f"{self.name}_{case}_prepared"

    @property
    def stack_size(self) -> int:
        """ExecuTorch passes the arguments, then the return value (a list if several)."""
        return len(self.arguments) + 1


_SCHEMA = re.compile(r"^cortex_m_nn::(\w+)\.out\((.*)\) -> (.+)$")
_OUT = re.compile(r"^Tensor\([a-z]!\)$")
#: An optional tensor the kernel may write (a GRU's kept state): read as an optional tensor.
_OPTIONAL_WRITTEN = re.compile(r"^Tensor\([a-z]!\)\?$")


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
        elif _OPTIONAL_WRITTEN.match(type_text):
            arguments.append(Argument(arg_name, "optional_tensor"))
        elif type_text in KINDS:
            arguments.append(Argument(arg_name, KINDS[type_text]))
        else:
            raise ValueError(f"{name}: argument {part!r} has no kernel mapping")
    if not any(a.kind == "out" for a in arguments):
        raise ValueError(f"{name}: an .out schema needs Tensor(a!) out")
    return Operator(name, func, tuple(arguments), returns.count("Tensor"))


def yaml_path() -> Path:
    return Path(__file__).parent.parent / "ops" / YAML_NAME


def parse_cases(op: Operator, entries: dict[str, dict[str, str | int]]) -> tuple[Case, ...]:
    """An operator's ``cases:`` mapping (case name → {argument: expected}) checked against its
    schema: each argument exists and is of a kind its expectation can test."""
    kinds = {a.name: a.kind for a in op.arguments}
    cases = []
    for name, when in entries.items():
        if name == DEFAULT_CASE or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise ValueError(f"{op.name}: case name {name!r} (not {DEFAULT_CASE!r}, [a-z0-9_])")
        if not when:
            raise ValueError(f"{op.name}.{name}: a case needs a condition")
        for argument, expected in when.items():
            kind = kinds.get(argument)
            testable = (
                (kind == "int" and isinstance(expected, int))
                or (kind == "optional_tensor" and expected == GIVEN)
                or (kind in ("tensor", "optional_tensor", "out") and expected in DTYPES)
            )
            if not testable:
                raise ValueError(
                    f"{op.name}.{name}: cannot test argument {argument!r} ({kind}) for {expected!r}"
                )
        cases.append(Case(name, tuple(when.items())))
    return tuple(cases)


def load_yaml(path: Path | None = None) -> tuple[int, list[Operator]]:
    """(operator ABI version, operators) from ``operators.yaml``."""
    data = yaml.safe_load((path or yaml_path()).read_text())
    operators = []
    for entry in data["operators"]:
        op = dataclasses.replace(
            parse_operator(entry["func"]), prepared=int(entry.get("prepared", 0))
        )
        op = dataclasses.replace(op, cases=parse_cases(op, entry.get("cases", {})))
        prepared_cases = tuple(entry.get("prepared_cases", ()))
        if prepared_cases and (
            not op.prepared or not set(prepared_cases) <= set(op.case_names[1:])
        ):
            raise ValueError(
                f"{op.name}: prepared_cases {list(prepared_cases)} must be cases of an operator "
                "with a prepared kind"
            )
        operators.append(dataclasses.replace(op, prepared_cases=prepared_cases))
    return int(data["version"]), operators


def ops_version() -> int:
    """The operator ABI version of this release (``operators.yaml``'s ``version``)."""
    return load_yaml()[0]
