#!/usr/bin/env python3
"""The map from the papers' equation numbers to the code: which function's docstring cites which equation, and
which tests exercise that function. Writes ``docs/equations.md``; ``--check`` exits 1 (listing them) when a
docstring cites an equation the file does not list, which ``test/test_equation_map.py`` runs.

A citation is ``eq. (N)`` / ``eqs. (N)/(M)``, ``(N)-(M)``, ``(N), (M)`` in a module, class or function docstring
under ``vtm_dynamics/``. Its paper is the one the docstring names (Müller, Aghili, Wojtyra, Huang), else the one its
module docstring names first, else the one its subpackage's ``__init__`` docstring names first.

Run: ``python tools/equation_map.py`` (write) or ``python tools/equation_map.py --check``.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "vtm_dynamics")
TESTS = os.path.join(ROOT, "test")
OUTPUT = os.path.join(ROOT, "docs", "equations.md")

PAPERS = {
    "Müller": "Müller, Forward Dynamics of Variable Topology Mechanisms - The Case of Constraint Activation",
    "Aghili": "Aghili, Control and Simulation of Motion of Constrained Multibody Systems Based on Projection Matrix "
              "Formulation",
    "Wojtyra": "Wojtyra and Frączek, Solvability of reactions in rigid multibody systems with redundant nonholonomic "
               "constraints",
    "Huang": "Huang et al., A Constrained Multibody System Dynamics Avoiding Kinematic Singularities",
}
_AUTHOR = re.compile(r"\b(" + "|".join(PAPERS) + r")\b")
_NUMBER = r"\(?\d+[a-z]?\)?"
_CITATION = re.compile(r"\b[Ee]qs?\.\s*(" + _NUMBER + r"(?:\s*(?:[-–/,]|and)\s*" + _NUMBER + r")*)")


def equations_in(text: str) -> list[str]:
    """Equation numbers cited in ``text`` ('22', '24', ...); a range (45)-(46) lists every number in it."""
    out: list[str] = []
    for m in _CITATION.finditer(text):
        body = m.group(1)
        tokens = re.findall(r"\d+[a-z]?|[-–]", body)
        k = 0
        while k < len(tokens):
            tok = tokens[k]
            if tok in "-–":
                k += 1
                continue
            if k + 2 < len(tokens) and tokens[k + 1] in "-–" and tokens[k].isdigit() and tokens[k + 2].isdigit():
                lo, hi = int(tokens[k]), int(tokens[k + 2])
                if 0 < hi - lo <= 20:
                    out.extend(str(n) for n in range(lo, hi + 1))
                    k += 3
                    continue
            out.append(tok)
            k += 1
    return out


def first_author(text: str | None) -> str | None:
    m = _AUTHOR.search(text or "")
    return m.group(1) if m else None


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def citations() -> dict[tuple[str, str], set[str]]:
    """{(paper, equation): {'module:qualname', ...}} over the package's docstrings."""
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    package_authors: dict[str, str | None] = {}
    for dirpath, _, files in sorted(os.walk(PACKAGE)):
        init = os.path.join(dirpath, "__init__.py")
        if os.path.isfile(init):
            with open(init, encoding="utf-8") as fh:
                package_authors[dirpath] = first_author(ast.get_docstring(ast.parse(fh.read())))
    for dirpath, _, files in sorted(os.walk(PACKAGE)):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
            module = _module_name(path)
            module_doc = ast.get_docstring(tree)
            default = first_author(module_doc) or package_authors.get(dirpath)

            def visit(node: ast.AST, qualname: str) -> None:
                doc = ast.get_docstring(node) if isinstance(
                    node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else None
                if doc:
                    author = first_author(doc) or default
                    for eq in equations_in(doc):
                        if author:
                            found[(author, eq)].add(f"{module}:{qualname}" if qualname else module)
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                        visit(child, f"{qualname}.{child.name}" if qualname else child.name)

            visit(tree, "")
    return found


def tests_of(where: str, test_sources: dict[str, str]) -> list[str]:
    """Test files that import the module of ``where`` ('module' or 'module:qualname') and, for a public function
    or class, name it (a private one counts as its module)."""
    module, _, qualname = where.partition(":")
    parent, _, last = module.rpartition(".")
    imports = re.compile(rf"\b{re.escape(module)}\b|from {re.escape(parent)} import [^\n]*\b{re.escape(last)}\b")
    public = [part for part in qualname.split(".") if part and not part.startswith("_")]
    name = re.compile(rf"\b{re.escape(public[-1])}\b") if public and len(public) == len(qualname.split(".")) else None
    return sorted(path for path, text in test_sources.items()
                  if imports.search(text) and (name is None or name.search(text)))


def _sort_key(item: tuple[tuple[str, str], set[str]]) -> tuple:
    (paper, eq), _ = item
    m = re.match(r"(\d+)([a-z]?)", eq)
    return (list(PAPERS).index(paper), int(m.group(1)) if m else 0, m.group(2) if m else eq)


def render(found: dict[tuple[str, str], set[str]]) -> str:
    test_sources = {}
    for dirpath, _, files in os.walk(TESTS):
        for name in files:  # test modules and their helpers
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as fh:
                    test_sources[os.path.relpath(path, ROOT)] = fh.read()
    lines = [
        "# Equations of the papers and where the code implements them",
        "",
        "Generated by `python tools/equation_map.py` from the docstrings: every equation number a docstring cites,",
        "the functions (module:qualified name) whose docstring cites it, and the test files that exercise those",
        "functions. `test/test_equation_map.py` fails when a docstring cites an equation this table does not list:",
        "re-run the tool after adding a citation. Equation numbers refer to the papers in the project's seeds:",
        "",
    ]
    lines += [f"- **{key}**: {title}" for key, title in PAPERS.items()]
    lines += ["", "| paper | eq. | implemented in | tested in |", "|---|---|---|---|"]
    for (paper, eq), where in sorted(found.items(), key=_sort_key):
        funcs = sorted(where)
        tests = sorted({t for f in funcs for t in tests_of(f, test_sources)})
        lines.append(f"| {paper} | ({eq}) | {'<br>'.join(f'`{f}`' for f in funcs)} | "
                     f"{'<br>'.join(f'`{t}`' for t in tests) or '-'} |")
    return "\n".join(lines) + "\n"


def listed(text: str) -> set[tuple[str, str]]:
    return {(m.group(1), m.group(2)) for m in re.finditer(r"^\| (\w+) \| \((\w+)\) \|", text, re.M)}


def main(argv: list[str]) -> int:
    found = citations()
    if "--check" in argv:
        try:
            with open(OUTPUT, encoding="utf-8") as fh:
                have = listed(fh.read())
        except OSError:
            have = set()
        missing = sorted(set(found) - have, key=lambda k: _sort_key((k, set())))
        for paper, eq in missing:
            print(f"equation_map: {paper} eq. ({eq}) cited by {', '.join(sorted(found[(paper, eq)]))} is not in "
                  f"docs/equations.md (run python tools/equation_map.py)")
        return 1 if missing else 0
    with open(OUTPUT, "w", encoding="utf-8") as fh:
        fh.write(render(found))
    print(f"equation_map: wrote {os.path.relpath(OUTPUT, ROOT)} ({len(found)} equations)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
