"""The operators' schemas: ``ops/operators.yaml`` read into typed records.

``operators.yaml`` (next to the operator definitions) lists every ``cortex_m_nn`` operator's
``.out`` schema, its prepared kind and the operator ABI version. The kernel ABI
(``core.abi``), the ``.pte`` reader, the prepared-call table and the kernels' generated
declarations (``embed.kernel_codegen``) all read it through here. Torch-free.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

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
        elif type_text in KINDS:
            arguments.append(Argument(arg_name, KINDS[type_text]))
        else:
            raise ValueError(f"{name}: argument {part!r} has no kernel mapping")
    if not any(a.kind == "out" for a in arguments):
        raise ValueError(f"{name}: an .out schema needs Tensor(a!) out")
    return Operator(name, func, tuple(arguments), returns.count("Tensor"))


def yaml_path() -> Path:
    return Path(__file__).parent.parent / "ops" / YAML_NAME


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
