"""`vtm-stopping-data ur5`: CSV, JSON, charts and one PDF report in one command; the published comparison."""

from __future__ import annotations

import csv
import math
import json

import pytest

from vtm_dynamics.cli.stopping_data import main


@pytest.fixture(scope="module")
def ur5_report(tmp_path_factory):
    """One default run (category 0, 81 points) with every page of the PDF captured as it is drawn."""
    import matplotlib.backends.backend_pdf as backend_pdf

    pages = []
    original = backend_pdf.PdfPages.savefig

    def capture(self, figure=None, **kwargs):
        fig = figure
        texts = [t.get_text() for t in fig.texts]
        for ax in fig.axes:
            texts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
            legend = ax.get_legend()
            if legend is not None:
                texts += [t.get_text() for t in legend.get_texts()]
        pages.append("\n".join(texts))
        return original(self, figure, **kwargs)

    out = tmp_path_factory.mktemp("stopping") / "ur5"
    mp = pytest.MonkeyPatch()
    mp.setattr(backend_pdf.PdfPages, "savefig", capture)
    try:
        assert main(["UR5", "--out", str(out)]) == 0
    finally:
        mp.undo()
    return out, pages


def test_ur5_category0_data_set_report_and_published_table(ur5_report, capsys):
    out, _ = ur5_report
    lines = (out / "ur5_stopping_data.csv").read_text(encoding="utf-8").splitlines()
    comments = [line for line in lines if line.startswith("#")]
    rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    assert len(rows) == 3 * 27  # three joints x speed x extension x payload
    assert any(c.startswith("# vtm-stopping-data brakes_sha256:") for c in comments)
    data = json.loads((out / "ur5_stopping_data.json").read_text())
    table = {r["joint"]: r for r in data["published_comparison"]}
    assert set(table) == {"shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint"}
    for r in table.values():  # within the 10 % the default brakes were fitted to (every joint braked)
        assert abs(r["angle_error_rad"]) <= 0.10 * r["published_angle_rad"]
        assert abs(r["time_error_s"]) <= 0.10 * r["published_time_s"]
        assert r["safety_angle_rad"] == r["band_angle_rad"][1] and r["safety_time_s"] == r["band_time_s"][1]
    # UR5 J1: 478 ms nominal against 530 ms published: flagged; J0 meets its figure: not flagged
    assert table["shoulder_lift_joint"]["nominal_below_published"]["time"]
    assert not any(table["shoulder_pan_joint"]["nominal_below_published"].values())
    assert data["document"]["statement"].startswith("simulated")
    pdf = (out / "ur5_stopping_data.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page\n") + pdf.count(b"/Type /Page ") >= 4
    for joint in table:
        assert (out / f"ur5_cat0_{joint}.png").stat().st_size > 10_000


def test_every_page_says_simulated_and_carries_the_document_control(ur5_report):
    out, pages = ur5_report
    doc = json.loads((out / "ur5_stopping_data.json").read_text())["document"]
    assert len(pages) >= 7
    for n, text in enumerate(pages, start=1):
        assert "SIMULATED DATA, NOT MEASURED" in text and "fitted to three published values per robot" in text
        assert f"page {n} of {len(pages)}" in text
        assert doc["brakes_sha256"][:16] in text and doc["model_sha256"][:16] in text
        assert doc["software"]["version"] in text and doc["date_utc"] in text


def test_the_report_holds_every_point_levels_tcp_distance_poses_and_brake_terms(ur5_report):
    _, pages = ur5_report
    every = "\n".join(p for p in pages if "Every point (numeric)" in p)
    assert sum(line.lstrip().startswith("0 ") for line in every.splitlines()) == 81  # one row per point
    assert "safety: angle/time/TCP" in every and "mm" in every
    brakes = "\n".join(p for p in pages if "Brakes, test conditions and assumptions" in p)
    for column in ("breakaway", "v_s", "rise", "armature", "holding", "viscous"):
        assert column in brakes
    assert "5.00 kg" in brakes and "0.839 m" in brakes and "3.142 rad/s" in brakes  # absolute levels
    assert "Category 1: not in this report" in brakes
    poses = next(p for p in pages if "Test poses" in p)
    assert poses.count("side view") == 3 and poses.count("top view") == 3
    chart = next(p for p in pages if "Stop category 0: shoulder_lift_joint" in p)
    assert "100% (5.00 kg)" in chart and "100% (0.84 m)" in chart and "published (100 %, 100 %)" in chart
    summary = pages[0]
    assert "value for safety calc." in summary and "time below published (-9.8 %)" in summary


