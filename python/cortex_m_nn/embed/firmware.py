"""What a built firmware image spends its flash and RAM on, and the model inside it.

Reads any ARM ELF with pyelftools. Flash is what the image stores (allocated sections with
contents: code, read-only data and the initial values of ``.data``), RAM what it occupies
while running (writable sections: ``.data``, ``.bss``, stacks, heaps), as ``size`` counts
them. Bytes are attributed to components by symbol:

* model: everything in :data:`cortex_m_nn.embed.pte_source.MODEL_SECTION`, and
  ``cortex_m_nn_model*``;
* CMSIS-NN: ``arm_*`` symbols;
* cortex_m_nn kernels: symbols in the ``cortex_m_nn`` C++ namespace or prefixed ``cortex_m_nn_``;
* ExecuTorch runtime: the ``executorch`` and ``torch`` C++ namespaces, flatbuffers, ``et_pal_*``;
* application: every other symbol (the application, RTOS, C library);
* unattributed: bytes of a section no symbol covers (padding, literal pools, tables).

It also lists the kernel cases the image links (each case's function found by its name,
``operators.yaml``), with the bytes of each case's function, and CMSIS-NN's bytes by the width
its function names give (the first ``_s8``, ``_s16``, ``_s4``; helpers without one apart).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from cortex_m_nn.embed.pte_source import DEFAULT_SYMBOL, MODEL_ALIGNMENT, MODEL_SECTION

COMPONENTS = (
    "model",
    "cortex_m_nn kernels",
    "CMSIS-NN",
    "ExecuTorch runtime",
    "application",
    "unattributed",
)

#: Itanium-mangled namespaces (``_ZN11cortex_m_nn…``) and plain prefixes, per component.
_KERNELS = re.compile(r"^_Z.*\d+cortex_m_nn|^cortex_m_nn_")
_RUNTIME = re.compile(r"^_Z.*(?:\d+executorch|5torch|11flatbuffers)|^et_pal_|^flatbuffers")
_CMSIS_NN = re.compile(r"^arm_")


def component_of(symbol: str, section: str) -> str:
    """The component a symbol (by name, and the section it is in) belongs to."""
    if section == MODEL_SECTION or symbol.startswith(DEFAULT_SYMBOL):
        return "model"
    if _KERNELS.search(symbol):
        return "cortex_m_nn kernels"
    if _CMSIS_NN.search(symbol):
        return "CMSIS-NN"
    if _RUNTIME.search(symbol):
        return "ExecuTorch runtime"
    return "application"


#: How a report attributes a symbol (name, section name) to a component.
Classify = Callable[[str, str], str]


@dataclass
class Usage:
    flash: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COMPONENTS, 0))
    ram: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COMPONENTS, 0))

    def add(self, component: str, nbytes: int, in_flash: bool, in_ram: bool) -> None:
        if in_flash:
            self.flash[component] += nbytes
        if in_ram:
            self.ram[component] += nbytes


def _is_alloc(section: Any) -> bool:
    return bool(section["sh_flags"] & SH_FLAGS.SHF_ALLOC) and section["sh_size"] > 0


def _usage(
    elf: ELFFile, classify: Classify, components: tuple[str, ...]
) -> tuple[Usage, list[dict[str, Any]]]:
    """Bytes per component in flash and RAM, and the allocated sections."""
    sections = {}
    for index, section in enumerate(elf.iter_sections()):
        if _is_alloc(section):
            sections[index] = section
    covered: dict[int, dict[str, int]] = {i: {} for i in sections}
    seen: set[tuple[int, int]] = set()
    symbols = elf.get_section_by_name(".symtab")
    if isinstance(symbols, SymbolTableSection):
        for symbol in symbols.iter_symbols():
            index = symbol["st_shndx"]
            size = symbol["st_size"]
            if not isinstance(index, int) or index not in sections or size == 0:
                continue
            if symbol["st_info"]["type"] not in ("STT_FUNC", "STT_OBJECT"):
                continue
            address = symbol["st_value"] & ~1  # Thumb bit
            if (index, address) in seen:  # aliases of one definition count once
                continue
            seen.add((index, address))
            component = classify(symbol.name, sections[index].name)
            covered[index][component] = covered[index].get(component, 0) + size
    usage = Usage(dict.fromkeys(components, 0), dict.fromkeys(components, 0))
    table = []
    for index, section in sections.items():
        in_ram = bool(section["sh_flags"] & SH_FLAGS.SHF_WRITE)
        in_flash = section["sh_type"] != "SHT_NOBITS"
        size = section["sh_size"]
        parts = covered[index]
        if section.name == MODEL_SECTION:
            parts = {"model": size}
        for component, nbytes in parts.items():
            usage.add(component, nbytes, in_flash, in_ram)
        usage.add("unattributed", max(0, size - sum(parts.values())), in_flash, in_ram)
        table.append(
            {
                "name": section.name,
                "address": section["sh_addr"],
                "size": size,
                "flash": in_flash,
                "ram": in_ram,
            }
        )
    return usage, table


#: ``cortex_m_nn::native::<identifier>`` as the Itanium ABI mangles it (the identifier's length,
#: then the identifier).
_NATIVE = re.compile(r"^_ZN11cortex_m_nn6native(\d+)")
#: A CMSIS-NN function's width: the first ``_s<N>`` of its name (``arm_convolve_s8`` → s8,
#: ``arm_svdf_state_s16_s8`` → s16, its state's; ``arm_s8_to_s16_unordered_with_offset`` → s8,
#: its input's).
_WIDTH = re.compile(r"_(s4|s8|s16|s32|s64)(?:_|$)")


def _functions(elf: ELFFile) -> dict[str, int]:
    """Every function symbol's name and size (aliases of one address once, the first name)."""
    found: dict[str, int] = {}
    seen: set[int] = set()
    symbols = elf.get_section_by_name(".symtab")
    if not isinstance(symbols, SymbolTableSection):
        return found
    for symbol in symbols.iter_symbols():
        if symbol["st_info"]["type"] != "STT_FUNC" or symbol["st_size"] == 0:
            continue
        address = symbol["st_value"] & ~1
        if address not in seen:
            seen.add(address)
            found[symbol.name] = symbol["st_size"]
    return found


