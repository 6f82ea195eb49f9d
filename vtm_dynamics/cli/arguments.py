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


def parse_or_exit_status(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace | int:
    """The parsed command line, or the exit status argparse chose after printing its one line or the help (2 for a
    usage error, 0 for ``--help``): what a command's ``main`` returns instead of letting SystemExit through."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