def test_category1_is_left_out_unless_its_deceleration_is_stated(ur5_report, tmp_path, capsys):
    _, pages = ur5_report
    cat1 = next(p for p in pages if p.count("Stop category 1") and "LEFT OUT" in p)
    assert "give none" in cat1 and "--decel" in cat1
    assert not any("Stop category 1:" in p for p in pages)  # no chart pages of an assumed ramp
    assert main(["ur5", "--category", "0", "1", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "category 1 needs the controller's deceleration ramp, --decel" in err


@pytest.mark.parametrize("argv, words", [
    (["ur9"], "argument robot: unknown robot 'ur9'"),
    (["ur5", "--max-speeds", "3", "9", "3"], "max_speeds.shoulder_lift_joint: 9 rad/s is above"),
    (["--urdf", "arm.urdf"], "brakes: --brakes FILE is required with --urdf"),
    (["ur5", "--fold", "no_such_joint"], "fold: 'no_such_joint' is not a joint of"),
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


def test_a_stated_category1_deceleration_is_named_and_identical_joints_share_one_chart():
    from dataclasses import replace

    from vtm_dynamics.cli.stopping_data import category1_page
    from vtm_dynamics.core.stopping.iso10218 import StoppingPoint, StoppingTestSpec

    spec = StoppingTestSpec(joints=("a", "b", "c"), fold_joints=("c",) * 3, max_speeds=(3.0,) * 3, max_payload=1.0,
                            payload_frame="tool", base_pose=(0.0,) * 3, categories=(0, 1),
                            category1_deceleration=4.0)
    base = StoppingPoint(1, "a", 1.0, 1.0, 1.0, 3.0, 1.0, 1.0, (0.0,) * 3, 0.5, 1.0, 9 / 8, 0.75, 1.1, 1.2, 0.7,
                         0.8, True)
    same = [replace(base, joint=j) for j in "abc"]
    note, charted = category1_page(spec, same)
    assert "STATED deceleration: 4 rad/s^2" in note[0] and charted == {0: ("a", "b", "c"), 1: ("a",)}
    differ = same[:2] + [replace(base, joint="c", angle=1.3)]
    assert category1_page(spec, differ)[1][1] == ("a", "b", "c")


@pytest.fixture(scope="module")
def not_stopping_run(tmp_path_factory):
    """A UR5 run whose shoulder brake (12 N m) cannot hold the arm: the shoulder tests and the tests whose shoulder
    is braked alongside do not come to rest within the horizon. Returns (output directory, printed summary)."""
    import yaml

    from vtm_dynamics.core.robot.catalogue import ROBOTS

    tmp = tmp_path_factory.mktemp("not_stopping")
    with open(ROBOTS["ur5"].brakes_path(), encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    config["brakes"]["joints"]["shoulder_lift_joint"].update(
        sliding_torque=12.0, viscous=0.0, breakaway_torque=14.4, holding_torque=18.0)
    brakes = tmp / "weak_shoulder_brakes.yaml"
    brakes.write_text(yaml.safe_dump(config), encoding="utf-8")
    mp = pytest.MonkeyPatch()
    printed = []
    mp.setattr("builtins.print", lambda *a, **k: printed.append(" ".join(map(str, a))))
    try:
        assert main(["ur5", "--brakes", str(brakes), "--out", str(tmp / "ur5")]) == 0
    finally:
        mp.undo()
    return tmp / "ur5", "\n".join(printed)


def test_the_json_is_strict_json_with_null_for_the_time_of_a_stop_that_did_not_end(not_stopping_run):
    out, _ = not_stopping_run

    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    data = json.loads((out / "ur5_stopping_data.json").read_text(encoding="utf-8"), parse_constant=refuse)
    late = [p for p in data["points"] if not p["stopped"]]
    assert late and all(p["time_max"] is None for p in late)
    assert any(p["time"] is None for p in late)
    assert all(p["time"] is not None for p in data["points"] if p["stopped"])


def test_fold_is_applied_to_a_named_robot_for_every_tested_joint():
    from vtm_dynamics.cli.stopping_data import build_parser, spec_for
    from vtm_dynamics.cli.stopping_robots import load_robot

    loaded = load_robot("ur5", None, None)
    args = build_parser().parse_args(["ur5", "--fold", "shoulder_lift_joint", "--out", "unused"])
    assert spec_for(loaded, args).fold_joints == ("shoulder_lift_joint",) * 3
    default = build_parser().parse_args(["ur5", "--out", "unused"])
    assert spec_for(loaded, default).fold_joints == ("elbow_joint",) * 3


def test_the_csv_and_json_state_the_unit_of_every_column_distances_in_metres(ur5_report):
    """The CSV carries SI values (the report's table shows mm): a ``# units:`` comment line names each column's
    unit, and the TCP distance read with it is the JSON's value in metres, below the arm's 1 m reach."""
    out, _ = ur5_report
    lines = (out / "ur5_stopping_data.csv").read_text(encoding="utf-8").splitlines()
    (units_line,) = [line for line in lines if line.startswith("# units: ")]
    units = json.loads(units_line[len("# units: "):])
    rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    assert set(units) == set(rows[0])
    assert units["tcp_distance"] == units["tcp_distance_max"] == units["reach"] == "m"
    assert units["angle"] == "rad" and units["time"] == "s" and units["payload"] == "kg"
    data = json.loads((out / "ur5_stopping_data.json").read_text())
    assert data["point_units"]["tcp_distance"] == "m"
    for row, point in zip(rows, data["points"]):
        assert float(row["tcp_distance"]) == pytest.approx(point["tcp_distance"], rel=1e-12)
        assert 0 < point["tcp_distance"] <= point["tcp_distance_max"] < 2 * point["reach"]


def test_points_that_do_not_come_to_rest_are_marked_on_the_charts_and_flagged_in_the_tables(not_stopping_run):
    """A point whose arm is still moving at the horizon has no stopping time: the charts draw it as a triangle
    (it does not vanish with its infinite time) and say why on the page; the printed safety table and the report's
    table of every point flag its row."""
    import matplotlib

    matplotlib.use("Agg")
    from vtm_dynamics.cli.stopping_charts import vendor_chart
    from vtm_dynamics.core.estop.defaults import HORIZON
    from vtm_dynamics.core.stopping.iso10218 import StoppingPoint

    out, printed = not_stopping_run
    data = json.loads((out / "ur5_stopping_data.json").read_text(encoding="utf-8"))
    points = [StoppingPoint(**{k: (math.inf if v is None else v) for k, v in p.items() if k != "q_test"},
                            q_test=tuple(p["q_test"])) for p in data["points"]]
    late = [p for p in points if p.joint == "shoulder_lift_joint" and not p.stopped
            and 1.0 in (p.payload_fraction, p.extension_fraction)]
    assert late
    fig = vendor_chart(points, 0, "shoulder_lift_joint")
    for row, col in ((0, 0), (0, 1), (1, 0), (1, 1)):
        ax = fig.axes[2 * row + col]
        vary = "payload_fraction" if col == 0 else "extension_fraction"  # the level held at 100 % in that column
        expected = sorted(100 * p.speed_fraction for p in late if getattr(p, vary) == 1.0)
        drawn = sorted(float(x) for line in ax.get_lines() if line.get_marker() == "^"
                       for x in line.get_xdata())
        assert drawn == pytest.approx(expected), (row, col)
    assert any(f"not at rest within {HORIZON:g} s" in label for label in fig.axes[0].get_legend_handles_labels()[1])
    lift = next(line for line in printed.splitlines() if line.strip().startswith("shoulder_lift_joint"))
    assert "NOT AT REST within the horizon" in lift
    from vtm_dynamics.cli.stopping_report import points_table

    rows = points_table(points)
    flagged = [line for line in rows if line.rstrip().endswith("!")]
    assert len(flagged) == sum(not p.stopped for p in points)
    assert any("NOT AT REST within the horizon" in line for line in rows)


def test_the_published_figures_are_compared_only_with_points_at_the_rated_payload(ur5_report):
    """The maker's figures are for the rated 5 kg: a run whose 100 % payload is another one (--max-payload 0) has
    no point to compare, where it used to be compared and flagged far below them."""
    from dataclasses import replace

    from vtm_dynamics.cli.published_comparison import published_table
    from vtm_dynamics.core.stopping.iso10218 import StoppingPoint

    out, _ = ur5_report
    data = json.loads((out / "ur5_stopping_data.json").read_text())
    points = [StoppingPoint(**{**d, "q_test": tuple(d["q_test"]),
                               **{k: math.inf for k in ("time", "time_min", "time_max") if d[k] is None}})
              for d in data["points"]]
    assert {r["joint"] for r in published_table("ur5", points)} == {"shoulder_pan_joint", "shoulder_lift_joint",
                                                                     "elbow_joint"}
    unloaded = [replace(p, payload=0.0) if p.payload_fraction == 1.0 else p for p in points]
    assert published_table("ur5", unloaded) == []


def test_a_point_past_a_joint_limit_has_no_value_for_safety_calculations_in_the_table():
    from vtm_dynamics.cli.stopping_report import points_table
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.robot.catalogue import ROBOTS
    from vtm_dynamics.core.robot.model import RobotModel
    from vtm_dynamics.core.stopping.iso10218 import StoppingTestSpec, stopping_points

    d = ROBOTS["ur5"]
    robot = RobotModel.from_urdf_file(d.urdf_path())
    brakes = brakes_from_config(robot, d.brakes_path())
    low = float(robot.model.lowerPositionLimit[robot.joint("elbow_joint").idx_q])
    # the elbow test 10 mrad inside the elbow's lower limit, moving towards it at pi rad/s: its stop runs past it
    spec = StoppingTestSpec(joints=("elbow_joint",), fold_joints=("elbow_joint",), max_speeds=(math.pi,),
                            max_payload=d.rated_payload, payload_frame="tool0",
                            base_pose=(0.0, -1.5, low + 0.01, -1.0, 0.5, 0.0), categories=(0,), speed_levels=(1.0,),
                            extension_levels=(1.0,), payload_levels=(1.0,), hold_others=True)
    (p,) = stopping_points(robot, brakes, spec)
    lines = points_table([p])
    row = lines[3]
    assert row.rstrip().endswith("NOT VALID: past a limit #")
    assert f"{p.angle_max:.3f} / " not in row  # no value for safety calculations
    assert any(line.startswith("# PAST A JOINT LIMIT (1 points") for line in lines)
    assert any("elbow_joint reaches" in line for line in lines)


def test_category_1_points_keep_the_ramp_within_the_given_torque_limits_and_the_report_says_which(tmp_path):
    """The base turns alone about its vertical axis (no gravity, the other joints at rest: no Coriolis or
    centrifugal torque on it), so its ramp within a base limit L lasts (M_00 + armature) v / L, M_00 of the test
    pose with the point's payload, and the base travels v T / 2. 40 N m is below what 20 rad/s^2 needs at every
    point. Before, vtm-stopping-data had no --torque-limits: every ramp took v / decel."""
    import numpy as np

    from vtm_dynamics.core.estop.payload import with_payload
    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf

    out = tmp_path / "c1"
    limit, decel, armature = 40.0, 20.0, 2.0  # armature: shoulder_pan_joint in config/ur5_brakes.yaml
    assert main(["UR5", "--category", "1", "--decel", str(decel), "--torque-limits", str(limit), "1e4", "1e4", "1e4",
                 "1e4", "1e4", "--out", str(out)]) == 0
    data = json.loads((out / "ur5_stopping_data.json").read_text())
    assert data["spec"]["category1_torque_limits"] == [limit] + [1e4] * 5
    assert any("drive torque limits: 40 10000 10000 10000 10000 10000 N m" in line for line in data["assumptions"])
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    base = [p for p in data["points"] if p["joint"] == "shoulder_pan_joint"]
    assert len(base) == 27
    for p in base:
        model = with_payload(robot, p["payload"], data["spec"]["payload_frame"]) if p["payload"] else robot
        T = (model.mass_matrix(np.array(p["q_test"]))[0, 0] + armature) * p["speed"] / limit
        assert T > p["speed"] / decel  # the limit lengthens every ramp
        assert p["time"] == pytest.approx(T, rel=1e-5)
        assert p["angle"] == pytest.approx(p["speed"] * T / 2.0, rel=1e-5)


def test_the_payload_hangs_on_the_robots_payload_frame_whatever_tcp_frame_is_reported():
    """``--tcp-frame wrist_3_link`` hung the 5 kg payload on wrist_3_link where vtm-predict, the map and the node
    hang it on tool0: the shoulder's stop at 100/100/100 took 0.4777820 s, vtm-predict 0.4778381 s for the same
    state and payload. The point is now vtm-predict's stop, its distance measured at the frame asked for."""
    from dataclasses import replace

    import numpy as np

    from vtm_dynamics.cli.predict import run_prediction
    from vtm_dynamics.cli.stopping_data import build_parser, spec_for
    from vtm_dynamics.cli.stopping_robots import load_robot
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.stopping.iso10218 import stopping_points

    loaded = load_robot("ur5")
    spec = spec_for(loaded, build_parser().parse_args(["ur5", "--tcp-frame", "wrist_3_link", "--out", "unused"]))
    one = replace(spec, joints=spec.joints[1:2], fold_joints=spec.fold_joints[1:2], max_speeds=spec.max_speeds[1:2],
                  speed_levels=(1.0,), extension_levels=(1.0,), payload_levels=(1.0,), categories=(0,))
    point = stopping_points(loaded.robot, brakes_from_config(loaded.robot, loaded.brake_config), one)[0]
    v = np.zeros(6)
    v[1] = point.direction * point.speed
    summary, _, _ = run_prediction("ur5", q=point.q_test, v=v, payload=point.payload, tcp_frame="wrist_3_link")
    p = summary.prediction
    assert point.payload == 5.0
    assert point.time == pytest.approx(p.joint_stop_times[1], abs=1e-9)
    assert point.angle == pytest.approx(abs(p.stopping_angles[1]), abs=1e-9)
    assert point.tcp_distance == pytest.approx(p.tcp_straight_distance, abs=1e-9)
    assert (spec.payload_frame, spec.distance_frame) == ("tool0", "wrist_3_link")
