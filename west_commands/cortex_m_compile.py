"""``west cortex-m-compile``: the ``cortex-m-compile`` console script as a west command.

Options and behaviour come from :mod:`cortex_m_nn.cli.main`, so the two cannot drift apart:
``west cortex-m-compile inspect app.elf [--pte …]`` runs ``cortex-m-compile inspect`` and
``west cortex-m-compile embed model.pte --output-dir DIR`` runs ``cortex-m-compile embed``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from west.commands import CommandError, WestCommand

try:
    from cortex_m_nn.cli import main as cli
except ModuleNotFoundError as error:  # not pip-installed: use this checkout's package
    if error.name != "cortex_m_nn":
        raise
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    from cortex_m_nn.cli import main as cli


class CortexMCompile(WestCommand):
    def __init__(self) -> None:
        super().__init__(
            "cortex-m-compile",
            "compile a PyTorch model into an ExecuTorch .pte that runs CMSIS-NN operators",
            cli.DESCRIPTION + " Same options as the cortex-m-compile console script.",
            accepts_unknown_args=True,  # for `inspect`/`embed …`; anything else is refused below
        )

    def do_add_parser(self, parser_adder) -> argparse.ArgumentParser:
        parser = parser_adder.add_parser(
            self.name,
            help=self.help,
            description=self.description,
        )
        return cli.add_arguments(parser)

    def _subcommand_arguments(self, subcommand: str, unknown_args: list[str]) -> list[str]:
        """What follows ``west cortex-m-compile SUBCOMMAND`` on the command line.

        The compile options were parsed first, so a subcommand option of the same name
        (``embed --board``, ``-q``) would have been taken by them: use the raw arguments.
        """
        argv = sys.argv
        for index in range(len(argv) - 1):
            if argv[index] == self.name and argv[index + 1] == subcommand:
                return argv[index + 2 :]
        return unknown_args

    def do_run(self, args: argparse.Namespace, unknown_args: list[str]) -> None:
        if args.model in cli.SUBCOMMANDS:
            status = cli.SUBCOMMANDS[args.model](
                self._subcommand_arguments(args.model, unknown_args)
            )
        elif unknown_args:
            self.parser.error(f"unrecognized arguments: {' '.join(unknown_args)}")
        else:
            status = cli.run(args)
        if status:
            # cli.run has already printed its error; west exits with this status.
            raise CommandError(returncode=status)
