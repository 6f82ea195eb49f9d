"""End to end over real DDS, each node in its own process as `ros2 run` would start it, with the shipped YAML:
robot_sim publishes joint states at 500 Hz, fires the E-stop, brakes its plant to rest; estop_predictor predicts
the stop from the joint state stamped at the E-stop instant; the prediction's rest pose matches the simulated one.

Stated tolerance: the simulated rest pose comes from a fixed-step (2e-4 s) semi-implicit Euler plant that resolves
stick events only to its step, an O(dt) error of about |v| dt ~ 3e-4 rad per joint at these speeds; the predictor
locates events exactly. We require agreement within 2e-3 rad per joint and 2e-3 s in stop time.
"""

import os
import subprocess

import numpy as np
import pytest
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from vtm_dynamics.core.estop.braked_plant import demo_motion
from vtm_msgs.msg import BrakeEvent, StopPrediction

from test.nodes.node_harness import TEST_BRAKES, UR5_JOINTS, first_positions, init_rclpy, last_positions
from test.ros_helpers import REPO_ROOT, python_executable, ros_subprocess_env, spin_until, stop_process

CONFIG = os.path.join(REPO_ROOT, "config", "estop_predict.yaml")
ANGLE_TOL = 2e-3  # [rad]
TIME_TOL = 2e-3  # [s]


def _start(module: str, *params: str) -> subprocess.Popen:
    cmd = [python_executable(), "-m", module, "--ros-args", "--params-file", CONFIG]
    for p in params:
        cmd += ["-p", p]
    return subprocess.Popen(cmd, cwd=REPO_ROOT, env=ros_subprocess_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _stop(proc: subprocess.Popen) -> str:
    stop_process(proc)
    return proc.stdout.read() if proc.stdout else ""


@pytest.fixture(scope="module")
def ros():
    init_rclpy()
    yield
    rclpy.try_shutdown()


def test_predicted_rest_pose_matches_the_simulated_stop_across_processes(ros):
    node = rclpy.create_node("estop_graph_test")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    predictions, rests, diagnostics, brakes = [], [], [], []
    latched = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    node.create_subscription(StopPrediction, "stop_prediction", predictions.append, 10)
    node.create_subscription(JointState, "rest_joint_states", rests.append, latched)
    node.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 50)
    node.create_subscription(BrakeEvent, "brake_events", brakes.append, 10)
    predictor = _start("vtm_dynamics.nodes.estop_predictor", f"brake_config:={TEST_BRAKES}")
    sim = None
    try:
        assert spin_until(executor, lambda: node.count_publishers("stop_prediction") > 0, 30.0), "predictor not up"
        # the sim starts its motion once the predictor and this test subscribe to brake_events (discovery of a new
        # process can take seconds); the E-stop fires estop_time (shipped YAML) later
        sim = _start("vtm_dynamics.nodes.robot_sim", f"brake_config:={TEST_BRAKES}", "wait_for_subscribers:=2")

        def checked() -> bool:
            return any(s.values for d in diagnostics for s in d.status)

        done = spin_until(executor, lambda: checked() and rests and predictions and brakes, 30.0)
        spin_until(executor, lambda: False, 0.3)  # a revised prediction, if any, arrives now
    finally:
        out_sim = _stop(sim) if sim is not None else ""
        out_pred = _stop(predictor)
        executor.remove_node(node)
        node.destroy_node()
    report = f"\n--- sim\n{out_sim}\n--- predictor\n{out_pred}"
    assert done, f"no stop: {len(diagnostics)} diagnostics, {len(rests)} rests, {len(predictions)} predictions, " \
                 f"{len(brakes)} brake events" + report
    pred = predictions[-1]
    assert pred.success and pred.scenario_id.startswith("estop"), pred.message + report
    # the prediction starts from the state the sim published AT the E-stop instant (stamp of the brake event),
    # which is the demo motion of the YAML evaluated at estop_time
    stamp = brakes[0].header.stamp
    assert (pred.header.stamp.sec, pred.header.stamp.nanosec) == (stamp.sec, stamp.nanosec), report
    sim_params = yaml.safe_load(open(CONFIG, encoding="utf-8"))["robot_sim"]["ros__parameters"]
    motion = demo_motion(6, sim_params["motion_home"], sim_params["motion_amplitude"],
                         sim_params["motion_frequency"], sim_params["motion_phase"] * 6)
    at_estop = motion.state(sim_params["estop_time"])[0]
    assert np.allclose(first_positions(pred.trajectory), at_estop, rtol=0, atol=1e-12), report
    rest = rests[-1]
    assert list(rest.name) == UR5_JOINTS
    err = np.abs(last_positions(pred.trajectory) - np.array(rest.position))
    assert err.max() < ANGLE_TOL, f"rest angle errors {err}" + report
    assert np.linalg.norm(np.array(pred.stopping_angles)) > 20 * ANGLE_TOL, "the stop must be a real motion"
    status = [s for d in diagnostics for s in d.status if s.values and s.name.startswith("robot_sim")][-1]
    values = {kv.key: kv.value for kv in status.values}
    assert abs(float(values["predicted_stop_time_s"]) - float(values["simulated_stop_time_s"])) < TIME_TOL, report
    assert status.level == DiagnosticStatus.OK, status.message + report
    assert "prediction check estop-1" in out_sim and "OK" in out_sim
