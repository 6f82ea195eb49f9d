"""The README's main command: `vtm-estop-demo` runs the graph in one process and reports prediction vs. simulation."""

import json
import os
import subprocess

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
