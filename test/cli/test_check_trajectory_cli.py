"""`vtm-check-trajectory`: a trajectory file and a scene file in, a verdict (exit 0 safe, 1 not), a table, JSON
with the worst stop as viewer data, CSV, plots and the largest safe speed scaling out; every bad input one line
and exit status 2."""

import json
import os
import sys

import numpy as np
import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench"))
import stopsafe_scenarios as S  # noqa: E402
from vtm_dynamics.cli.check_trajectory import main  # noqa: E402

FAST = ["--nominal", "--quiet"]


def _write(path, data):
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(data, fh)
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("check")
    out = {
        "pan": _write(d / "pan.yaml", S.ur5_pan(0.5, 0.6).as_message_dict()),
        "down": _write(d / "down.yaml", S.ur5_down(0.22).as_message_dict()),
        "cell": _write(d / "cell.yaml", S.cell("ur5", table_top=0.12)),
        "near": _write(d / "near.yaml", {"scene": {"self_collision": False, "obstacles": [
            {"name": "table", "primitive": {"type": 1, "dimensions": [0.5, 0.9, 0.04]},
             "pose": {"position": [0.65, 0.0, 0.035]}}]}}),
        "dir": d,
    }
    return out


def test_a_safe_trajectory_with_every_output(files, capsys):
    d = files["dir"]
    argv = [files["pan"], "--scene", files["cell"], "--rate", "40", "--json", str(d / "r.json"), "--csv",
            str(d / "r.csv"), "--plots", str(d / "plots"), *FAST]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "RESULT: every predicted stop ends clear" in out and "smallest certified clearance" in out
    data = json.loads((d / "r.json").read_text())
    assert data["safe"] and len(data["samples"]) == 21 and data["cases"] == ["cat 0, torque x1, delay x1, payload 0 kg"]
    worst = data["viewer"]["worst"]
    assert worst["kind"] in ("scene", "self") and worst["pair"][0].endswith("_link") and len(worst["cases"]) == 1
    assert len(worst["cases"][0]["tcp_path"]) == len(worst["cases"][0]["t_s"]) and worst["witness_path"]
    assert {o["name"] for o in data["viewer"]["scene"]["obstacles"]} == {"table", "wall"}
    assert len((d / "r.csv").read_text().splitlines()) == 22
    for name in ("clearance.png", "worst_stop.png"):
        assert os.path.getsize(d / "plots" / name) > 20_000


def test_an_unsafe_trajectory_exits_1_and_its_scaled_version_passes_when_checked_again(files, capsys):
    d = files["dir"]
    common = ["--scene", files["near"], "--tolerance", "0.02", "--margin", "0.01", *FAST]
    assert main([files["down"], *common]) == 1
    assert "RESULT: UNSAFE - first at t =" in capsys.readouterr().out
    scaled = str(d / "scaled.yaml")
    assert main([files["down"], *common, "--scale", "--scale-tolerance", "0.25", "--write-scaled", scaled]) == 1
    out = capsys.readouterr().out
    assert "largest safe speed scaling" in out and "re-check at it: passes" in out
    factor = float(out.split("largest safe speed scaling: ")[1].split()[0])
    assert 0.0 < factor < 1.0
    assert main([scaled, *common]) == 0
    assert "every predicted stop ends clear" in capsys.readouterr().out


def test_a_trajectory_from_a_bag(files, tmp_path, capsys):
    from rosbags.typesys import Stores, get_typestore

    from vtm_dynamics.recordings.bag_files import write_bag

    traj = S.ur5_pan(0.5, 0.6)
    store = get_typestore(Stores.ROS2_KILTED)
    T = store.types
    points = [T["trajectory_msgs/msg/JointTrajectoryPoint"](
        positions=traj.positions[k], velocities=traj.velocities[k], accelerations=np.zeros(0), effort=np.zeros(0),
        time_from_start=T["builtin_interfaces/msg/Duration"](sec=int(t), nanosec=int(round((t % 1) * 1e9))))
        for k, t in enumerate(traj.time_from_start)]
    msg = T["trajectory_msgs/msg/JointTrajectory"](
        header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id=""),
        joint_names=list(traj.joint_names), points=points)
    bag = str(tmp_path / "plan_bag")
    write_bag(bag, "mcap", {"/plan": "trajectory_msgs/msg/JointTrajectory"}, [("/plan", 1, msg)], typestore=store)
    assert main([bag, "--scene", files["cell"], "--rate", "20", *FAST]) in (0, 1)  # (coarse: the bound may fail it)
    from_bag = capsys.readouterr().out
    assert main([files["pan"], "--scene", files["cell"], "--rate", "20", *FAST]) in (0, 1)
    assert "5 points, 0.500 s" in from_bag and from_bag == capsys.readouterr().out


