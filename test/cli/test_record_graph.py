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


# ------------------------------------------------------------------------------------- stopped with Ctrl-C
PUBLISHER = r'''
import sys, rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
rclpy.init()
node = Node("known_joint_states")
pub = node.create_publisher(JointState, "/joint_states", QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
line = node.create_publisher(Bool, "/estop", 10)
while pub.get_subscription_count() == 0 or line.get_subscription_count() == 0:
    rclpy.spin_once(node, timeout_sec=0.05)
rate = node.create_rate(500)
for k in range(int(sys.argv[1])):
    m = JointState()
    m.header.stamp = node.get_clock().now().to_msg()
    m.name = ["a", "b", "c"]
    m.position = [k * 1e-3 + j for j in range(3)]
    m.velocity = [1.0 + j * 0.01 + k * 1e-6 for j in range(3)]
    pub.publish(m)
    if k % 50 == 0:
        line.publish(Bool(data=k // 50 % 2 == 1))
    rclpy.spin_once(node, timeout_sec=0.002)
print("published", flush=True)
rclpy.spin_once(node, timeout_sec=30.0)
'''
PUBLISHED = 1500


@pytest.fixture(scope="module", params=["SIGINT", "SIGTERM"])
def interrupted(request, tmp_path_factory):
    """vtm-record stopped by SIGINT (Ctrl-C) or SIGTERM (a service manager, ``timeout``, ``kill``) after a publisher
    sent PUBLISHED joint states at about 500 Hz whose values encode their index k; the recorder's IP sockets are
    read while it records. (SIGTERM used to shut rclpy's context down under the writer: a trace, status 1 and the
    bag deleted as incomplete.)"""
    import signal

    from test.ros_helpers import default_signals, inet_sockets

    out = str(tmp_path_factory.mktemp("int") / "stopped")
    env = ros_subprocess_env()
    rec = subprocess.Popen([python_executable(), "-m", "vtm_dynamics.cli.record", out, "--duration", "600"],
                           cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=default_signals)
    pub = subprocess.Popen([python_executable(), "-c", PUBLISHER, str(PUBLISHED)], cwd=REPO_ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        said = pub.stdout.readline()
        sockets = inet_sockets(rec.pid)
        rec.send_signal(getattr(signal, request.param))
        rec_out, rec_err = rec.communicate(timeout=60)
    finally:
        stop_process(rec)
        stop_process(pub)
    assert said.strip() == "published"
    return out, rec.returncode, rec_out, rec_err, sockets


def test_ctrl_c_or_sigterm_ends_the_recording_with_a_complete_bag_and_says_what_it_wrote(interrupted):
    path, code, printed, errors, _ = interrupted
    assert code == 0, errors[-2000:]
    assert "Traceback" not in errors
    said = {t: int(n) for t, n in re.findall(r"(/\w+) (\d+)", printed.splitlines()[-1])}
    assert said == count_messages(path)
    assert 0 < said["/joint_states"] <= PUBLISHED
    assert not [f for f in os.listdir(os.path.dirname(path)) if f.startswith(".")]  # no partial bag left


def test_every_recorded_joint_state_is_the_published_one_in_order_with_its_stamp(interrupted):
    path = interrupted[0]
    rec = read_recording(path)
    assert rec.joints.names == ("a", "b", "c")
    k = np.round(rec.joints.q[:, 0] / 1e-3).astype(int)
    assert np.all(np.diff(k) > 0) and np.all(np.diff(rec.joints.t) > 0)  # nothing reordered or repeated
    expected_q = np.column_stack([k * 1e-3 + j for j in range(3)])
    expected_v = np.column_stack([1.0 + j * 0.01 + k * 1e-6 for j in range(3)])
    np.testing.assert_allclose(rec.joints.q, expected_q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(rec.joints.v, expected_v, rtol=0, atol=1e-12)


def test_the_recorder_holds_loopback_sockets_only(interrupted):
    from test.ros_helpers import is_loopback

    sockets = interrupted[4]
    assert sockets and all(is_loopback(address) for _, address, _ in sockets), sockets
