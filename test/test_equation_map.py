"""docs/equations.md lists every equation number a docstring cites (tools/equation_map.py keeps it true)."""

from __future__ import annotations

import importlib.util
import os

from test.ros_helpers import REPO_ROOT

_spec = importlib.util.spec_from_file_location("equation_map", os.path.join(REPO_ROOT, "tools", "equation_map.py"))
equation_map = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(equation_map)


def test_every_cited_equation_is_in_docs_equations_md():
    with open(os.path.join(REPO_ROOT, "docs", "equations.md"), encoding="utf-8") as fh:
        listed = equation_map.listed(fh.read())
    missing = sorted(set(equation_map.citations()) - listed)
    assert not missing, f"cited in docstrings but not in docs/equations.md (run python tools/equation_map.py): {missing}"


def test_citation_forms_are_read_as_the_papers_write_them():
    assert equation_map.equations_in("eq. (22)") == ["22"]
    assert equation_map.equations_in("eqs. (22)/(24), (32)") == ["22", "24", "32"]
    assert equation_map.equations_in("Aghili, eqs. (55)-(58)") == ["55", "56", "57", "58"]
    assert equation_map.equations_in("eqs. 12-14 and 16") == ["12", "13", "14", "16"]
    assert equation_map.equations_in("Sec. 6, Fig. 4") == []


def test_a_new_citation_missing_from_the_table_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(equation_map, "OUTPUT", str(tmp_path / "equations.md"))
    (tmp_path / "equations.md").write_text("| paper | eq. | implemented in | tested in |\n", encoding="utf-8")
    assert equation_map.main(["--check"]) == 1
