"""Specification of the ``vtm-solvability`` command line tool."""

from __future__ import annotations

import json
import re
from pathlib import Path

from vtm_dynamics.cli.solvability import main

URDF = Path(__file__).resolve().parents[2] / "urdf"
MOBILE = str(URDF / "mobile_robot_knife_edges.urdf")


def _verdicts(table: str) -> dict[str, str]:
    rows = re.findall(r"^(\S+)\s+\S+\s+\d+\s+(solvable|UNSOLVABLE)\s", table, flags=re.M)
    return dict(rows)


def test_table_for_the_papers_mobile_robot(capsys):
    assert main([MOBILE, "--planar"]) == 0
    out = capsys.readouterr().out
    assert "rank(C) = 20, degree of redundancy p = 2" in out
    assert "m = 17 holonomic (rank 17), h = 5 nonholonomic (rank 4)" in out
    verdicts = _verdicts(out)
    assert {k for k, v in verdicts.items() if v == "UNSOLVABLE"} == {"B", "C", "W1", "W2", "W3", "W4"}
    assert {k for k, v in verdicts.items() if v == "solvable"} == {"A", "D", "E", "F", "G", "H", "drive_H", "W5"}
    assert re.search(r"^B\s.*UNSOLVABLE.*\bFx$", out, flags=re.M)  # the unique direction of pin B


def test_json_output_is_the_report(capsys):
    assert main([str(URDF / "parallelogram_4bar.urdf"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["redundancy"] == 3 and data["rank"] == 18
    assert {p["name"]: p["solvable"] for p in data["pairs"]} == {
        "O1": False, "A1": False, "O2": False, "A2": False, "drive_O1": True}
    assert data["rank_tolerance"] == data["rank_rtol"] * data["sigma_max"]


def test_configuration_option(capsys):
    model = str(URDF / "planar_3rrr.urdf")
    assert main([model, "--planar", "--q", *(["0.02"] * 7)]) == 0
    assert "degree of redundancy p = 0" in capsys.readouterr().out


def test_bad_input_exits_with_code_2_and_one_line(capsys, tmp_path):
    cases = [
        [str(tmp_path / "missing.urdf")],
        [str(URDF / "planar_3rrr.urdf"), "--q", "1", "2"],
        [str(URDF / "parallelogram_4bar.urdf"), "--rtol", "2"],
    ]
    bad = tmp_path / "dangling.urdf"
    bad.write_text(Path(MOBILE).read_text().replace(
        "</robot>", '<loop_closure name="X" type="revolute"><parent link="platform"/><child link="ghost"/>'
                    "</loop_closure></robot>"))
    cases.append([str(bad)])
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("vtm-solvability: error:") and "\n" not in err, err
    assert main([]) == 2  # argparse usage error