def test_bad_inputs_are_one_line_with_status_2(files, tmp_path, capsys):
    d = files["dir"]
    unknown = S.ur5_pan(0.5, 0.6).as_message_dict()
    unknown["joint_names"][2] = "elbow"
    too_far = S.ur5_pan(0.5, 0.6).as_message_dict()
    for p in too_far["points"]:
        p["positions"][2] = 3.3
    mesh_scene = {"scene": {"obstacles": [{"name": "jig", "mesh_name": "jig"}]}}
    (tmp_path / "bad.stl").write_bytes(b"solid broken\n")
    cases = [
        ([_write(tmp_path / "u.yaml", unknown), "--scene", files["cell"]], "joint_names: 'elbow' is not a movable joint"),
        ([_write(tmp_path / "f.yaml", too_far), "--scene", files["cell"]], "trajectory: elbow_joint reaches 3.3"),
        ([files["pan"], "--scene", _write(tmp_path / "e.yaml", {"scene": {"self_collision": False}})],
         "scene: empty"),
        ([files["pan"], "--scene", _write(tmp_path / "m.yaml", mesh_scene), "--mesh", f"jig={tmp_path / 'bad.stl'}"],
         "mesh: cannot read bad.stl"),
        ([files["pan"], "--scene", files["cell"], "--rate", "5000", "--max-samples", "1000"],
         "E-stop instants, more than 1000"),
        ([files["pan"], "--scene", files["cell"], "--tolerance", "0.0001", "--max-minutes", "0.01"],
         "cost: about"),
        ([files["pan"], "--scene", files["cell"], "--robot", "ur9"], "robot: must be one of"),
        ([str(tmp_path), "--scene", files["cell"]], "rosbag2"),
    ]
    for argv, words in cases:
        assert main([*argv, *FAST]) == 2, words
        err = capsys.readouterr().err.strip()
        assert err.startswith("vtm-check-trajectory: error:") and words in err and "\n" not in err, (words, err)


def test_per_segment_scalings_that_would_break_a_velocity_limit_are_not_taken_and_the_search_goes_on(tmp_path,
                                                                                                         capsys):
    """A point's velocity takes the smaller scaling of its two segments, so a faster neighbour's cubic can exceed its
    joint's velocity limit inside although every scaling is within the headroom: the per-segment search stopped the
    whole run there (exit 2, blaming the trajectory). Such scalings are unsafe candidates: the run ends with its
    verdict and per-segment scalings whose re-timed trajectory passes its check."""
    pan = _write(tmp_path / "pan.yaml", S.ur5_pan(1.0, 1.6).as_message_dict())
    post = [0.58 * np.cos(1.175), 0.58 * np.sin(1.175), 0.5]  # a post the last segment's stops come close to
    cell = _write(tmp_path / "post.yaml", {"scene": {"self_collision": False, "obstacles": [
        {"name": "post", "primitive": {"type": "cylinder", "dimensions": [1.0, 0.04]},
         "pose": {"position": [float(x) for x in post]}}]}})
    assert main([pan, "--scene", cell, "--nominal", "--quiet", "--scale", "--max-scaling", "10",
                 "--per-segment"]) == 1  # the motion as planned is not safe
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("per segment:"))
    assert "(re-check passes)" in line
    scales = [float(x) for x in line.split(":", 1)[1].split("(")[0].split(",")]
    assert len(scales) == 4 and max(scales) > min(scales)


