"""Specification of the ``vtm-solvability`` command line tool."""

from __future__ import annotations

import json
import os
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


def test_planar_refuses_a_model_moving_in_another_plane_in_one_line(capsys):
    """urdf/slider_crank.urdf moves in x-z: --planar printed rank 3, p = 5 and every pair solvable (it is p = 0)."""
    assert main([str(URDF / "slider_crank.urdf"), "--planar"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert err.startswith("vtm-solvability: error: planar: joint 'crank_joint'") and "\n" not in err, err
    assert main([str(URDF / "slider_crank.urdf")]) == 0  # spatial analysis of the same file
    assert "degree of redundancy p = 3" in capsys.readouterr().out


def test_the_sparse_method_prints_the_papers_table(capsys):
    assert main([MOBILE, "--planar", "--method", "sparse"]) == 0
    out = capsys.readouterr().out
    assert "rank(C) = 20, degree of redundancy p = 2" in out
    verdicts = _verdicts(out)
    assert {k for k, v in verdicts.items() if v == "UNSOLVABLE"} == {"B", "C", "W1", "W2", "W3", "W4"}


def test_a_large_comb_needs_max_bodies_and_then_is_analysed(tmp_path, capsys):
    from vtm_dynamics.core.reactions.mechanism_families import comb_urdf

    path = tmp_path / "comb.urdf"
    path.write_text(comb_urdf(300), encoding="utf-8")
    assert main([str(path), "--planar"]) == 2
    assert "max_bodies = 50" in capsys.readouterr().err
    assert main([str(path), "--planar", "--max-bodies", "400", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["redundancy"] == 298 and data["rank"] == 3 * 301 - 1  # k - 2; mobility 1


def test_drive_reports_the_motion_and_plots_it(tmp_path, capsys):
    png = tmp_path / "motion.png"
    assert main([MOBILE, "--planar", "--drive", "H:0.01", "--dt", "1.0", "--pairs", "B,D,W3,W5",
                 "--plot", str(png)]) == 0
    captured = capsys.readouterr()
    assert "21 samples" in captured.out and "degree of redundancy p: [2]" in captured.out
    assert "verdicts constant along the motion; unsolvable: B, C, W1, W2, W3, W4" in captured.out
    assert re.search(r"^\s+10\.000\s+Fx=\S+ Fy=-\s+Fx=\S+ Fy=\S+\s+Fy=-\s+Fy=\S+$", captured.out, flags=re.M)
    assert "analysing: 21/21" in captured.err and png.stat().st_size > 10_000


def test_along_reads_a_recorded_series(tmp_path, capsys):
    csv_path = tmp_path / "series.csv"
    q0 = "1,0,1,0,0,0,0,0,0,0"  # planar base at x = 1 m (cos, sin of yaw), joints A..H at 0: the paper's q0
    csv_path.write_text("t,q...\n0.0," + q0 + "\n0.5," + q0.replace(",0,0,0,0,0,0", ",0,0,0,0,0,0.005") + "\n",
                        encoding="utf-8")
    assert main([MOBILE, "--planar", "--along", str(csv_path), "--pairs", "D"]) == 0
    assert "2 samples" in capsys.readouterr().out


def test_a_bad_series_is_one_line(tmp_path, capsys):
    csv_path = tmp_path / "bad.csv"
    csv_path.write_text("t,q\n0.0,1,2\n", encoding="utf-8")
    assert main([MOBILE, "--planar", "--along", str(csv_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "vtm-solvability: error: --along: line 2 has 3 columns, expected 11 (t, q) or 20 (t, q, v)"  # nq 10, nv 9


def test_a_series_with_a_field_over_the_csv_limit_is_one_line(tmp_path, capsys):
    csv_path = tmp_path / "series.csv"
    csv_path.write_text("t,q\n0.0," + "1" * 200_000 + "\n", encoding="utf-8")  # csv's field limit is 131,072
    assert main([MOBILE, "--planar", "--along", str(csv_path)]) == 2  # was a traceback, status 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("vtm-solvability: error: --along: not CSV") and "\n" not in err


def test_a_series_that_is_no_regular_file_is_refused_without_reading(tmp_path, capsys):
    os.mkfifo(tmp_path / "series.csv")  # was opened for reading: blocked for ever, waiting for a writer
    assert main([MOBILE, "--planar", "--along", str(tmp_path / "series.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--along: not a regular file: series.csv" in err and "\n" not in err
