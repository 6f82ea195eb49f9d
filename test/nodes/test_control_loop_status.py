"""The controller's cycle status says when the commanded motion cannot be produced under the active constraints,
instead of OK: a joint-space trajectory that moves a locked joint (WARN, naming it), and task coordinates that no
longer determine the motion (ERROR). Both used to report OK while the demand went unmet (0.5 rad off after 3 s).

The ROS-free control loop is driven on a simulated clock; the plant is the arm with its locked joint's unit row,
solved here by a KKT system of its own (M qdd + h = tau - E^T lambda, E qdd = 0)."""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from test.nodes.controller_harness import PLANAR_3R, trajectory_message
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes.control_loop import STATS, ControlLoop
from vtm_dynamics.nodes.controller_parameters import PARAMETERS
from vtm_dynamics.nodes.diagnostics import ERROR, OK, WARN
from vtm_dynamics.nodes.work_queue import WorkQueue

STEP = 0.004  # [s] of the simulated clock per cycle


@pytest.fixture
def run_locked():
    workers = []

    def run(params: dict, locked: str, names: list[str], goal: list[float], task: bool, seconds: float = 1.5):
        """Cycles of a loop with ``locked`` held, following a 1 s trajectory of ``names`` to ``goal``; returns the
        (level, reason) of every cycle."""
        p = P.values(PARAMETERS, {"urdf_path": PLANAR_3R, **params})
        worker = WorkQueue("test_status", lambda err: None)
        workers.append(worker)
        loop = ControlLoop(p, dict.fromkeys(STATS, 0), lambda level, text: True, worker)
        loop.configure(open(PLANAR_3R, encoding="utf-8").read(), PLANAR_3R, strict=True)
        robot = loop.setup.robot
        joints = list(robot.joint_names)
        q, v, now = np.array([0.3, -0.4, 0.5]), np.zeros(3), 100.0

        def state():
            msg = JointState(name=joints, position=list(q), velocity=list(v))
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(now), int(round((now % 1) * 1e9))
            return msg

        loop.receive_state(state(), now)
        loop.lock(True, [locked])
        zeros = [[0.0] * len(names)]
        loop.intake.submit(serialize_message(trajectory_message(names, [1.0], [goal], zeros, zeros, 0.0)), task=task)
        E = np.eye(3)[[joints.index(locked)]]
        seen = []
        for _ in range(int(seconds / STEP)):
            loop.receive_state(state(), now)
            cycle = loop.update(now)
            seen.append((cycle.level, cycle.reason))
            tau = np.zeros(3) if cycle.efforts is None else np.asarray(cycle.efforts)
            M, h = robot.mass_matrix(q), robot.bias_forces(q, v)
            qdd = np.linalg.solve(np.block([[M, E.T], [E, np.zeros((1, 1))]]), np.concatenate([tau - h, [0.0]]))[:3]
            v = v + STEP * qdd
            q = q + STEP * v
            now += STEP
        return seen

    yield run
    for w in workers:
        w.stop()


def test_a_trajectory_that_moves_a_locked_joint_is_reported_with_the_joint_it_cannot_move(run_locked):
    seen = run_locked({}, "joint2", ["joint1", "joint2", "joint3"], [0.3, 0.1, 0.5], task=False)
    warned = [reason for level, reason in seen if level == WARN]
    assert len(warned) > 0.8 * len(seen)
    assert all("leaves the active constraints" in r and "joint2" in r for r in warned)


def test_a_trajectory_along_the_constraints_stays_ok(run_locked):
    seen = run_locked({}, "joint2", ["joint1", "joint2", "joint3"], [0.6, -0.4, 0.2], task=False)
    assert {level for level, _ in seen} == {OK}


def test_task_coordinates_that_no_longer_determine_the_motion_are_an_error(run_locked):
    seen = run_locked({"task_joints": ["joint1", "joint3"]}, "joint3", ["joint1", "joint3"], [0.3, 1.0], task=True)
    errors = [reason for level, reason in seen if level == ERROR]
    assert len(errors) > 0.8 * len(seen) and all("task coordinates do not determine" in r for r in errors)


def test_velocities_are_not_estimated_across_a_gap_longer_than_the_state_timeout():
    # positions only, 10 ms apart, the joints moving at 0.5 rad/s; then the publisher is silent for 1 s while the
    # arm turns back; a velocity from the two positions across the gap would be the average over the second
    # (here about -0.3 rad/s instead of 0.5): the cycle after the gap must not run the law on it
    p = P.values(PARAMETERS, {"urdf_path": PLANAR_3R})
    worker = WorkQueue("test_gap", lambda err: None)
    try:
        loop = ControlLoop(p, dict.fromkeys(STATS, 0), lambda level, text: True, worker)
        loop.configure(open(PLANAR_3R, encoding="utf-8").read(), PLANAR_3R, strict=True)
        joints = list(loop.setup.robot.joint_names)

        def receive(t: float, q: float) -> None:
            msg = JointState(name=joints, position=[q] * 3)
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(t), int(round((t % 1) * 1e9))
            loop.receive_state(msg, t)

        for k in range(5):
            receive(100.0 + 0.01 * k, 0.5 * 0.01 * k)
        assert loop.measured().v == pytest.approx([0.5] * 3)
        receive(101.04, 0.02 - 0.3)
        state = loop.measured()
        assert set(state.unavailable_velocity) == set(joints)
        cycle = loop.update(101.04)
        assert cycle.efforts is None and cycle.level == WARN and "velocities unknown" in cycle.reason
        receive(101.05, 0.02 - 0.3 + 0.005)  # the next sample 10 ms later gives an estimate again
        assert loop.measured().v == pytest.approx([0.5] * 3)
        assert "velocities unknown" not in loop.update(101.05).reason
    finally:
        worker.stop()
