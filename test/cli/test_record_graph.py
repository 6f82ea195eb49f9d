"""vtm-record on the live graph: robot_sim (its own process, the independent fixed-step plant) moves the UR5 and
fires a category-0 stop; vtm-record (its own process) writes an MCAP bag with the joint states and the stamped
brake event as the trigger. The bag holds what was published (topics, types, counts read back through the
library), its stop is found, and the prediction from the recorded state at the trigger matches what the plant
did (angle within 2 %, time within 5 %: the plant's 2e-4 s step resolves the stick events only to its step)."""

import os
import re
import subprocess

import numpy as np
import pytest

from test.nodes.node_harness import TEST_BRAKES
from test.recordings.recordings_testdata import ur5
from test.ros_helpers import REPO_ROOT, python_executable, ros_subprocess_env, stop_process
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.identification import compare_stops
from vtm_dynamics.recordings.bag_files import bag_summary, count_messages, read_recording
from vtm_dynamics.recordings.stops import find_stops
from vtm_dynamics.recordings.trigger import TriggerRule

CONFIG = os.path.join(REPO_ROOT, "config", "estop_predict.yaml")
BRAKE_ENGAGE = TriggerRule("/brake_events", "vtm_msgs/msg/BrakeEvent", "action", ("ENGAGE",))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("rec") / "sim_stop")
    env = ros_subprocess_env()
    rec = subprocess.Popen(
        [python_executable(), "-m", "vtm_dynamics.cli.record", out, "--trigger-topic", "/brake_events",
         "--trigger-type", "vtm_msgs/msg/BrakeEvent", "--topic", "/estop:std_msgs/msg/Bool", "--duration", "9"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sim = subprocess.Popen(
        [python_executable(), "-m", "vtm_dynamics.nodes.robot_sim", "--ros-args", "--params-file", CONFIG,
         "-p", f"brake_config:={TEST_BRAKES}", "-p", "wait_for_subscribers:=1"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        rec_out, _ = rec.communicate(timeout=60)
    finally:
        stop_process(rec)
        stop_process(sim)
    assert rec.returncode == 0, rec_out
    return out, rec_out


def test_the_bag_holds_what_was_published(recorded):
    path, printed = recorded
    summary = {s.topic: (s.type_name, s.count) for s in bag_summary(path)}
    assert summary["/joint_states"][0] == "sensor_msgs/msg/JointState"
    assert summary["/brake_events"] == ("vtm_msgs/msg/BrakeEvent", 1)  # one ENGAGE, no release (one stop)
    assert summary["/estop"] == ("std_msgs/msg/Bool", 1)
    assert count_messages(path) == {t: c for t, (_, c) in summary.items()}
    said = dict(re.findall(r"(/\w+) (\d+)", printed.splitlines()[-1]))
    assert {t: int(n) for t, n in said.items()} == count_messages(path)  # what the recorder received, all written
    assert summary["/joint_states"][1] > 500  # 500 Hz for several seconds


def test_the_recorded_stop_is_predicted_from_the_recorded_state(recorded):
    path, _ = recorded
    robot = ur5()
    stops = find_stops(read_recording(path, BRAKE_ENGAGE), robot)
    assert len(stops) == 1
    c = compare_stops(robot, brakes_from_config(robot, TEST_BRAKES), stops, "tool0")[0]
    moved = np.abs(c.recorded_angles) > 0.01
    assert moved.any()
    np.testing.assert_allclose(c.predicted_angles[moved], c.recorded_angles[moved], rtol=0.02, atol=1e-3)
    assert c.predicted_time == pytest.approx(c.recorded_time, rel=0.05)
