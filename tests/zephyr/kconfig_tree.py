"""Load cortex-m-nn's Kconfig on top of stand-ins for the Zephyr symbols it uses.

``kconfig/Kconfig.zephyr`` copies each Zephyr symbol's type, dependencies and selects from
the Zephyr file named beside it, and adds ``TEST_SOC_*`` choices that select what a SoC
selects. :func:`configure` applies a ``prj.conf``-like assignment the way Zephyr's
``scripts/kconfig/kconfig.py`` judges it: an assignment the tree does not honour is refused
(Zephyr stops the build with "... was assigned the value ... but got the value ...").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

kconfiglib = pytest.importorskip("kconfiglib")

ROOT = Path(__file__).resolve().parents[2]
STUBS = Path(__file__).resolve().parent / "kconfig" / "Kconfig.zephyr"

#: SoC profile -> the TEST_SOC_* symbol that puts the tree in that SoC's state.
SOCS = {
    "none": "TEST_SOC_NONE",
    "m0": "TEST_SOC_M0",
    "m3": "TEST_SOC_M3",
    "m4": "TEST_SOC_M4",
    "m7": "TEST_SOC_M7",
    "m33": "TEST_SOC_M33_DSP",
    "m33-nodsp": "TEST_SOC_M33_NODSP",
    "m55": "TEST_SOC_M55_MVE",
    "m55-nomve": "TEST_SOC_M55_NOMVE",
    "m85": "TEST_SOC_M85",
}


@dataclass
class Configured:
    kconf: object
    refused: dict[str, tuple[str, str]]  # symbol -> (assigned, got)

    def value(self, name: str) -> str:
        return self.kconf.syms[name].str_value

    @property
    def isa(self) -> str | None:
        """The selected CORTEX_M_NN_ISA choice member, as the .pte names it."""
        choice = next(c for c in self.kconf.unique_choices if c.name == "CORTEX_M_NN_ISA")
        if choice.selection is None:
            return None
        return choice.selection.name.removeprefix("CORTEX_M_NN_ISA_").lower()


def top_kconfig(directory: Path) -> Path:
    top = directory / "Kconfig"
    top.write_text(f'source "{STUBS.as_posix()}"\nsource "{(ROOT / "Kconfig").as_posix()}"\n')
    return top


def configure(directory: Path, soc: str, **assignments: str) -> Configured:
    """The tree for ``soc`` with ``CONFIG_CORTEX_M_NN=y`` and ``assignments`` (symbol name
    without CONFIG_ -> value as written in a .conf file) applied."""
    kconf = kconfiglib.Kconfig(str(top_kconfig(directory)), warn_to_stderr=False)
    values = {SOCS[soc]: "y", "CORTEX_M_NN": "y", **assignments}
    fragment = directory / "prj.conf"
    fragment.write_text("".join(f"CONFIG_{name}={value}\n" for name, value in values.items()))
    kconf.load_config(str(fragment), replace=True)
    refused = {}
    for name, assigned in values.items():
        got = kconf.syms[name].str_value
        if got != assigned.strip('"'):
            refused[name] = (assigned, got)
    return Configured(kconf, refused)
