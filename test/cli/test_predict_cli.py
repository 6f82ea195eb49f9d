"""vtm-predict: summary table, JSON/CSV/PNG outputs, envelope progress, and one-line errors with exit code 2."""

import csv
import hashlib
import json
import os
import re

import numpy as np
import pytest
import yaml

from vtm_dynamics.cli.predict import main, run_default_demo
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop import predict_stop
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_default_run_prints_a_summary_table(capsys):
    assert main(["ur5"]) == 0
    out = capsys.readouterr().out
    assert "E-stop prediction: ur5, category 0" in out
    assert "stop time" in out and "shoulder_pan_joint" in out and "stick" in out


def test_outputs_match_the_core_prediction(tmp_path, capsys):
    q = [0.1, -1.0, 1.2, -0.5, 0.4, 0.0]
    v = [1.0, -1.5, 2.0, 1.0, -1.0, 2.0]
    js, cs, pl = tmp_path / "s.json", tmp_path / "s.csv", tmp_path / "plots"
    rc = main(["ur5", "--q", *map(str, q), "--v", *map(str, v), "--json", str(js), "--csv", str(cs),
               "--plots", str(pl), "--lock", "wrist_3_joint@0.004"])
    assert rc == 0
    data = json.loads(js.read_text())
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    brakes = brakes_from_config(robot, os.path.join(REPO, "config", "ur5_brakes.yaml"))
    from vtm_dynamics.core.estop import LockEvent
    ref = predict_stop(robot, brakes, np.array(q), np.array(v), tcp_frame="tool0",
                       lock_events=[LockEvent(0.004, "wrist_3_joint")])
    assert data["stop_time_s"] == pytest.approx(ref.stop_time, abs=1e-12)
    np.testing.assert_allclose(data["stopping_angles_rad"], ref.stopping_angles, atol=1e-12)
    assert data["tcp_straight_distance_m"] == pytest.approx(ref.tcp_straight_distance, abs=1e-12)
    assert [e["kind"] for e in data["events"]][0] == "lock"
    lines = cs.read_text().splitlines()
    comments = [line for line in lines if line.startswith("#")]
    rows = list(csv.reader(line for line in lines if not line.startswith("#")))
    assert comments and all(line.startswith("# vtm-predict ") for line in comments)
    assert rows[0][0] == "t_s" and len(rows) == len(ref.t) + 1
    assert float(rows[-1][1]) == pytest.approx(ref.q_final[0], abs=1e-15)
    for name in ("angles.png", "rates.png", "momenta.png", "energy.png"):
        png = pl / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_every_output_states_what_produced_it(tmp_path, capsys):
    """--payload 5 printed the same header as no payload; the JSON and CSV named neither brakes nor software."""
    js, cs = tmp_path / "s.json", tmp_path / "s.csv"
    assert main(["ur5", "--payload", "5", "--category", "1", "--decel", "2.5", "--json", str(js), "--csv", str(cs),
                 "--envelope", "1"]) == 0
    out = capsys.readouterr().out
    brake_file = os.path.join(REPO, "config", "ur5_brakes.yaml")
    digest = hashlib.sha256(open(brake_file, "rb").read()).hexdigest()
    header = out.split("stop time")[0]
    assert "payload          5 kg at tool0" in header
    assert f"brakes           {brake_file} (sha256 {digest[:16]})" in header
    assert "ramp at 2.5 rad/s^2" in header and "max step 0.005 s" in header and "software         vtm_dynamics" in header
    assert "envelope ranges  brake torque x 0.9-1.1, engage delay x 1-1.5, payload 5-5 kg" in header
    inputs = json.loads(js.read_text())["inputs"]
    assert inputs["payload_kg"] == 5.0 and inputs["brakes_sha256"] == digest and inputs["brakes_file"] == brake_file
    assert inputs["category1"]["deceleration_rad_s2"] == 2.5 and inputs["integration"]["max_step_s"] == 0.005
    urdf = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf")).urdf_text
    assert inputs["model_sha256"] == hashlib.sha256(urdf.encode()).hexdigest()
    assert inputs["software"]["version"] and "git_commit" in inputs["software"]
    assert inputs["envelope"]["torque_factor"] == [0.9, 1.1] and inputs["envelope"]["n_random"] == 1
    comments = [line for line in cs.read_text().splitlines() if line.startswith("#")]
    assert f"# vtm-predict brakes_sha256: \"{digest}\"" in comments and "# vtm-predict payload_kg: 5.0" in comments


def test_help_shows_every_default(capsys):
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split("options:")[1].split())
    for option, default in (("--payload", "0.0"), ("--decel", "3.0"), ("--category", "0"), ("--state", "demo")):
        assert re.search(re.escape(option) + r" \S+ .{0,160}?\(default: " + re.escape(default) + r"\)", text), option
    assert "the core's, 0.005" in text


def test_envelope_reports_progress_on_stderr(capsys):
    assert main(["planar_3r", "--envelope", "2"]) == 0
    cap = capsys.readouterr()
    assert "envelope: 1/" in cap.err and "envelope over" in cap.out and "worst distance" in cap.out


