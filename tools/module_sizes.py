#!/usr/bin/env python3
"""The size rule of the vtm_dynamics package, as data: which modules and functions are long, and what they claim.

The rule: a module of more than ``MODULE_LINES`` lines, or a function (or method) whose body (the lines after its
signature and docstring) runs over ``FUNCTION_LINES`` lines, says why in its docstring with a reason that starts
``Size: about N lines`` — and N must be the size within ``TOLERANCE`` (10 %), so that a reason the code has outgrown
(or shrunk away from) fails instead of passing as a stale word. Any ``Size:`` reason, on a long unit or not, is held
to its number. ``python tools/module_sizes.py`` prints the table; test/test_architecture.py checks the rule.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "vtm_dynamics")
MODULE_LINES = 420
FUNCTION_LINES = 100
TOLERANCE = 0.10
CLAIM = re.compile(r"Size:\s*about\s+([0-9][0-9,]*)\s+lines\b")


@dataclass(frozen=True)
class Unit:
    """A module or function: ``kind`` ("module" / "function"), dotted ``name``, ``path`` (relative), its ``lines``,
    whether its docstring has a ``Size:`` reason and the number of lines that reason claims (None: no number)."""

    kind: str
    name: str
    path: str
    lines: int
    reason: bool
    claim: int | None

    @property
    def bar(self) -> int:
        return MODULE_LINES if self.kind == "module" else FUNCTION_LINES

    def problem(self) -> str | None:
        """Why this unit breaks the rule, or None."""
        if self.lines > self.bar and not self.reason:
            return (f"{self.kind} {self.name} ({self.path}): {self.lines} lines, over the {self.bar}-line bar without "
                    f"a 'Size: about {self.lines} lines: <why>' reason in its docstring (or split it)")
        if self.reason and self.claim is None:
            return f"{self.kind} {self.name} ({self.path}): its 'Size:' reason states no 'about N lines'"
        if self.claim is not None and abs(self.lines - self.claim) > TOLERANCE * self.claim:
            return (f"{self.kind} {self.name} ({self.path}): its reason says about {self.claim} lines, the code has "
                    f"{self.lines}: the reason no longer holds (update the number and check the reason, or split)")
        return None


def _unit(kind: str, name: str, path: str, lines: int, doc: str | None) -> Unit:
    doc = doc or ""
    match = CLAIM.search(doc)
    return Unit(kind, name, path, lines, "Size:" in doc, int(match.group(1).replace(",", "")) if match else None)


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of a function's body after its signature and docstring (a long signature or docstring is no
    reason to split)."""
    body = node.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return node.end_lineno - body[0].lineno + 1


def units(top: str = PACKAGE) -> list[Unit]:
    """Every module of the package at ``top`` and every function in it (methods and nested functions included);
    names and paths relative to the directory above ``top``."""
    base = os.path.dirname(os.path.abspath(top))
    out = []
    for dirpath, dirnames, files in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, base)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            tree = ast.parse(text, path)
            module = rel[:-3].replace(os.sep, ".")
            out.append(_unit("module", module, rel, text.count("\n"), ast.get_docstring(tree)))

            def visit(node: ast.AST, prefix: str) -> None:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        name = f"{prefix}.{child.name}"
                        out.append(_unit("function", name, rel, body_lines(child), ast.get_docstring(child)))
                        visit(child, name)
                    elif isinstance(child, ast.ClassDef):
                        visit(child, f"{prefix}.{child.name}")

            visit(tree, module)
    return out


def problems(top: str = PACKAGE) -> list[str]:
    return [p for p in (u.problem() for u in units(top)) if p]


def rule_text() -> str:
    return (f"A module over {MODULE_LINES} lines, or a function whose body (after its docstring) runs over "
            f"{FUNCTION_LINES} lines, says why in its docstring, with a reason that starts `Size: about N lines` (N within "
            f"{TOLERANCE:.0%} of the code's; `tools/module_sizes.py`, checked by `test/test_architecture.py`). "
            "The units with such a reason:")


def table(top: str = PACKAGE) -> str:
    rows = [u for u in units(top) if u.reason]
    lines = ["| unit | its reason claims |", "|---|---|"]
    lines += [f"| {u.kind} `{u.name.removeprefix('vtm_dynamics.')}` | "
              f"{'no number' if u.claim is None else f'about {u.claim} lines'} |" for u in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
    for p in problems():
        print(p, file=sys.stderr)
    sys.exit(1 if problems() else 0)
