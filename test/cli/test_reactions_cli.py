"""Specification of the ``vtm-reactions`` command line tool."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest

from vtm_dynamics.cli.reactions import main

URDF = Path(__file__).resolve().parents[2] / "urdf"
PENDULUM = str(URDF / "huang_double_pendulum.urdf")
STEWART = str(URDF / "huang_stewart_platform.urdf")
PARALLELOGRAM = str(URDF / "parallelogram_4bar.urdf")
PLANE = ["--gravity", "0", "-9.81", "0", "--planar"]


def test_side_by_side_table_series_and_plots(tmp_path, capsys):
    out_csv, out_json, plots = tmp_path / "r.csv", tmp_path / "r.json", tmp_path / "plots"
    code = main([PENDULUM, *PLANE, "--dt", "2e-3", "--duration", "0.2", "--formulation", "taylor",
                 "--formulation", "kkt", "--csv", str(out_csv), "--json", str(out_json), "--plots", str(plots)])
    assert code == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith(("taylor ", "kkt "))]
    peaks = {(r[0], r[1]): float(r[2]) for r in rows if len(r) > 3 and r[1] in ("joint1", "joint2")}
    assert set(peaks) == {("taylor", "joint1"), ("taylor", "joint2"), ("kkt", "joint1"), ("kkt", "joint2")}
    # released horizontally from rest: the peak reaction is at the start or grows; both formulations agree
    for j in ("joint1", "joint2"):
        assert abs(peaks[("taylor", j)] - peaks[("kkt", j)]) < 0.03 * peaks[("kkt", j)]
    with open(out_csv) as fh:
        table = list(csv.DictReader(fh))
    assert {r["formulation"] for r in table} == {"taylor", "kkt"}
    assert {"joint1.Fx", "joint1.Fy", "joint2.Fx", "joint2.Fy", "energy", "gap_position"} <= set(table[0])
    data = json.loads(out_json.read_text())
    assert [r["formulation"] for r in data["runs"]] == ["taylor", "kkt"]
    assert data["runs"][0]["reactions"]["joint1"]["labels"] == ["Fx", "Fy"]
    assert sorted(p.name for p in plots.iterdir()) == ["constraint_gap.png", "energy.png", "reactions.png"]


def test_scripted_torques_and_motor_table(tmp_path, capsys):
    script = tmp_path / "torques.csv"
    script.write_text("time,J7,J8,J9\n0,10,10,10\n0.01,0,0,0\n")
    assert main([STEWART, "--dt", "2e-3", "--duration", "0.02", "--torque-script", str(script),
                 "--formulation", "taylor-heun"]) == 0
    out = capsys.readouterr().out
    assert all(f"taylor-heun       {name}" in out for name in ("J1", "J4", "J7"))


def test_redundant_model_flags_not_unique(capsys):
    assert main([PARALLELOGRAM, "--ignore-drives", "--dt", "2e-3", "--duration", "0.01", "--q", "0.3", "-0.3",
                 "0.3", "--v", "1", "-1", "1", "--formulation", "taylor", "--formulation", "kkt"]) == 0
    out = capsys.readouterr().out
    assert "NO: only Fx, Fy unique" in out
    assert "singular steps" in out


def test_non_unique_components_are_empty_in_every_formulation_and_peaks_use_the_unique_ones(tmp_path, capsys):
    """Spatial parallelogram (p = 3): Fz, Mx, My of the pivots are not unique. docs/reactions.md promises them
    empty, never picked: the Taylor run filled them with its minimum-norm values, and one empty component made
    every kkt peak "-" (NaN norm)."""
    out_csv = tmp_path / "r.csv"
    assert main([PARALLELOGRAM, "--ignore-drives", "--dt", "2e-3", "--duration", "0.01", "--q", "0.3", "-0.3",
                 "0.3", "--v", "1", "-1", "1", "--formulation", "kkt", "--formulation", "taylor",
                 "--csv", str(out_csv)]) == 0
    out = capsys.readouterr().out
    with open(out_csv) as fh:
        table = list(csv.DictReader(fh))
    for form in ("kkt", "taylor"):
        rows = [r for r in table if r["formulation"] == form]
        assert rows and all(r["O1.Fz"] == "" and r["O1.Mx"] == "" and r["O1.My"] == "" for r in rows), form
        assert all(r["O1.Fx"] != "" and r["O1.Fy"] != "" for r in rows), form
        peaks = {r[1]: r[2] for r in (line.split() for line in out.splitlines()) if len(r) > 2 and r[0] == form}
        assert set(peaks) == {"O1", "A1", "O2", "A2"} and all(float(v) > 0 for v in peaks.values()), (form, peaks)
    assert "over their unique components only" in out


def test_the_default_run_is_the_guides_choice_for_sizing(capsys):
    assert main([PENDULUM, *PLANE, "--dt", "2e-3", "--duration", "0.02"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("formulation taylor-heun, reactions of the sampled state")
    assert "taylor-heun/state joint1" in out


@pytest.mark.parametrize("args, field", [
    (["--dt", "0"], "dt"),
    (["--torque", "J7"], "--torque"),
    (["--torque", "nope=1"], "torques"),
    (["--q", "1", "2"], "--q"),
    (["--samples", "0"], "--samples"),
    (["--torque-script", "/nonexistent/file.csv"], "--torque-script"),
])
def test_bad_input_is_one_line_naming_the_field(args, field, capsys):
    assert main([STEWART, "--duration", "0.002", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vtm-reactions: error:") and field in err and "\n" not in err


def test_drives_need_an_explicit_choice_for_the_joint_coordinate_run(capsys):
    assert main([PARALLELOGRAM, "--duration", "0.002", "--formulation", "kkt"]) == 2
    assert "--ignore-drives" in capsys.readouterr().err


def test_taylor_keeps_a_drive_at_constant_rate(capsys):
    assert main([PARALLELOGRAM, "--planar", "--dt", "1e-3", "--duration", "0.05", "--q", "0.3", "-0.3", "0.3",
                 "--v", "1", "-1", "1", "--json", "/dev/null"]) == 0
    out = capsys.readouterr().out
    assert "drive_O1" in out and np.isfinite(float(out.split("max constraint gap ")[1].split()[0]))


def test_a_torque_script_with_a_field_over_the_csv_limit_is_one_line(tmp_path, capsys):
    script = tmp_path / "script.csv"
    script.write_text("time,J1\n0," + "1" * 200_000 + "\n", encoding="utf-8")  # csv's field limit is 131,072
    assert main([STEWART, "--duration", "0.002", "--torque-script", str(script)]) == 2  # was a traceback, status 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("vtm-reactions: error: --torque-script: not CSV") and "\n" not in err


def test_a_torque_script_that_is_no_regular_file_is_refused_without_reading(tmp_path, capsys):
    os.mkfifo(tmp_path / "script.csv")  # was opened for reading: blocked for ever, waiting for a writer
    assert main([STEWART, "--duration", "0.002", "--torque-script", str(tmp_path / "script.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--torque-script: not a regular file: script.csv" in err and "\n" not in err
