"""No stranger can change a safety parameter: another process on the domain calls the parameter services of every
node of the package (estop_predictor, projection_controller, solvability_reporter, robot_sim) with every parameter
each node lists - its own and the client library's (``use_sim_time``, ...) - with hostile values, values of another
type, deletions and all changes at once. Only the parameters a node lists as live (marker sizes, each with the
reason in docs/ros.md) accept a change, and only within their range; every value the nodes work with is the start
value afterwards.

Before the fix every one of these calls was accepted (``trigger_on_brake_event=false``, ``max_start_state_age=10``,
``brake_config=/etc/hostname``, ``state_timeout=0``, ``kp=1e6``, ``analysis_deadline`` ...).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading

import pytest
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter

from test.nodes.node_harness import TEST_BRAKES
from test.ros_helpers import REPO_ROOT, declared_parameters, python_executable, ros_subprocess_env

NODES = ("/estop_predictor", "/projection_controller", "/solvability_reporter", "/robot_sim")
#: the only parameters that may change at run time, and the values of the attack that lie in their ranges
LIVE = {"/estop_predictor": {"marker_force_scale", "marker_torque_scale"},
        "/solvability_reporter": {"marker_arrow_length", "marker_size"}}
ACCEPTABLE = {"larger"}  # x * 10 + 1 stays in the live ranges; zero and 1e9 do not


def _snapshot(node) -> tuple[dict, dict]:
    """What the node works with (``p``) and every declared parameter's value (None: declared without a value)."""
    return dict(node.p), declared_parameters(node)


@pytest.fixture(scope="module")
def attacked():
    """The four nodes in this process, spun by an executor thread; the attacker in a second process."""
    from vtm_dynamics.nodes.estop_predictor import EstopPredictor
    from vtm_dynamics.nodes.projection_controller import ProjectionController
    from vtm_dynamics.nodes.robot_sim import RobotSim
    from vtm_dynamics.nodes.solvability_reporter import SolvabilityReporter

    context = rclpy.Context()
    rclpy.init(context=context)
    planar = os.path.join(REPO_ROOT, "urdf", "planar_3r.urdf")
    nodes = [
        EstopPredictor(context=context, parameter_overrides=[
            Parameter("robot", value="ur5"), Parameter("brake_config", value=TEST_BRAKES),
            Parameter("ghost_rate", value=0.0)]),
        ProjectionController(context=context, parameter_overrides=[Parameter("urdf_path", value=planar)]),
        SolvabilityReporter(context=context, parameter_overrides=[
            Parameter("robot_description_topic", value=""), Parameter("joint_states_topic", value="")]),
        RobotSim(context=context, parameter_overrides=[
            Parameter("brake_config", value=TEST_BRAKES), Parameter("publish_rate", value=250.0),
            Parameter("wait_for_subscribers", value=100), Parameter("startup_timeout", value=3600.0),
            Parameter("publish_robot_description", value=False)]),
    ]
    before = [_snapshot(n) for n in nodes]
    executor = MultiThreadedExecutor(num_threads=2, context=context)
    for n in nodes:
        executor.add_node(n)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        proc = subprocess.run([python_executable(), "-m", "test.nodes.parameter_attacker", *NODES], cwd=REPO_ROOT,
                              env=ros_subprocess_env(), capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        after = [_snapshot(n) for n in nodes]
        yield rows, dict(zip(NODES, zip(before, after))), {n: node for n, node in zip(NODES, nodes)}
    finally:
        executor.shutdown(timeout_sec=5.0)
        thread.join(timeout=10.0)
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown(context=context)


def test_the_stranger_reached_every_node_and_tried_every_listed_parameter(attacked):
    rows, _, nodes = attacked
    assert not [r for r in rows if "error" in r], [r for r in rows if "error" in r]
    for name, node in nodes.items():
        tried = {r["name"] for r in rows if r["node"] == name}
        declared = set(declared_parameters(node))
        assert declared <= tried, (name, declared - tried)
        assert "use_sim_time" in tried  # the clock source: a stranger must not switch a node to /clock


def test_every_change_is_refused_except_live_parameters_within_their_range(attacked):
    rows, _, _ = attacked
    accepted = [(r["node"], r["name"], r["value"]) for r in rows if r["successful"]]
    expected = [(r["node"], r["name"], r["value"]) for r in rows
                if r["name"] in LIVE.get(r["node"], ()) and r["value"] in ACCEPTABLE]
    assert sorted(accepted) == sorted(expected)
    for r in rows:
        if not r["successful"]:
            assert r["reason"] and "\n" not in r["reason"], r


def test_the_safety_parameters_named_in_the_report_are_refused(attacked):
    rows, _, _ = attacked
    refused = {(r["node"], r["name"]) for r in rows if not r["successful"]}
    for name in ("trigger_on_brake_event", "max_start_state_age", "future_stamp_tolerance",
                 "allow_model_replacement", "brake_config", "stop_category", "integration_step", "horizon",
                 "prediction_deadline", "use_sim_time"):
        assert ("/estop_predictor", name) in refused, name
    for name in ("state_timeout", "kp", "kd", "force_integral_gain"):
        assert ("/projection_controller", name) in refused, name
    for name in ("max_description_bytes", "max_links", "analysis_deadline"):
        assert ("/solvability_reporter", name) in refused, name


def test_every_value_the_nodes_use_is_the_start_value_after_the_attack(attacked):
    _, states, _ = attacked
    for name, ((p_before, declared_before), (p_after, declared_after)) in states.items():
        live = LIVE.get(name, set())
        assert {k: v for k, v in p_after.items() if k not in live} == \
               {k: v for k, v in p_before.items() if k not in live}, name
        assert {k: v for k, v in declared_after.items() if k not in live} == \
               {k: v for k, v in declared_before.items() if k not in live}, name