def test_category1_and_run_default_demo(tmp_path, capsys):
    assert main(["planar_3r", "--category", "1", "--decel", "4"]) == 0
    assert "category 1 (power off at" in capsys.readouterr().out
    summary = run_default_demo(str(tmp_path))
    assert summary.robot == "ur5" and summary.prediction.stopped
    assert {os.path.basename(f) for f in summary.files} >= {"stop.json", "stop.csv", "energy.png"}


def _bad_brakes(tmp_path, entry):
    path = tmp_path / "brakes.yaml"
    path.write_text(yaml.safe_dump({"brakes": {"joints": entry}}))
    return str(path)


@pytest.mark.parametrize("args_fn, field", [
    (lambda t: ["ur5", "--brakes", _bad_brakes(t, {"no_joint": {"sliding_torque": 1.0}})], "brakes.joints.no_joint"),
    (lambda t: ["ur5", "--brakes", _bad_brakes(t, {"elbow_joint": {"sliding_torque": -5.0}})],
     "brakes.joints.elbow_joint.sliding_torque"),
    (lambda t: ["ur5", "--q", "0", "nan", "0", "0", "0", "0", "--v", "0", "0", "0", "0", "0", "0"], "q[1]"),
    (lambda t: ["ur5", "--q", "0", "0", "3.5", "0", "0", "0", "--v", "0", "0", "0", "0", "0", "0"], "q[elbow_joint]"),
    (lambda t: ["ur5", "--q", "0", "0", "0", "--v", "0", "0", "0"], "q"),
    (lambda t: ["ur5", "--state", "flying"], "state"),
    (lambda t: ["ur5", "--lock", "elbow_joint"], "lock"),
    (lambda t: ["ur5", "--category", "1", "--max-duration", "-0.2"], "category_one.max_duration"),
    (lambda t: ["ur5", "--category", "1", "--max-duration", "nan"], "category_one.max_duration"),
    (lambda t: ["kuka"], "argument robot: unknown robot 'kuka'"),
    (lambda t: ["--urdf", str(t / "missing.urdf"), "--brakes", "x.yaml"], "urdf"),
])
def test_bad_input_gives_one_error_line_and_exit_code_2(tmp_path, capsys, args_fn, field):
    assert main(args_fn(tmp_path)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"vtm-predict: error: {field}")


def test_argparse_errors_also_exit_2(capsys):
    assert main(["ur5", "--category", "3"]) == 2


@pytest.mark.parametrize("state, joint, angle, time", [
    # UR3 category-0 figures of the maker's manual (100 % speed, extension and payload), typed from the manual
    ("stretched_j0", 0, 0.18, 0.159), ("stretched_j1", 1, 0.20, 0.154), ("stretched_j2", 2, 0.15, 0.092),
])
def test_the_ur3_by_name_uses_its_own_brakes_and_stops_as_published(tmp_path, capsys, state, joint, angle, time):
    js = tmp_path / "ur3.json"
    assert main(["ur3", "--state", state, "--payload", "3", "--json", str(js)]) == 0
    data = json.loads(js.read_text())
    assert "ur3" in capsys.readouterr().out
    assert abs(data["stopping_angles_rad"][joint]) == pytest.approx(angle, rel=0.10)
    assert data["stop_time_s"] == pytest.approx(time, rel=0.10)  # the whole arm is at rest by then


def test_a_stop_that_does_not_end_names_the_joints_still_moving_and_why(tmp_path, capsys):
    """The summary used to blame "a joint without brake?" whatever kept the arm moving; it names the joints free at
    the horizon, each with "no brake" or "brake too weak?"."""
    config = yaml.safe_load(open(os.path.join(REPO, "config", "ur5_brakes.yaml")))
    joints = config["brakes"]["joints"]
    joints["shoulder_lift_joint"].update(sliding_torque=5.0, breakaway_torque=6.0, holding_torque=7.0, viscous=0.0)
    del joints["wrist_3_joint"]  # no brake: it turns on at its own speed
    weak = tmp_path / "weak.yaml"
    weak.write_text(yaml.safe_dump(config))
    assert main(["ur5", "--q", "0", "0", "0", "0", "0", "0", "--v", "0", "0", "0", "0", "0", "1", "--brakes",
                 str(weak)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("stop time"))
    assert "not stopped within the horizon" in line
    assert "shoulder_lift_joint (brake too weak?)" in line and "wrist_3_joint (no brake)" in line
    assert "elbow_joint" not in line and "without brake" not in line


def test_category_1_takes_the_drives_torque_limits_and_says_so(tmp_path):
    """Without --torque-limits the drives deliver --decel whatever it takes; with them the ramp is the core's with
    those limits (before: vtm-predict had no way to give them)."""
    from vtm_dynamics.core.estop import CategoryOne, predict_stop
    from vtm_dynamics.core.estop.payload import with_payload
    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf

    # nearly stretched, shoulder and elbow at 2.5 rad/s, 5 kg: 20 rad/s^2 needs more than the shoulder's 150 N m
    q, v = ["0", "-0.3", "0.3", "0", "0", "0"], ["0", "2.5", "-2.5", "0", "0", "0"]
    runs = {}
    for name, extra in (("free", []), ("urdf", ["--torque-limits", "urdf"])):
        path = tmp_path / f"{name}.json"
        assert main(["ur5", "--category", "1", "--decel", "20", "--payload", "5", "--q", *q, "--v", *v,
                     "--json", str(path), *extra]) == 0
        runs[name] = json.loads(path.read_text())
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    brakes = brakes_from_config(robot, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "config", "ur5_brakes.yaml"))
    loaded = with_payload(robot, 5.0, "tool0")
    core = predict_stop(loaded, brakes, np.array(q, float), np.array(v, float), category=1, tcp_frame="tool0",
                        category_one=CategoryOne(deceleration=20.0, torque_limits="urdf"))
    assert runs["urdf"]["stop_time_s"] == pytest.approx(core.stop_time, abs=1e-12)
    assert runs["urdf"]["stop_time_s"] > runs["free"]["stop_time_s"]  # the limits lengthen this ramp
    assert runs["urdf"]["inputs"]["category1"]["torque_limits"] == "urdf"
    assert runs["free"]["inputs"]["category1"]["torque_limits"] is None


