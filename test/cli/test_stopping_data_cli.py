"""`vtm-stopping-data ur5`: CSV, JSON, charts and one PDF report in one command; the published comparison."""

from __future__ import annotations

import csv
import json

import pytest

from vtm_dynamics.cli.stopping_data import main


def test_ur5_category0_data_set_report_and_published_table(tmp_path, capsys):
    out = tmp_path / "ur5"
    assert main(["ur5", "--category", "0", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "100 % points (category 0) against Universal Robots CB3 user manual" in printed
    with open(out / "ur5_stopping_data.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 * 27  # three joints x speed x extension x payload
    data = json.loads((out / "ur5_stopping_data.json").read_text())
    table = {r["joint"]: r for r in data["published_comparison"]}
    assert set(table) == {"shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint"}
    for r in table.values():  # within the 10 % the default brakes were fitted to (every joint braked)
        assert abs(r["angle_error_rad"]) <= 0.10 * r["published_angle_rad"]
        assert abs(r["time_error_s"]) <= 0.10 * r["published_time_s"]
    pdf = (out / "ur5_stopping_data.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page\n") + pdf.count(b"/Type /Page ") >= 4
    for joint in table:
        assert (out / f"ur5_cat0_{joint}.png").stat().st_size > 10_000


@pytest.mark.parametrize("argv, words", [
    (["ur9"], "robot: unknown robot 'ur9'"),
    (["ur5", "--max-speeds", "3", "9", "3"], "max_speeds.shoulder_lift_joint: 9 rad/s is above"),
    (["--urdf", "arm.urdf"], "brakes: --brakes FILE is required with --urdf"),
])
def test_bad_input_is_one_line(argv, words, tmp_path, capsys):
    assert main([*argv, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vtm-stopping-data: error: ") and words in err, err


def test_a_urdf_robot_gets_its_tested_joints_and_an_elbow_like_fold_joint_computed():
    from vtm_dynamics.cli.stopping_data import fold_joint
    from vtm_dynamics.core.estop import StopInputError
    from vtm_dynamics.core.robot.catalogue import PLANAR_3R
    from vtm_dynamics.core.robot.model import RobotModel
    from vtm_dynamics.core.stopping.iso10218 import greatest_displacement_joints

    planar = RobotModel.from_urdf_file(PLANAR_3R.urdf_path())
    joints = greatest_displacement_joints(planar, [0.0] * 3, "link3")
    assert joints == ("joint1", "joint2", "joint3")
    # link3's origin sits on joint3's axis: turning joint3 cannot fold the arm, joint2 can
    assert fold_joint(planar, [0.0] * 3, joints, "link3", None) == "joint2"
    with pytest.raises(StopInputError, match="^extension: turning joint3 within its limits cannot bring link3"):
        fold_joint(planar, [0.0] * 3, joints, "link3", "joint3")
