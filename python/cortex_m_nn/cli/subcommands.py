"""``cortex-m-compile inspect`` (the firmware report), ``cortex-m-compile embed`` (what a
firmware build needs to embed a ``.pte``) and ``cortex-m-compile pack`` (the CMSIS-Pack)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortex_m_nn.cli.command import add_debug_argument, guarded
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.outputs import write_all


def add_inspect_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``cortex-m-compile inspect``."""
    parser.add_argument("elf", type=Path, metavar="ELF", help="the built firmware image")
    parser.add_argument(
        "--pte",
        type=Path,
        help="the .pte the image should embed: its bytes must equal the model section's",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON")
    add_debug_argument(parser)
    return parser


def inspect_from_args(args: argparse.Namespace) -> int:
    import json

    from cortex_m_nn.embed import firmware
    from cortex_m_nn.embed.pte_source import MODEL_ALIGNMENT, MODEL_SECTION

    if not args.elf.is_file():
        raise CompileError(f"{args.elf} does not exist")
    pte = None
    if args.pte is not None:
        if not args.pte.is_file():
            raise CompileError(f"{args.pte} does not exist")
        pte = args.pte.read_bytes()
    try:
        document = firmware.inspect(args.elf, pte)
    except Exception as error:  # pyelftools raises several types for a file that is no ELF
        raise CompileError(f"cannot read {args.elf} as an ARM ELF: {error}") from error
    print(firmware.to_text(document), end="")
    if args.json is not None:
        write_all({args.json: (json.dumps(document, indent=2) + "\n").encode()})
    model = document["model"]
    if model is None:
        if pte is not None:
            raise CompileError(
                f"{args.elf} has no {MODEL_SECTION} section; embed the model with "
                "cortex_m_nn.embed.pte_source.c_source"
            )
        return 0
    if not model["aligned"]:
        raise CompileError(
            f"{MODEL_SECTION} is at 0x{model['address']:x} with alignment {model['alignment']}; "
            f"it must be aligned to {MODEL_ALIGNMENT} (keep the section's alignment in the "
            "linker script)"
        )
    if model["matches_pte"] is False:
        raise CompileError(
            f"{MODEL_SECTION} ({model['size']:,} B) differs from {args.pte} ({len(pte):,} B) "
            f"from byte {model['first_difference']:,}; rebuild the firmware with this .pte"
        )
    return 0


def _add_fit_arguments(parser: argparse.ArgumentParser) -> None:
    """``embed``'s options of the fit check."""
    parser.add_argument(
        "--board", metavar="NAME", help="check the model fits this board (as for compiling)"
    )
    parser.add_argument(
        "--flash", metavar="SIZE", help="size of the memory that holds the model (.pte)"
    )
    parser.add_argument("--ram", metavar="SIZE", help="size of the memory that holds the arena")
    parser.add_argument(
        "--flash-region",
        metavar="NAME",
        default="--flash",
        help="name of the --flash memory in messages (e.g. ITCM, DDR4)",
    )
    parser.add_argument(
        "--ram-region",
        metavar="NAME",
        default="--ram",
        help="name of the --ram memory in messages (e.g. DTCM, ISRAM)",
    )
    parser.add_argument(
        "--model-alone",
        action="store_true",
        help="the model has its memory to itself: do not count the runtime's code there",
    )
    parser.add_argument(
        "--arena-alone",
        action="store_true",
        help="the arena has its memory to itself: do not count the runtime's RAM there",
    )


def add_embed_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``cortex-m-compile embed``."""
    parser.add_argument("pte", type=Path, metavar="PTE", help="the compiled program")
    parser.add_argument(
        "--output-dir",
        type=Path,
        metavar="DIR",
        help="where to write cortex_m_nn_model.c, cortex_m_nn_model.h, cortex_m_nn_model.cmake",
    )
    parser.add_argument(
        "--image",
        type=Path,
        metavar="FILE",
        help="write the program image firmware loads at run time (a flash partition's "
        "contents: docs/program-image.md)",
    )
    parser.add_argument(
        "--partition-size",
        metavar="SIZE",
        help="with --image: refuse an image larger than the flash partition it is written into",
    )
    _add_fit_arguments(parser)
    parser.add_argument(
        "--registration",
        action="store_true",
        help="with --output-dir: also write cortex_m_nn_register.cpp, the registration of the "
        "kernel cases the program calls (for builds that do not generate it: the CMSIS-Pack)",
    )
    parser.add_argument(
        "--method-margin",
        type=int,
        metavar="PERCENT",
        default=25,
        help="method allocator = runtime-overhead estimate plus this many percent (default 25)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    add_debug_argument(parser)
    return parser


def _image(args: argparse.Namespace, pte: bytes, facts: object) -> bytes | None:
    """``--image``'s bytes (None without it), checked against ``--partition-size``."""
    if args.image is None:
        if args.partition_size is not None:
            raise CompileError("--partition-size checks a program image: give --image FILE too")
        return None
    from cortex_m_nn.embed.program_image import image_bytes, require_fits
    from cortex_m_nn.plan.boards import parse_size

    image = image_bytes(pte, facts)  # type: ignore[arg-type]
    if args.partition_size is not None:
        require_fits(image, parse_size(args.partition_size), "the program image")
    return image


def _print_embedding(args: argparse.Namespace, facts: Any, report: Any, written: list) -> None:
    """What ``embed`` found and wrote."""
    from cortex_m_nn.plan.boards import format_size

    print(
        f"{args.pte}: {facts.pte_bytes:,} B, {facts.core}+{facts.isa}, rounding "
        f"{facts.rounding}; arena {facts.arena_bytes:,} B "
        f"({len(facts.planned_buffers)} planned buffer(s), largest scratch "
        f"{max(facts.scratch_buffers, default=0):,} B); method allocator "
        f"{facts.method_allocator_bytes:,} B"
    )
    print(f"kernels: {', '.join(facts.kernels) or 'none'}")
    if args.registration:
        prims = f" and ExecuTorch's primitive operators ({', '.join(facts.prim_operators)})"
        print(
            f"registration: {len(facts.kernels)} kernels (MAX_KERNEL_NUM={len(facts.kernels)}"
            + (f", plus the count the pack gives for{prims})" if facts.prim_operators else ")")
        )
    if facts.fallback_operators:
        print(f"portable (fallback) operators: {', '.join(facts.fallback_operators)}")
    if report is not None:
        for role in ("flash", "ram"):
            found = report[role]
            if found is not None:
                print(
                    f"fits {found['region']}: {found['needed_bytes']:,} B needed "
                    f"({found['share']:.0%} of {format_size(found['size_bytes'])})"
                )
    for path in written:
        print(f"wrote {path}")


def embed_from_args(args: argparse.Namespace) -> int:
    from cortex_m_nn.embed import pte_source as embed
    from cortex_m_nn.plan import fit

    if not args.pte.is_file():
        raise CompileError(f"{args.pte} does not exist")
    if args.output_dir is None and args.image is None:
        raise CompileError("embed writes --output-dir DIR, --image FILE or both: give one")
    pte = args.pte.read_bytes()
    budget = fit.budget(args.board, args.flash, args.ram, args.flash_region, args.ram_region)
    facts = embed.model_facts(pte, args.method_margin)
    report = None
    if budget is not None:
        report = fit.check(
            budget,
            facts.pte_bytes,
            len(facts.operators),
            facts.arena_bytes,
            facts.method_allocator_bytes,
            code_with_model=not args.model_alone,
            runtime_with_arena=not args.arena_alone,
        )
        fit.require_fit(report)
    image = _image(args, pte, facts)  # refuses before anything is written
    if args.registration and args.output_dir is None:
        raise CompileError("--registration writes into --output-dir DIR: give one")
    written = [] if args.output_dir is None else embed.write_embedding(pte, args.output_dir, facts)
    if args.registration:
        from cortex_m_nn.embed.kernel_codegen import SOURCE_NAME, generate

        generate(args.output_dir, set(facts.cases), prim_operators=tuple(facts.prim_operators))
        written.append(args.output_dir / SOURCE_NAME)
    if args.image is not None and image is not None:
        args.image.parent.mkdir(parents=True, exist_ok=True)
        args.image.write_bytes(image)
        written.append(args.image)
    if not args.quiet:
        _print_embedding(args, facts, report, written)
    return 0


def add_pack_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``cortex-m-compile pack``."""
    parser.add_argument(
        "--output-dir", type=Path, metavar="DIR", required=True, help="where to write the pack"
    )
    parser.add_argument(
        "--executorch-root",
        metavar="DIR",
        default=os.environ.get("EXECUTORCH_ROOT"),
        help="the ExecuTorch checkout whose runtime the pack carries (default: $EXECUTORCH_ROOT)",
    )
    parser.add_argument(
        "--flatbuffers-include",
        metavar="DIR",
        default=os.environ.get("FLATBUFFERS_INCLUDE_DIR"),
        help="flatbuffers' headers, the flatc's version (default: $FLATBUFFERS_INCLUDE_DIR, "
        "else ExecuTorch's third-party/flatbuffers)",
    )
    parser.add_argument(
        "--flatc", metavar="FILE", help="default: the executorch wheel's, else flatc on PATH"
    )
    parser.add_argument(
        "--tree",
        metavar="DIR",
        help="the cortex-m-nn tree (a checkout or an installed CMake package's "
        "share/cortex_m_nn; default: the one this command runs from)",
    )
    parser.add_argument("--url", default="", help="where the pack will be published (<url>)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    add_debug_argument(parser)
    return parser


def pack_from_args(args: argparse.Namespace) -> int:
    from cortex_m_nn.embed import cmsis_pack

    if not args.executorch_root:
        raise CompileError("the pack carries ExecuTorch's runtime: set --executorch-root DIR")
    executorch = Path(args.executorch_root)
    include = args.flatbuffers_include or executorch / "third-party" / "flatbuffers" / "include"
    try:
        inputs = cmsis_pack.Inputs(
            Path(args.tree) if args.tree else cmsis_pack.tree_root(),
            executorch,
            cmsis_pack.find_flatc(args.flatc),
            Path(include),
        )
        archive = cmsis_pack.build(inputs, args.output_dir, args.url)
    except cmsis_pack.PackError as error:
        raise CompileError(str(error)) from None
    if not args.quiet:
        print(f"wrote {archive} and {archive.with_suffix('')}")
    return 0


@dataclass(frozen=True)
class Subcommand:
    """``cortex-m-compile NAME …``: its ``--help`` description, options and what it runs."""

    name: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], argparse.ArgumentParser]
    run: Callable[[argparse.Namespace], int]

    def __call__(self, argv: list[str]) -> int:
        """Run it on ``argv`` (what follows its name); returns the process exit status."""
        prog = f"cortex-m-compile {self.name}"
        parser = argparse.ArgumentParser(prog=prog, description=self.description)
        args = self.add_arguments(parser).parse_args(argv)
        return guarded(prog, self.run, args, self.name)


#: Subcommands: the first argument selects them (a model file of that name is ./NAME).
SUBCOMMANDS = {
    subcommand.name: subcommand
    for subcommand in (
        Subcommand(
            "inspect",
            "Report what a built firmware image (an ARM ELF) spends its flash and RAM on, by "
            "component, and check the model embedded in it.",
            add_inspect_arguments,
            inspect_from_args,
        ),
        Subcommand(
            "embed",
            "Write what a firmware build needs to embed a compiled .pte: a C source holding it "
            "(16-byte aligned, in section .cortex_m_nn_model), a header with the memory to "
            "reserve for it (planned arena, scratch, method allocator) and what it was compiled "
            "for, and a CMake file listing the operators to register; optionally check it fits "
            "the memories.",
            add_embed_arguments,
            embed_from_args,
        ),
        Subcommand(
            "pack",
            "Write the CMSIS-Pack (CortexMNN.cortex-m-nn.<version>.pack): the firmware API, one "
            "component per kernel, and ExecuTorch's runtime core from --executorch-root, for "
            "CMSIS-Toolbox and Keil projects (docs/cmsis-pack.md).",
            add_pack_arguments,
            pack_from_args,
        ),
    )
}