def _case_functions() -> dict[str, str]:
    """Each kernel case's function name (namespace cortex_m_nn::native) → ``<op>.<case>``."""
    from cortex_m_nn.core.operators import load_yaml

    return {
        op.case_function(case): f"{op.name}.{case}"
        for op in load_yaml()[1]
        for case in op.case_names
    }


def _linked_cases(functions: dict[str, int]) -> dict[str, int]:
    """The kernel cases (``conv2d.int8``) among ``functions``, each with its function's bytes:
    the cases the image can run (a call of any other is refused at load)."""
    names = _case_functions()
    cases: dict[str, int] = {}
    for symbol, size in functions.items():
        match = _NATIVE.match(symbol)
        if match:
            identifier = symbol[match.end() : match.end() + int(match.group(1))]
            if identifier in names:
                cases[names[identifier]] = cases.get(names[identifier], 0) + size
    return dict(sorted(cases.items()))


def _cmsis_nn_widths(functions: dict[str, int]) -> dict[str, int]:
    """CMSIS-NN's function bytes by width (``other``: helpers without one)."""
    widths: dict[str, int] = {}
    for symbol, size in functions.items():
        if _CMSIS_NN.search(symbol):
            match = _WIDTH.search(symbol)
            width = match.group(1) if match else "other"
            widths[width] = widths.get(width, 0) + size
    return dict(sorted(widths.items()))


def _model(elf: ELFFile, pte: bytes | None) -> dict[str, Any] | None:
    section = elf.get_section_by_name(MODEL_SECTION)
    if section is None:
        return None
    data = section.data() if section["sh_type"] != "SHT_NOBITS" else b""
    found: dict[str, Any] = {
        "section": MODEL_SECTION,
        "address": section["sh_addr"],
        "size": section["sh_size"],
        "alignment": section["sh_addralign"],
        "aligned": section["sh_addr"] % MODEL_ALIGNMENT == 0
        and section["sh_addralign"] >= MODEL_ALIGNMENT,
        "matches_pte": None,
        "first_difference": None,
    }
    if pte is not None:
        found["matches_pte"] = data == pte
        if data != pte:
            found["first_difference"] = next(
                (i for i, (a, b) in enumerate(zip(data, pte, strict=False)) if a != b),
                min(len(data), len(pte)),
            )
    found["pte"] = _summary(data)
    return found


