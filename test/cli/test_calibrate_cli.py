"""vtm-calibrate end to end: the brake YAML it writes is what vtm-predict and the predictor load (round trip), the
replay of the same bag with that YAML agrees, and bad input leaves no partial YAML, report or plot behind."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from test.recordings.recordings_testdata import PRIOR, samples, ur5
from vtm_dynamics.cli import calibrate, predict
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.robot.catalogue import PLANAR_3R
from vtm_dynamics.recordings.simulated import write_simulated_bag


@pytest.fixture(scope="module")
def calibrated(truth_bag, tmp_path_factory):
    out = tmp_path_factory.mktemp("calibrated")
    args = calibrate.build_parser().parse_args([
        truth_bag, "--robot", "ur5", "--prior", PRIOR, "--out", str(out / "fitted.yaml"),
        "--report", str(out / "fit.json"), "--plots", str(out / "plots"), "--holdout", "2"])
    lines: list[str] = []
    ident, comp, held = calibrate.run(args, say=lines.append)
    return out, ident, comp, held, "\n".join(lines)


def test_written_yaml_round_trips_into_the_brakes_that_were_fitted(calibrated):
    out, ident, _, _, _ = calibrated
    robot = ur5()
    loaded = brakes_from_config(robot, str(out / "fitted.yaml"))
    for b in ident.brakes:
        i = robot.joint(b.joint).idx_v
        for field in ("engage_delay", "sliding_torque", "holding_torque", "viscous"):
            assert getattr(loaded, field)[i] == getattr(b, field), (b.joint, field)
    text = (out / "fitted.yaml").read_text()
    written = [e for e in ident.not_identifiable if e.prior == e.prior]  # a prior of None is not written
    assert text.count("# not identified") == len(written) > 0


def test_report_plots_and_summary(calibrated):
    out, ident, comp, held, printed = calibrated
    report = json.loads((out / "fit.json").read_text())
    assert len(report["stops"]) == len(comp) == 6 and len(report["held_out"]) == len(held) == 2
    unknown = [p for p in report["parameters"] if not p["identifiable"]]
    assert unknown and all(p["value"] is None and p["test_motion"] for p in unknown)
    assert len(os.listdir(out / "plots")) == 8
    assert "not identifiable from these stops" in printed and "held-out stops (2)" in printed


def test_predict_loads_the_yaml_and_replays_the_bag_the_same(calibrated, truth_bag, capsys):
    out, _, comp, held, _ = calibrated
    assert predict.main(["ur5", "--brakes", str(out / "fitted.yaml")]) == 0
    capsys.readouterr()
    assert predict.main(["ur5", "--bag", truth_bag, "--brakes", str(out / "fitted.yaml"),
                         "--json", str(out / "replay.json"), "--step", "0.01"]) == 0
    replay = json.loads((out / "replay.json").read_text())["stops"]
    for mine, theirs in zip(replay, comp + held):
        np.testing.assert_allclose(mine["predicted_angles_rad"], theirs.predicted_angles, atol=1e-9)


def _bad_run(tmp_path, argv, capsys):
    out = tmp_path / "out"
    out.mkdir(parents=True)
    code = calibrate.main(argv + ["--out", str(out / "b.yaml"), "--report", str(out / "r.json"),
                                  "--plots", str(out / "plots")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("vtm-calibrate: error: ") and "\n" not in err, err
    assert os.listdir(out) == [], "partial output left behind"
    return err


def test_bad_input_is_one_line_and_leaves_nothing_behind(tmp_path, capsys):
    two = samples(2, seed=5)
    bag = write_simulated_bag(str(tmp_path / "b"), two, "mcap")
    assert "no trigger topic '/plc/stop'" in _bad_run(tmp_path / "1", [bag, "--trigger-topic", "/plc/stop"], capsys)
    assert "no joint-state topic" in _bad_run(tmp_path / "2", [bag, "--joint-topic", "/js"], capsys)
    assert "'stop' does not exist in std_msgs/msg/Bool" in _bad_run(
        tmp_path / "3", [bag, "--trigger-field", "stop"], capsys)
    assert "joints do not match the model" in _bad_run(
        tmp_path / "4", [bag, "--urdf", PLANAR_3R.urdf_path(), "--prior", PLANAR_3R.brakes_path()],
        capsys)
    cut = write_simulated_bag(str(tmp_path / "cut"), two, "sqlite3", drop_after=two["trigger_times"][-1] + 0.01)
    assert "cut off by the end of the recording" in _bad_run(tmp_path / "5", [cut], capsys)
    (tmp_path / "empty").mkdir()
    assert "not a readable rosbag2 recording" in _bad_run(tmp_path / "6", [str(tmp_path / "empty")], capsys)
    assert "assume: 'stribeck_speed=0.2' is not FIELD=REL" in _bad_run(
        tmp_path / "7", [bag, "--assume", "stribeck_speed=0.2"], capsys)
    assert "assume: 'stribeck_velocity=-1' is not FIELD=REL" in _bad_run(
        tmp_path / "8", [bag, "--assume", "stribeck_velocity=-1"], capsys)


def test_a_prior_breakaway_below_the_fitted_sliding_torque_still_gives_a_loadable_yaml(truth_bag, tmp_path):
    """The prior's (unfitted) breakaway 28.8 N m lies below the elbow's true sliding torque 55.7 N m: the written
    YAML must raise it to the fitted sliding torque, saying so, or vtm-predict refuses the file."""
    import dataclasses

    from test.recordings.recordings_testdata import prior_brakes
    from vtm_dynamics.cli import stop_report
    from vtm_dynamics.core.estop.identification import FitParameter, identify_brakes
    from vtm_dynamics.recordings.bag_files import read_recording
    from vtm_dynamics.recordings.stops import find_stops

    robot = ur5()
    prior = [dataclasses.replace(b, sliding_torque=0.6 * b.sliding_torque, breakaway_torque=0.62 * b.sliding_torque,
                                 stribeck_velocity=0.05)
             if b.joint == "elbow_joint" else b for b in prior_brakes(robot).brakes]
    stops = find_stops(read_recording(truth_bag), robot)[:2]
    ident = identify_brakes(robot, prior, stops, [FitParameter("elbow_joint", "sliding_torque")])
    path = stop_report.write_atomic(str(tmp_path / "b.yaml"), stop_report.brake_yaml(ident, ["truth"]))
    loaded = brakes_from_config(robot, path)  # raises if breakaway < sliding or holding < breakaway
    i = robot.joint("elbow_joint").idx_v
    assert loaded.sliding_torque[i] > 0.62 * prior_brakes(robot).sliding_torque[i]  # the case was exercised
    assert loaded.holding_torque[i] >= loaded.breakaway_torque[i] >= loaded.sliding_torque[i]