def test_torque_limits_of_the_wrong_kind_are_one_line(capsys):
    assert main(["ur5", "--category", "1", "--torque-limits", "lots"]) == 2
    assert "torque_limits: 'lots' is neither 'urdf' nor numbers" in capsys.readouterr().err
    assert main(["ur5", "--category", "1", "--torque-limits", "100", "100"]) == 2
    assert "torque_limits" in capsys.readouterr().err


def test_an_envelope_whose_cases_cross_a_joint_limit_is_marked_not_valid_in_the_table_and_the_json(tmp_path, capsys):
    # the elbow 10 mrad below its upper limit, driven into it at 3 rad/s: no case of the envelope stops in time
    assert main(["ur5", "--q", "0", "-1.5", "3.13", "-1", "0.5", "0", "--v", "0", "0", "3", "0", "0", "0",
                 "--envelope", "1", "--json", str(tmp_path / "p.json")]) == 0
    out = capsys.readouterr().out
    worst = next(line for line in out.splitlines() if line.strip().startswith("worst distance"))
    assert worst.endswith("NOT VALID")
    assert "NOT VALID: " in out and "cases past a joint limit" in out and "elbow_joint reaches" in out
    env = json.loads((tmp_path / "p.json").read_text())["envelope"]
    assert env["valid"] is False
    assert all(c["valid"] is False and c["limit_crossings"][0].startswith("elbow_joint") for c in env["cases"])


def test_a_negative_or_infinite_torque_limit_is_refused_not_read_as_no_limit(capsys):
    """The ramp reads a limit <= 0 as 'no limit on that joint' (a URDF's effort 0); a typed -150 used to drop the
    shoulder's limit silently."""
    for bad in ("-150", "inf"):
        assert main(["ur5", "--category", "1", "--torque-limits", "150", bad, "150", "28", "28", "28"]) == 2
        assert f"torque_limits: '{bad}' is not a finite torque >= 0 N m" in capsys.readouterr().err


def test_the_csv_of_a_stop_past_a_joint_limit_says_in_its_header_that_it_is_not_valid(tmp_path, capsys):
    """The CSV's rows of the UR5's elbow driven into its upper limit read like any stop: its header named only the
    inputs, never that the rest lies 0.1 rad past the limit."""
    from test.core.limit_case import elbow_towards_limit

    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    q, v, limit = elbow_towards_limit(robot)
    cs = tmp_path / "p.csv"
    assert main(["ur5", "--q", *map(str, q), "--v", *map(str, v), "--csv", str(cs)]) == 0
    capsys.readouterr()
    lines = cs.read_text().splitlines()
    comments = [line for line in lines if line.startswith("#")]
    assert "# vtm-predict valid: false" in comments and "# vtm-predict stopped: true" in comments
    crossings = json.loads(next(c for c in comments if c.startswith("# vtm-predict limit_crossings: ")).split(": ", 1)[1])
    assert crossings[0].startswith("elbow_joint reaches") and f"past its upper limit {limit:.4f} rad" in crossings[0]
    why = next(c for c in comments if c.startswith("# vtm-predict not_valid: "))
    assert "past a joint limit: elbow_joint" in why
    rows = list(csv.reader(line for line in lines if not line.startswith("#")))
    assert float(rows[-1][rows[0].index("q_elbow_joint")]) > limit + 0.1  # the rows do go past it
    assert all(line.startswith("# vtm-predict ") for line in comments)


def test_the_csv_of_a_valid_stop_says_it_is_valid(tmp_path, capsys):
    cs = tmp_path / "p.csv"
    assert main(["ur5", "--csv", str(cs)]) == 0
    comments = [line for line in cs.read_text().splitlines() if line.startswith("#")]
    assert "# vtm-predict valid: true" in comments and "# vtm-predict limit_crossings: []" in comments
    assert not any(c.startswith("# vtm-predict not_valid") for c in comments)