def test_category_1_ramps_keep_within_the_given_torque_limits_and_the_report_says_which(files, capsys):
    """The pan trajectory turns only the base (vertical axis: no gravity, Coriolis or centrifugal torque on it), so
    a ramp from base speed v costs the drive (M_00 + armature) v / T; M_00 does not depend on the base angle and the
    other joints stay put, so at every E-stop instant the ramp within a base limit L lasts (M_00 + armature) v / L
    and the free one v / decel: their ratio is (M_00 + armature) decel / L at every instant. Before,
    vtm-check-trajectory had no --torque-limits: the drives delivered --decel whatever it took."""
    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf

    d = files["dir"]
    decel, limit, armature = 20.0, 2.0, 2.0  # armature: shoulder_pan_joint in config/ur5_brakes.yaml
    runs = {}
    for name, extra in (("free", []), ("held", ["--torque-limits", str(limit), "1e4", "1e4", "1e4", "1e4", "1e4"])):
        path = d / f"c1_{name}.json"
        assert main([files["pan"], "--scene", files["near"], "--rate", "40", "--category", "1", "--decel",
                     str(decel), "--json", str(path), *FAST, *extra]) in (0, 1)
        runs[name] = json.loads(path.read_text())
    assert "drive torque limits 2 10000 10000 10000 10000 10000 N m" in capsys.readouterr().out
    assert runs["held"]["sources"]["category1"].endswith("10000 N m (per joint, model order; 0: none)")
    assert "none" in runs["free"]["sources"]["category1"]
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    ratio = (robot.mass_matrix(np.array(S.UR5_HOME, float))[0, 0] + armature) * decel / limit
    free = {r["time_s"]: r["stop_time_s"] for r in runs["free"]["samples"]}
    moving = [r for r in runs["held"]["samples"] if free.get(r["time_s"])]
    assert len(moving) >= 15
    for r in moving:
        assert r["stop_time_s"] == pytest.approx(ratio * free[r["time_s"]], rel=1e-6)


def test_a_stop_past_a_joint_limit_makes_the_trajectory_unsafe_in_the_report_json_and_csv(files, tmp_path, capsys):
    """The elbow runs at 3 rad/s to 10 mrad below its upper limit (where the trajectory ends, still moving): the
    stops from its last instants come to rest past the limit (the independent integration says 0.107 rad past from
    the last), far from the only obstacle; the check said "every predicted stop ends clear", exit 0."""
    from test.core.limit_case import elbow_towards_limit, reference_elbow_rest
    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
    from vtm_dynamics.core.stopsafe.trajectory import planned_trajectory

    robot = RobotModel.from_urdf_file(example_robot_urdf(S.UR5_URDF))
    q_end, v, limit = elbow_towards_limit(robot)
    q_start = q_end.copy()
    q_start[robot.joint_names.index("elbow_joint")] -= 0.3
    assert reference_elbow_rest(robot, q_end, v) > limit + 0.1
    traj = planned_trajectory(robot.joint_names, [0.0, 0.1], [q_start, q_end], [v, v])
    path = _write(tmp_path / "to_limit.yaml", traj.as_message_dict())
    far = _write(tmp_path / "far.yaml", {"scene": {"self_collision": False, "obstacles": [
        {"name": "block", "primitive": {"type": 1, "dimensions": [0.2, 0.2, 0.2]},
         "pose": {"position": [0.0, 0.0, -1.0]}}]}})
    argv = [path, "--scene", far, "--rate", "50", "--json", str(tmp_path / "r.json"), "--csv",
            str(tmp_path / "r.csv"), *FAST]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "RESULT: UNSAFE - first at t =" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("E-stop instants whose stop goes past a joint limit"))
    assert "past a joint limit: elbow_joint reaches" in line and f"past its upper limit {limit:.4f} rad" in line
    data = json.loads((tmp_path / "r.json").read_text())
    last = data["samples"][-1]
    assert not data["safe"] and data["past_limit_instants"] >= 1 and not last["safe"] and last["stopped"]
    assert last["limit_crossings"][0].startswith("elbow_joint reaches") and "past a joint limit" in last["reason"]
    assert data["samples"][0]["safe"] and data["samples"][0]["limit_crossings"] == []
    assert "past a joint limit: elbow_joint" in (tmp_path / "r.csv").read_text().splitlines()[-1]


def test_the_envelope_payload_hangs_on_the_robots_payload_frame_and_the_report_says_where():
    """With ``--tcp-frame wrist_3_link`` the payload stays on tool0, where vtm-predict hangs it; the help said
    it went to the TCP frame and the report's envelope line did not say where it hung."""
    from vtm_dynamics.cli.check_trajectory import build_parser
    from vtm_dynamics.cli.stopsafe_setup import load_setup

    parser = build_parser()
    loaded = load_setup(parser.parse_args(["plan.yaml", "--scene", "cell.yaml", "--tcp-frame", "wrist_3_link"]))
    assert loaded.setup.payload_frame == "tool0"
    assert loaded.sources["envelope"].endswith("payload 0..5 kg at tool0")
    help_text = " ".join(parser.format_help().split())
    assert "envelope's payload (default: the known robot's payload frame, tool0" in help_text
