"""vtm-stopping-map on the UR5 on a braked linear track (a prismatic joint: the worst states' q and v say which
entries are in m and m/s) and on a URDF with a continuous joint (refused in one line)."""

from __future__ import annotations

import json
import os


from test.core.joint_type_models import ur5_text, with_continuous, write_track_robot
from vtm_dynamics.cli.stopping_map import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UR5_BRAKES = os.path.join(REPO, "config", "ur5_brakes.yaml")


def test_a_track_robot_map_says_its_track_entries_are_in_metres(tmp_path, capsys):
    urdf, brakes = write_track_robot(str(tmp_path), UR5_BRAKES)
    out_dir = tmp_path / "map"
    assert main(["--urdf", str(urdf), "--brakes", str(brakes), "--tcp-frame", "tool0", "--states", "4",
                 "--chunk-size", "4", "--threads", "--workers", "1", "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    # the worst states' track position and speed were printed under "q [rad]" and "v [rad/s]"
    assert "q [rad; track_joint in m] = [" in out and "v [rad/s; track_joint in m/s] = [" in out
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["joint_units"] == ["m"] + ["rad"] * 6


def test_a_continuous_joint_is_refused_in_one_line(tmp_path, capsys):
    urdf = tmp_path / "ur5.urdf"
    urdf.write_text(with_continuous(ur5_text(), "wrist_3_joint"))
    assert main(["--urdf", str(urdf), "--brakes", UR5_BRAKES, "--tcp-frame", "tool0", "--states", "4",
                 "--threads", "--workers", "1", "--out", str(tmp_path / "map")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "one position per velocity" in err
