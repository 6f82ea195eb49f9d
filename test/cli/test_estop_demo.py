"""The README's main command: `vtm-estop-demo` runs the graph in one process and reports prediction vs. simulation."""

import json
import os
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from test.ros_helpers import REPO_ROOT, python_executable, ros_subprocess_env


def test_demo_runs_the_graph_prints_the_comparison_and_writes_plots(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run(
        [python_executable(), "-m", "vtm_dynamics.cli.estop_demo", "--output-dir", str(out), "--timeout", "40",
         "--view", str(tmp_path / "stop.html")],
        cwd=REPO_ROOT, env=ros_subprocess_env(), capture_output=True, text=True, timeout=90,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for words in ("robot ur5, stop category 0", "stop time [s]", "TCP path length [m]", "predicted events:",
                  "within tolerance"):
        assert words in proc.stdout, proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["robot"] == "ur5" and summary["within_tolerance"]
    # default UR5 brakes, demo motion at full speed: the stop is a real motion and the two integrations agree
    assert sum(abs(a) for a in summary["predicted"]["stopping_angles_rad"]) > 0.02
    assert summary["max_rest_angle_error_rad"] < 2e-3
    assert abs(summary["predicted"]["stop_time_s"] - summary["simulated"]["stop_time_s"]) < 2e-3
    kinds = [e["kind"] for e in summary["predicted_events"]]
    assert kinds[0] == "engage" and "stick" in kinds
    # latencies on one monotonic clock: the E-stop is published before the predictor handles it, and a stop's last
    # revision is published no earlier than its first prediction
    first, last = summary["trigger_to_prediction_latency_s"], summary["trigger_to_last_revision_latency_s"]
    assert 0 < first <= summary["estop_to_prediction_latency_s"] and last >= first
    assert summary["last_revision"] == summary["scenario_id"]
    for png in ("joint_angles_rates.png", "tcp_path.png"):
        assert os.path.getsize(out / png) > 10_000
    # the 3-D view: the predicted stop beside the reference plant's own motion of it
    page = (tmp_path / "stop.html").read_text(encoding="utf-8")
    scene = json.loads(page.split('id="vtm-scene">', 1)[1].split("</script>", 1)[0])
    assert [r["name"] for r in scene["robots"]] == ["robot", "start", "rest", "reference"]
    assert f"wrote {tmp_path / 'stop.html'}" in proc.stdout


def test_demo_rejects_a_bad_configuration_with_status_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("estop_predictor:\n  ros__parameters:\n    horizon: -1.0\n")
    proc = subprocess.run(
        [python_executable(), "-m", "vtm_dynamics.cli.estop_demo", "--config", str(bad), "--output-dir",
         str(tmp_path / "o")], cwd=REPO_ROOT, env=ros_subprocess_env(), capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert "horizon: must be a finite number > 0 (got -1.0)" in proc.stderr


def test_the_demo_does_not_feed_the_prediction_it_checks_with_the_simulations_standstill():
    """The simulated robot's standstill LOCK, stamped at its own rest time, revised a prediction that ran longer
    than the simulation into one with a lock exactly there, and the demo compared that revision (a 2.2 ms difference
    printed as 2e-8 s, OUTSIDE turned within tolerance). The demo's simulation publishes no standstill lock, with the
    shipped configuration and with every robot it names."""
    from vtm_dynamics.cli.estop_demo import build_parameters, parse_args

    for argv in ([], ["--robot", "planar_3r"], ["--robot", "ur5"]):
        _, sim = build_parameters(parse_args(argv))
        assert sim["lock_on_rest"] is False, argv


def test_a_prediction_outside_the_tolerance_is_reported_and_the_demo_exits_with_status_3(tmp_path):
    """A check that fails must fail the command: with an angle tolerance of 1e-12 rad, far below the fixed-step
    plant's own O(step) error (6.8e-5 rad with the shipped 0.2 ms step), the comparison is outside tolerance. The
    demo said OUTSIDE TOLERANCE and still exited 0."""
    from vtm_dynamics.cli.estop_demo import default_config_path

    with open(default_config_path(), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    config["robot_sim"]["ros__parameters"]["angle_tolerance"] = 1e-12
    tight = tmp_path / "tight.yaml"
    tight.write_text(yaml.safe_dump(config), encoding="utf-8")
    out = tmp_path / "demo"
    proc = subprocess.run(
        [python_executable(), "-m", "vtm_dynamics.cli.estop_demo", "--config", str(tight), "--output-dir", str(out),
         "--timeout", "40", "--no-plots"],
        cwd=REPO_ROOT, env=ros_subprocess_env(), capture_output=True, text=True, timeout=90,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "OUTSIDE TOLERANCE" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert not summary["within_tolerance"] and summary["max_rest_angle_error_rad"] > 1e-12


def test_a_prediction_that_fails_ends_the_demo_with_its_reason_and_status_3(tmp_path):
    """A horizon of 0.03 s, shorter than the 0.062 s stop: the predictor answers success=false ("not at rest within
    the horizon"). The demo waited out its whole timeout and then blamed the simulated robot ("the simulated robot
    did not stop", status 1), which had stopped. It now gives the predictor's reason at once, with status 3."""
    from vtm_dynamics.cli.estop_demo import default_config_path

    with open(default_config_path(), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    config["estop_predictor"]["ros__parameters"]["horizon"] = 0.03
    short = tmp_path / "short.yaml"
    short.write_text(yaml.safe_dump(config), encoding="utf-8")
    proc = subprocess.run(
        [python_executable(), "-m", "vtm_dynamics.cli.estop_demo", "--config", str(short), "--output-dir",
         str(tmp_path / "demo"), "--timeout", "40", "--no-plots"],
        cwd=REPO_ROOT, env=ros_subprocess_env(), capture_output=True, text=True, timeout=90,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "the predictor answered the E-stop with a failure" in proc.stderr
    assert ": not at rest within the horizon (0.030 s)" in proc.stderr
    assert "did not stop" not in proc.stderr and "timeout" not in proc.stderr

def _stop_seen_by_the_demo(timings, estop_wall):
    """The objects the demo summarizes after one stop of a 2-joint robot, with the given publication timings."""
    from vtm_dynamics.nodes.robot_sim import StopComparison

    names = ("j1", "j2")
    comparison = StopComparison(
        scenario_id=timings[-1].scenario, joint_names=names, predicted_rest=np.array([0.1, 0.2]),
        simulated_rest=np.array([0.1, 0.2]), max_angle_error=0.0, predicted_stop_time=0.05,
        simulated_stop_time=0.05, predicted_tcp_path=0.03, simulated_tcp_path=0.03, predicted_tcp_straight=0.02,
        simulated_tcp_straight=0.02, within_tolerance=True)
    sim = SimpleNamespace(comparison=comparison, robot=SimpleNamespace(name="two"), estop_wall=estop_wall,
                          plant=SimpleNamespace(events=[], dt=2e-4), p={"angle_tolerance": 0.005, "position_tolerance": 0.001,
                                                                          "time_tolerance": 0.005})
    result = SimpleNamespace(events=[], stopped=True, stop_time=0.05, stopping_angles=[0.01, 0.02],
                             brake_energy=1.0, impulse_energy=0.0, holding_torques=[0.0, 1.0])
    outputs = SimpleNamespace(timings=timings, last_result=result,
                              last_prediction=SimpleNamespace(stop_category=0, tcp_frame="tool"))
    robot = SimpleNamespace(joints=[SimpleNamespace(units=("rad", "rad/s", "N m"))] * 2)
    return sim, SimpleNamespace(outputs=outputs, robot=robot)


def test_the_latency_of_the_last_revision_is_timed_from_the_trigger_not_from_its_own_request():
    """Trigger handled at 1000.000 s (monotonic), first prediction published 6 ms later; a revision requested at
    1000.700 s (a state closer to the E-stop instant came late) is published at 1000.760 s. The demo printed that
    revision as "60.0 ms after the trigger" (its time since its own request); it is 760 ms after the trigger. The
    simulated robot published the E-stop at 999.999 s, 7 ms before the first prediction."""
    from vtm_dynamics.cli.estop_demo import format_summary, summarize
    from vtm_dynamics.nodes.stop_outputs import PublishedTiming

    timings = [PublishedTiming("estop-1", 1000.0, 1000.0, 1000.006),
               PublishedTiming("estop-1-rev1", 1000.0, 1000.7, 1000.76)]
    summary = summarize(*_stop_seen_by_the_demo(timings, estop_wall=999.999))
    assert summary["trigger_to_prediction_latency_s"] == pytest.approx(0.006, abs=1e-9)
    assert summary["trigger_to_last_revision_latency_s"] == pytest.approx(0.760, abs=1e-9)
    assert summary["estop_to_prediction_latency_s"] == pytest.approx(0.007, abs=1e-9)
    assert summary["revisions"] == 2 and summary["last_revision"] == "estop-1-rev1"
    text = format_summary(summary)
    assert "6.0 ms after the predictor received the trigger (7.0 ms after the simulated robot fired the E-stop)" \
        in text
    assert "the last of 2 for this stop (estop-1-rev1), published 760.0 ms after the trigger" in text
    assert " 60.0 ms" not in text


def test_the_summary_says_what_the_simulation_can_and_cannot_confirm():
    """The simulated robot shares the predictor's model, brakes and start state: "within tolerance" confirms the
    integration of the stop, and the summary must not let it read as a validation of the model or the brakes."""
    from vtm_dynamics.cli.estop_demo import format_summary, summarize
    from vtm_dynamics.nodes.stop_outputs import PublishedTiming

    text = format_summary(summarize(*_stop_seen_by_the_demo([PublishedTiming("estop-1", 1.0, 1.0, 1.01)], 0.999)))
    assert "within tolerance" in text
    assert "same start state" in text and "not whether the model or the brake values match a real robot" in text


def test_the_latencies_of_the_demo_count_only_the_stop_it_compares():
    """Predictions of an earlier stop in the predictor's record are not revisions of the stop compared."""
    from vtm_dynamics.cli.estop_demo import summarize
    from vtm_dynamics.nodes.stop_outputs import PublishedTiming

    timings = [PublishedTiming("estop-1", 10.0, 10.0, 10.01), PublishedTiming("estop-1-rev1", 10.0, 10.2, 10.21),
               PublishedTiming("estop-2", 20.0, 20.0, 20.008)]
    summary = summarize(*_stop_seen_by_the_demo(timings, estop_wall=19.999))
    assert summary["revisions"] == 1 and summary["last_revision"] == "estop-2"
    assert summary["trigger_to_last_revision_latency_s"] == pytest.approx(0.008, abs=1e-9)


def test_the_simulated_robot_measures_the_tcp_frame_the_prediction_reports(tmp_path):
    """A configuration naming wrist_3_link for the predictor and tool0 for the simulated robot printed the
    predictor's frame above TCP rows whose simulated column was tool0's. Both now measure the predictor's frame,
    whichever section names it."""
    from vtm_dynamics.cli.estop_demo import build_parameters, default_config_path, parse_args

    with open(default_config_path(), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    for predictor_frame, sim_frame in (("wrist_3_link", "tool0"), ("", "wrist_3_link")):
        config["estop_predictor"]["ros__parameters"]["tcp_frame"] = predictor_frame
        config["robot_sim"]["ros__parameters"]["tcp_frame"] = sim_frame
        path = tmp_path / "frames.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        pred, sim = build_parameters(parse_args(["--config", str(path)]))
        assert sim["tcp_frame"] == pred["tcp_frame"] == predictor_frame


def test_a_track_joints_travel_is_printed_in_millimetres_and_metres_not_as_an_angle():
    """The UR5 on a braked linear track: the track stopped after 37 mm. Before, its row read 2.120 under
    "stop angle [deg]" (0.037 taken for rad) and its rest position and force sat under [rad] and [N m]."""
    from vtm_dynamics.cli.estop_demo import format_summary

    names = ["track_joint", "elbow_joint"]
    side = {"stop_time_s": 0.084, "tcp_path_m": 0.058, "tcp_straight_m": 0.056,
            "rest_positions_rad": [0.537, 1.3739]}
    summary = {
        "robot": "ur5", "stop_category": 0, "tcp_frame": "tool0", "joint_names": names,
        "predicted": {**side, "stopping_angles_rad": [0.037, -0.0262], "brake_energy_J": 27.5,
                      "impulse_energy_J": 0.0, "holding_torques_Nm": [150.0, -15.62]},
        "simulated": {**side, "integration_step_s": 2e-4},
        "max_rest_angle_error_rad": 7e-5, "max_rest_position_error_m": 3e-6, "within_tolerance": True,
        "tolerances": {"angle_rad": 0.005, "position_m": 0.001, "time_s": 0.005},
        "joint_units": {"position": ["m", "rad"], "velocity": ["m/s", "rad/s"], "effort": ["N", "N m"]},
        "trigger_to_prediction_latency_s": None, "predicted_events": [],
    }
    lines = format_summary(summary).splitlines()
    track = next(line for line in lines if line.strip().startswith("track_joint")).split()
    elbow = next(line for line in lines if line.strip().startswith("elbow_joint")).split()
    assert track[1:5] == ["37.000", "0.53700", "0.53700", "150.00"] and track[5:] == ["mm;", "m;", "N"]
    assert elbow[1] == "-1.501" and elbow[5:] == ["deg;", "rad;", "N", "m"]
    assert not any("[deg]" in line or "[rad]" in line for line in lines)
    # the check's line gave one error and one tolerance "in rad or m" for both kinds of joint; each has its own
    assert any("max |rest angle error| 7.00e-05 rad, max |rest position error| 3.00e-06 m (tolerance 0.005 rad "
               "and 0.001 m, stop time 0.005 s)" in line for line in lines)


@pytest.mark.parametrize("text, words", [
    ("[" * 20_000 + "]" * 20_000, "nested deeper than"),  # was RecursionError out of the YAML composer
    ("a: " + "x" * (1024 * 1024), "bytes"),
])
def test_a_configuration_beyond_the_limits_is_one_line_before_ros_starts(tmp_path, capsys, text, words):
    from vtm_dynamics.cli.estop_demo import main

    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    assert main(["--config", str(config), "--output-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vtm-estop-demo: cannot read the configuration: config:") and words in err
    assert "\n" not in err


def test_a_configuration_that_is_no_regular_file_is_refused_without_reading(tmp_path, capsys):
    from vtm_dynamics.cli.estop_demo import main

    os.mkfifo(tmp_path / "config.yaml")  # was opened for reading: blocked for ever, waiting for a writer
    assert main(["--config", str(tmp_path / "config.yaml"), "--output-dir", str(tmp_path / "o")]) == 2
    assert "config: not a regular file: config.yaml" in capsys.readouterr().err
