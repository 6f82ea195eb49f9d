"""What the command lines share: one-line usage errors, defaults in ``--help``, robot names in any case.

Every tool's parser is a :class:`Parser`: a usage error (unknown option, a value that is not a number, a missing
argument) prints one line ``<prog>: error: <what> (see <prog> --help)`` and exits with status 2, as the tools' own
input errors do; ``--help`` shows each option's default. :func:`robot_name` is the ``type`` of a robot-name argument:
``UR5`` is ``ur5``, and an unknown name is refused with the closest known ones.

This module imports only the standard library, so that ``--help`` and usage errors answer at once (the tools import
numpy, Pinocchio and matplotlib inside the functions that need them).
"""

from __future__ import annotations

import argparse
import difflib
import functools
import os
import sys
from typing import Callable, Iterable, Sequence


class HelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to an option's help where it has a default worth showing and its help does not
    already state one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (default is None or default is False or default is argparse.SUPPRESS or (isinstance(default, list)
                                                                                    and not default)
                or "default" in text.lower()
                or "%(default)" in text or (not action.option_strings and action.nargs not in ("?", "*"))):
            return text
        shown = " ".join(str(x) for x in default) if isinstance(default, (list, tuple)) else "%(default)s"
        return f"{text} (default: {shown})"


class RawDescriptionHelpFormatter(HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """:class:`HelpFormatter` that keeps the description's line breaks (a description with a list or a table)."""


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with one-line usage errors (status 2) and defaults shown in ``--help``."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def add_subparsers(self, **kwargs):  # subcommands answer usage errors the same way
        kwargs.setdefault("parser_class", Parser)
        return super().add_subparsers(**kwargs)

    def error(self, message: str):  # type: ignore[override]
        text = " ".join(str(message).split())
        self.exit(2, f"{self.prog}: error: {text} (see {self.prog} --help)\n")


def robot_name(known: Iterable[str]) -> Callable[[str], str]:
    """An argparse ``type`` for robot names: case-insensitive; an unknown name is refused naming the closest."""
    names = tuple(known)

    def convert(text: str) -> str:
        name = text.strip().lower()
        if name in names:
            return name
        close = difflib.get_close_matches(name, names, n=2, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise argparse.ArgumentTypeError(f"unknown robot {text[:40]!r} (known: {', '.join(names)}{hint})")

    convert.__name__ = "robot name"  # argparse names the type in its messages
    return convert


def add_torque_limits_option(parser: argparse.ArgumentParser) -> None:
    """``--torque-limits`` of every tool that predicts category-1 stops, the same words everywhere (read by
    ``vtm_dynamics.core.estop.inputs.torque_limits_from_text``, which also holds the check and the default)."""
    from vtm_dynamics.core.estop.defaults import CATEGORY1_LONGEST_RAMP  # constants only: no numpy

    parser.add_argument("--torque-limits", nargs="+", metavar="LIMIT",
                        help="category 1: the drives' torque limits [N m; N for prismatic joints], one per joint "
                             "(0: none on that joint), or 'urdf' for the model's effort limits: the ramp is "
                             f"lengthened until its torques fit, to at most {CATEGORY1_LONGEST_RAMP:g} s, else "
                             "refused (default: none, the drives deliver --decel whatever it takes)")


def parse_or_exit_status(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace | int:
    """The parsed command line, or the exit status argparse chose after printing its one line or the help (2 for a
    usage error, 0 for ``--help``): what a command's ``main`` returns instead of letting SystemExit through."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


#: exit status of a command whose standard output was closed by its reader (``vtm-predict ur5 | head -3``)
EXIT_OUTPUT_CLOSED = 1


def quiet_when_output_closed(main: Callable[..., int]) -> Callable[..., int]:
    """``main`` that ends quietly with :data:`EXIT_OUTPUT_CLOSED` when its standard output is a pipe its reader
    closed (``| head``): without this, Python prints a BrokenPipeError trace, from the print that met it or from the
    flush at exit. Standard output is flushed before ``main`` returns, so that the error is met here."""

    @functools.wraps(main)
    def run(*args, **kwargs) -> int:
        try:
            try:
                code = main(*args, **kwargs)
            except SystemExit as exc:  # a command that exits from inside: its status, after the flush below
                code = exc.code
            sys.stdout.flush()
        except BrokenPipeError:
            try:  # nothing more reaches the closed pipe, not even the interpreter's flush at exit
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            except (OSError, ValueError, AttributeError):
                pass
            return EXIT_OUTPUT_CLOSED
        return code

    return run