def _summary(data: bytes) -> dict[str, Any]:
    """The embedded .pte's own summary, or why it cannot be read."""
    from cortex_m_nn.serialize import (
        pte as programs,  # flatbuffers (and numpy): only when a model is found
    )

    try:
        return {
            "bytes": len(data),
            "operators": sorted(set(programs.pte_operators(data))),
            "metadata": programs.pte_metadata(data),
            "planned_arena_bytes": programs.planned_buffer_bytes(data),
            "constant_bytes": programs.constant_bytes(data),
            "runtime_overhead_bytes": programs.runtime_overhead(data).total,
        }
    except Exception as error:  # not a program: say so instead of failing the report
        return {"bytes": len(data), "error": f"not a readable ExecuTorch program ({error})"}


def inspect(
    path: Path,
    pte: bytes | None = None,
    *,
    classify: Classify = component_of,
    components: tuple[str, ...] = COMPONENTS,
) -> dict[str, Any]:
    """The firmware report of the ELF at ``path``; ``pte`` is the expected model, if given.
    ``classify`` and ``components`` attribute the bytes otherwise (another runtime's image,
    say); ``components`` must hold every name ``classify`` gives, "model" and "unattributed"."""
    with open(path, "rb") as stream:
        elf = ELFFile(stream)
        if elf["e_machine"] != "EM_ARM":
            raise ValueError(f"{path} is an ELF for {elf['e_machine']}, not ARM")
        usage, sections = _usage(elf, classify, components)
        model = _model(elf, pte)
        functions = _functions(elf)
    return {
        "elf": str(path),
        "flash_bytes": sum(s["size"] for s in sections if s["flash"]),
        "ram_bytes": sum(s["size"] for s in sections if s["ram"]),
        "flash": usage.flash,
        "ram": usage.ram,
        "sections": sections,
        "model": model,
        "cases": _linked_cases(functions),
        "cmsis_nn_widths": _cmsis_nn_widths(functions),
    }


def to_text(report: dict[str, Any]) -> str:
    """The firmware report as a table people read."""
    flash, ram = report["flash_bytes"], report["ram_bytes"]
    lines = [
        f"{report['elf']}: flash {flash:,} B, RAM {ram:,} B",
        "",
        f"{'component':<22} {'flash B':>11} {'':>5} {'RAM B':>11} {'':>5}",
    ]
    for component in COMPONENTS:
        f, r = report["flash"][component], report["ram"][component]
        lines.append(
            f"{component:<22} {f:>11,} {f / flash if flash else 0:>5.0%} "
            f"{r:>11,} {r / ram if ram else 0:>5.0%}"
        )
    cases, widths = report["cases"], report["cmsis_nn_widths"]
    lines += [
        "",
        "kernel cases linked (B of each case's function): "
        + (", ".join(f"{case} {size:,}" for case, size in cases.items()) or "none"),
        "CMSIS-NN by width (B): "
        + (", ".join(f"{width} {size:,}" for width, size in widths.items()) or "none"),
    ]
    model = report["model"]
    lines.append("")
    if model is None:
        lines.append(f"model: no {MODEL_SECTION} section in this image")
        return "\n".join(lines) + "\n"
    aligned = "aligned" if model["aligned"] else f"NOT aligned to {MODEL_ALIGNMENT}"
    lines.append(
        f"model: {model['section']} at 0x{model['address']:08x}, {model['size']:,} B, "
        f"alignment {model['alignment']} ({aligned})"
    )
    if model["matches_pte"] is True:
        lines.append("  bytes equal the given .pte")
    elif model["matches_pte"] is False:
        lines.append(f"  bytes DIFFER from the given .pte from byte {model['first_difference']:,}")
    summary = model["pte"]
    if "error" in summary:
        lines.append(f"  {summary['error']}")
    else:
        meta = summary["metadata"]
        order = ("core", "isa", "rounding", "ops_version", "version")
        named = {k.removeprefix("cortex_m_nn_"): v for k, v in meta.items()}
        keys = [k for k in order if k in named] + sorted(set(named) - set(order))
        target = " ".join(f"{k}={named[k]}" for k in keys)
        lines += [
            f"  target: {target or 'not recorded (not compiled by cortex-m-nn)'}",
            f"  operators: {', '.join(summary['operators'])}",
            f"  planned arena {summary['planned_arena_bytes']:,} B; constants "
            f"{summary['constant_bytes']:,} B; runtime overhead ≈ "
            f"{summary['runtime_overhead_bytes']:,} B (estimate)",
        ]
    return "\n".join(lines) + "\n"
