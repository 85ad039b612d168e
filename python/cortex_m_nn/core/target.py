"""Cortex-M cores, the CMSIS-NN code path (ISA) each can run, and target strings.

A target string is ``cortex-<core>[+<isa>]``: ``cortex-m55``, ``cortex-m0plus``,
``cortex-m33+scalar``. Without ``+<isa>`` the core's best path is used.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class TargetError(ValueError):
    """A target string or core/ISA combination that cannot be used."""


class Isa(str, enum.Enum):
    """CMSIS-NN code path, ordered by capability: SCALAR ⊂ DSP ⊂ MVE. Reads as its name."""

    SCALAR = "scalar"
    DSP = "dsp"
    MVE = "mve"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def rank(self) -> int:
        return list(Isa).index(self)


class Core(enum.Enum):
    """Arm Cortex-M cores; the value is the name used in target strings and -mcpu."""

    M0 = "cortex-m0"
    M0PLUS = "cortex-m0plus"
    M3 = "cortex-m3"
    M4 = "cortex-m4"
    M7 = "cortex-m7"
    M23 = "cortex-m23"
    M33 = "cortex-m33"
    M35P = "cortex-m35p"
    M52 = "cortex-m52"
    M55 = "cortex-m55"
    M85 = "cortex-m85"

    @property
    def best_isa(self) -> Isa:
        """The most capable CMSIS-NN path the core can run (its default)."""
        return _BEST_ISA[self]


_BEST_ISA = {
    Core.M0: Isa.SCALAR,
    Core.M0PLUS: Isa.SCALAR,
    Core.M3: Isa.SCALAR,
    Core.M23: Isa.SCALAR,
    Core.M4: Isa.DSP,
    Core.M7: Isa.DSP,
    Core.M33: Isa.DSP,
    Core.M35P: Isa.DSP,
    Core.M52: Isa.MVE,
    Core.M55: Isa.MVE,
    Core.M85: Isa.MVE,
}


@dataclass(frozen=True)
class Target:
    """A core and the CMSIS-NN path compiled for it."""

    core: Core
    isa: Isa

    def __post_init__(self) -> None:
        if self.isa.rank > self.core.best_isa.rank:
            allowed = ", ".join(i.value for i in Isa if i.rank <= self.core.best_isa.rank)
            raise TargetError(
                f"{self.core.value} cannot run the {self.isa.value} path; choose one of: {allowed}"
            )

    @classmethod
    def for_core(cls, core: Core) -> Target:
        return cls(core, core.best_isa)

    @classmethod
    def parse(cls, text: str) -> Target:
        """Parse ``cortex-m55``, ``cortex-m33+scalar``, ``cortex-m0plus`` (case-insensitive)."""
        name, plus, isa_name = text.strip().lower().partition("+")
        core = next((c for c in Core if c.value == name), None)
        if core is None:
            raise TargetError(
                f"unknown core {name!r}; valid cores: {', '.join(c.value for c in Core)}"
            )
        if not plus:
            return cls.for_core(core)
        isa = next((i for i in Isa if i.value == isa_name), None)
        if isa is None:
            raise TargetError(
                f"unknown ISA {isa_name!r}; valid ISAs: {', '.join(i.value for i in Isa)}"
            )
        return cls(core, isa)

    def __str__(self) -> str:
        if self.isa is self.core.best_isa:
            return self.core.value
        return f"{self.core.value}+{self.isa.value}"


DEFAULT_TARGET = Target.for_core(Core.M55)
