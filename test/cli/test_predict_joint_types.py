"""vtm-predict on robots whose joints are not all revolute: the UR5 on a braked linear track (a prismatic joint:
its figures in m, m/s and N, said so in the table, the JSON and the plots) and the UR5 with a continuous wrist
(stored as cos, sin: the table, the JSON and the CSV give its angle, continuous with the start)."""

import csv
import json
import os

import numpy as np
import pytest

from test.core.joint_type_models import ur5_text, with_continuous, write_track_robot
from vtm_dynamics.cli.predict import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UR5_BRAKES = os.path.join(REPO, "config", "ur5_brakes.yaml")
ANGLES = [0.3, -1.2, 1.4, -0.8, 1.1, 3.1]  # wrist_3 near +pi: it comes to rest past it
RATES = [1.0, -1.5, 2.0, 2.5, -2.0, 3.0]


def test_the_track_joint_is_reported_in_metres_and_newtons(tmp_path, capsys):
    urdf, brakes = write_track_robot(str(tmp_path), UR5_BRAKES)
    js = tmp_path / "stop.json"
    assert main(["--urdf", str(urdf), "--brakes", str(brakes), "--q", "0.2", *map(str, ANGLES), "--v", "1.5",
                 *map(str, RATES), "--tcp-frame", "tool0", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    # it read "q0 [rad] ... hold [N m] cap [N m]" over the track's 0.2 m, 1.5 m/s, 1200 N
    header = next(line for line in out.splitlines() if line.startswith("joint "))
    assert "[rad" not in header and "[N m]" not in header
    track = next(line for line in out.splitlines() if line.startswith("track_joint"))
    arm = next(line for line in out.splitlines() if line.startswith("elbow_joint"))
    assert track.split()[1:3] == ["0.2000", "1.5000"] and track.split()[6] == "1200.00"
    assert track.endswith("m; m/s; N") and arm.endswith("rad; rad/s; N m")
    data = json.loads(js.read_text())
    assert data["joint_names"][0] == "track_joint"
    assert [u[0] for u in data["joint_units"].values()] == ["m", "m/s", "N"]
    assert [u[1] for u in data["joint_units"].values()] == ["rad", "rad/s", "N m"]
    assert data["rest_positions"][0] == pytest.approx(0.2 + data["stopping_angles_rad"][0], abs=1e-12)


def test_a_continuous_joint_is_reported_as_one_angle_continuous_with_its_start(tmp_path, capsys):
    urdf, js, cs = tmp_path / "ur5.urdf", tmp_path / "stop.json", tmp_path / "stop.csv"
    urdf.write_text(with_continuous(ur5_text(), "wrist_3_joint"))
    assert main(["--urdf", str(urdf), "--brakes", UR5_BRAKES, "--q", *map(str, ANGLES), "--v", *map(str, RATES),
                 "--tcp-frame", "tool0", "--json", str(js), "--csv", str(cs)]) == 0
    out = capsys.readouterr().out
    # q0 was printed as nan for every joint of such a model
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.split()[:1]
            and line.split()[0].endswith("_joint") and len(line.split()) == 7}
    assert [float(rows[n][1]) for n in ("shoulder_pan_joint", "wrist_3_joint")] == [0.3, 3.1]
    data = json.loads(js.read_text())
    rest = np.array(data["rest_positions"])
    np.testing.assert_allclose(rest, np.array(ANGLES) + data["stopping_angles_rad"], atol=1e-12)
    assert rest[5] > np.pi  # past +pi, not wrapped to about -3.1
    np.testing.assert_allclose(data["inputs"]["q0"], ANGLES, atol=1e-12)  # one angle per joint, as --q takes it
    lines = [line for line in cs.read_text().splitlines() if not line.startswith("#")]
    table = list(csv.reader(lines))
    # the CSV had q0..q6 columns holding wrist 3's cos and sin
    assert table[0][1:7] == [f"q_{n}" for n in data["joint_names"]]
    np.testing.assert_allclose([float(x) for x in table[1][1:7]], ANGLES, atol=1e-12)
    np.testing.assert_allclose([float(x) for x in table[-1][1:7]], rest, atol=1e-12)


def test_a_stop_past_a_joint_limit_is_marked_not_valid_in_the_summary_and_the_json(tmp_path):
    import json
    import subprocess
    import sys

    q = "0 -1.5 3.13 -1 0.5 0"  # the elbow 10 mrad below its limit, driven into it at 3 rad/s
    out = subprocess.run([sys.executable, "-m", "vtm_dynamics.cli.predict", "ur5", "--q", *q.split(), "--v", "0",
                          "0", "3", "0", "0", "0", "--json", str(tmp_path / "p.json")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "NOT VALID        past a joint limit: elbow_joint reaches" in out.stdout
    data = json.loads((tmp_path / "p.json").read_text())
    assert data["valid"] is False and data["limit_crossings"][0].startswith("elbow_joint reaches")


def test_a_replayed_stop_of_the_track_joint_is_reported_in_metres(tmp_path, capsys):
    """vtm-predict --bag with the track moving 1.5 m/s at the trigger: the track's stop (0.11 m) is the table's row,
    and it read '0.1076 / 0.1079' under 'angle rec/pred [rad]'; the JSON said '_rad' for every joint's values
    with nothing telling the track's apart. Now the row names its unit and the JSON lists each joint's."""
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.robot.model import RobotModel
    from vtm_dynamics.recordings.simulated import StopStart, plant_stops, sample_stops, write_simulated_bag

    urdf, brakes = write_track_robot(str(tmp_path), UR5_BRAKES)
    robot = RobotModel.from_urdf_file(str(urdf))
    start = StopStart(np.array([1.0, 0.3, -1.2, 1.4, -0.8, 1.1, 0.5]), np.array([1.5, 1.0, -1.5, 2.0, 2.5, -2.0, 3.0]))
    plant = plant_stops(robot, brakes_from_config(robot, str(brakes)), [start])
    bag = write_simulated_bag(str(tmp_path / "bag"), sample_stops(plant, robot.joint_names, seed=1))
    js = tmp_path / "replay.json"
    assert main(["--urdf", str(urdf), "--brakes", str(brakes), "--bag", bag, "--tcp-frame", "tool0", "--json",
                 str(js)]) == 0
    out = capsys.readouterr().out.splitlines()
    header = next(line for line in out if line.startswith("stop "))
    row = next(line for line in out if line.startswith("bag#1"))
    assert row.split()[1] == "track_joint" and row.split()[5] == "m"
    assert "[rad]" not in header.split("time")[0]
    recorded = float(row.split()[2])
    assert recorded == pytest.approx(plant[0].q[-1][0] - 1.0, abs=1e-3)  # the plant's travel [m]
    data = json.loads(js.read_text())
    assert data["joint_units"] == ["m"] + ["rad"] * 6


def test_a_replayed_stop_of_a_continuous_joint_through_pi_is_predicted_from_its_angle(tmp_path, capsys):
    """vtm-predict --bag with the UR5's wrist 3 continuous, recorded wrapped to (-pi, pi] and crossing +pi at the
    trigger: every joint's stop is replayed (recorded and predicted within 2 %), wrist 3 from its angle. Before,
    such a model was refused ('has joints with more than one coordinate', exit status 2)."""
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.robot.model import RobotModel
    from vtm_dynamics.recordings.simulated import StopStart, plant_stops, sample_stops, write_simulated_bag

    urdf, js = tmp_path / "ur5.urdf", tmp_path / "replay.json"
    urdf.write_text(with_continuous(ur5_text(), "wrist_3_joint"))
    robot = RobotModel.from_urdf_file(str(urdf))
    q0 = np.array([0.3, -1.2, 1.4, -0.8, 1.1, 3.2])
    plant = plant_stops(robot, brakes_from_config(robot, UR5_BRAKES), [StopStart(q0, np.array(RATES))])
    samples = sample_stops(plant, robot.joint_names, seed=2)
    samples["joint"] = [(a, b, np.concatenate((q[:5], [np.pi - np.mod(np.pi - q[5], 2 * np.pi)])), v)
                        for a, b, q, v in samples["joint"]]
    bag = write_simulated_bag(str(tmp_path / "bag"), samples)
    assert main(["--urdf", str(urdf), "--brakes", UR5_BRAKES, "--bag", bag, "--tcp-frame", "tool0", "--json",
                 str(js), "--plots", str(tmp_path / "plots")]) == 0
    assert "verdict: every stop figure within 5 %" in capsys.readouterr().out
    stop = json.loads(js.read_text())["stops"][0]
    truth = plant[0].q[-1] - q0
    np.testing.assert_allclose(stop["recorded_angles_rad"], truth, atol=1e-3)
    np.testing.assert_allclose(stop["predicted_angles_rad"], truth, rtol=0.02, atol=2e-3)
    assert stop["recorded_time_s"] == pytest.approx(stop["predicted_time_s"], rel=0.02)
    assert stop["recorded_tcp_m"] == pytest.approx(stop["predicted_tcp_m"], rel=0.02)
