"""The kernel ABI: the one value a program and a kernel build must agree on.

Three things decide whether kernels can run a program: the CMSIS-NN code path (ISA), the
requantization rounding CMSIS-NN is built with, and the operator ABI version (the argument
lists of ``operators.yaml``). :class:`KernelAbi` names them once, as a kernel build has them;
a program's ABI (:class:`ProgramAbi`) also knows the core it was compiled for. The kernel
ABI's text is what the C++ ``cortex_m_nn_kernels_abi()`` returns, ``isa=mve rounding=double
ops_version=1``; a ``.pte`` records the program's as ``cortex_m_nn_*`` records
(:meth:`ProgramAbi.metadata`) in one constant method (:func:`encode_metadata`), and loaders
compare the two (:meth:`KernelAbi.mismatch`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from cortex_m_nn.core.operators import ops_version as release_ops_version
from cortex_m_nn.core.target import Core, Isa, Target
from cortex_m_nn.version import __version__

#: Prefix of the records a .pte holds about its ABI (and the compiler version, its I/O).
METADATA_PREFIX = "cortex_m_nn_"
#: The one constant method holding them: a line ``<name>=<value>`` per record, the name
#: without the prefix (one method rather than one per record: each method costs a .pte about
#: 270 bytes of flash). kernels/abi.cpp reads it on the device.
METADATA_METHOD = METADATA_PREFIX + "metadata"


def encode_metadata(records: Mapping[str, object]) -> dict[str, str]:
    """The records (``cortex_m_nn_<name>`` → value) as the constant methods a .pte holds: one,
    :data:`METADATA_METHOD`."""
    lines = []
    for name, value in records.items():
        key, text = name.removeprefix(METADATA_PREFIX), str(value)
        if not key or "=" in key or "\n" in key or "\n" in text:
            raise ValueError(f"metadata record {name!r}={text!r} cannot be one line")
        lines.append(f"{key}={text}")
    return {METADATA_METHOD: "\n".join(lines)}


def decode_metadata(text: str) -> dict[str, str]:
    """:data:`METADATA_METHOD`'s value read back into its records by name, as text."""
    found = {}
    for line in text.splitlines():
        key, separator, value = line.partition("=")
        if separator:
            found[METADATA_PREFIX + key] = value
    return found


class Rounding(str, enum.Enum):
    """CMSIS-NN requantization rounding, a build-time choice of the library."""

    DOUBLE = "double"  #: default: rounding doubling high multiply, then rounding shift
    SINGLE = "single"  #: ``CMSIS_NN_USE_SINGLE_ROUNDING``: one rounding of the 64-bit product

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass(frozen=True)
class KernelAbi:
    """What a kernel build serves: ISA, rounding and operator version, for every core with
    that ISA (``cortex_m_nn_kernels_abi()``'s text). A program's is a :class:`ProgramAbi`."""

    isa: Isa
    rounding: Rounding = Rounding.DOUBLE
    ops_version: int = field(default_factory=release_ops_version)

    def __post_init__(self) -> None:
        object.__setattr__(self, "isa", Isa(self.isa))
        object.__setattr__(self, "rounding", Rounding(self.rounding))
        object.__setattr__(self, "ops_version", int(self.ops_version))

    def __str__(self) -> str:
        return f"isa={self.isa.value} rounding={self.rounding.value} ops_version={self.ops_version}"

    @classmethod
    def parse(cls, text: str) -> KernelAbi:
        """Read :meth:`__str__`'s text (``cortex_m_nn_kernels_abi()``'s)."""
        fields = dict(part.split("=", 1) for part in text.split())
        return cls(Isa(fields["isa"]), Rounding(fields["rounding"]), int(fields["ops_version"]))

    @classmethod
    def from_metadata(cls, values: Mapping[str, object]) -> KernelAbi:
        """The kernels a .pte needs, from its ``cortex_m_nn_*`` methods' values by name."""
        return cls(
            Isa(str(values[METADATA_PREFIX + "isa"])),
            Rounding(str(values[METADATA_PREFIX + "rounding"])),
            int(str(values[METADATA_PREFIX + "ops_version"])),
        )

    def mismatch(self, kernels: KernelAbi) -> str | None:
        """None when ``kernels`` can run a program of this ABI; else what differs and the fix."""
        problems = []
        if self.isa is not kernels.isa:
            problems.append(
                f"ISA {self.isa.value} (kernels: {kernels.isa.value}; recompile with a "
                f"--target whose ISA is {kernels.isa.value}, e.g. cortex-m55+{kernels.isa.value})"
            )
        if self.rounding is not kernels.rounding:
            problems.append(
                f"rounding {self.rounding.value} (kernels: {kernels.rounding.value}; "
                f"recompile with --rounding {kernels.rounding.value})"
            )
        if self.ops_version != kernels.ops_version:
            problems.append(
                f"operator version {self.ops_version} (kernels: "
                f"{kernels.ops_version}; rebuild the kernels and the .pte from one "
                "cortex-m-nn release)"
            )
        return "the .pte was compiled for " + "; ".join(problems) if problems else None


@dataclass(frozen=True)
class ProgramAbi(KernelAbi):
    """A program's ABI: the kernels it needs (equality and :meth:`mismatch` compare only
    those) and the core it was compiled for (``core``, given by keyword)."""

    core: Core = field(kw_only=True, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "core", Core(self.core))
        Target(self.core, self.isa)  # raises TargetError for a path the core lacks

    @classmethod
    def for_target(
        cls, target: Target, rounding: Rounding = Rounding.DOUBLE, ops_version: int | None = None
    ) -> ProgramAbi:
        """The ABI of a program compiled for ``target`` (this release's operator version)."""
        version = release_ops_version() if ops_version is None else ops_version
        return cls(target.isa, rounding, version, core=target.core)

    @property
    def target(self) -> Target:
        """The program's core and ISA."""
        return Target(self.core, self.isa)

    @property
    def kernels(self) -> KernelAbi:
        """The kernel build this program needs."""
        return KernelAbi(self.isa, self.rounding, self.ops_version)

    @classmethod
    def from_metadata(cls, values: Mapping[str, object]) -> ProgramAbi:
        """The ABI a .pte records, from its ``cortex_m_nn_*`` methods' values by name."""
        kernels = KernelAbi.from_metadata(values)
        core = Core(str(values[METADATA_PREFIX + "core"]))
        return cls(kernels.isa, kernels.rounding, kernels.ops_version, core=core)

    def metadata(self) -> dict[str, str | int]:
        """The records a .pte holds about its ABI (with the compiler's version)."""
        return {
            f"{METADATA_PREFIX}core": self.core.value,
            f"{METADATA_PREFIX}isa": self.isa.value,
            f"{METADATA_PREFIX}rounding": self.rounding.value,
            f"{METADATA_PREFIX}version": __version__,
            f"{METADATA_PREFIX}ops_version": self.ops_version,
        }
