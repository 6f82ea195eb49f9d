"""projection_controller holds every way a command comes in to one robot: trajectories of task coordinates obey
the URDF's position and velocity limits as joint trajectories do, the force loop's integral cannot wind up, and
the state timeout cannot be switched off. (Before: a task trajectory to 2 rad on a +-1 rad joint started, 1e6 rad
in 0.01 s was accepted, a 9 kN measurement error kept the efforts saturated for seconds after it was gone, and
state_timeout=0 disabled the timeout.)

The node's ROS-free parts are driven directly (``control_loop.ControlLoop`` with its trajectory intake, the
parameters checked by the node's own table), without ROS; the control cycles of the force test run on a simulated
clock against the core's constrained dynamics as the plant, so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import numpy as np
import pytest
import rclpy
from rclpy.parameter import Parameter
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from test.nodes.controller_harness import PLANAR_3R, SLIDER_CRANK, trajectory_message
from vtm_dynamics.core.projection.constraint_wrench import closure_wrench
from vtm_dynamics.core.projection.simulation import ConstraintSet, constrained_dynamics, constrained_step
from vtm_dynamics.core.robot.constraints import constraints_from_extension
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes.control_loop import STATS, ControlLoop
from vtm_dynamics.nodes.controller_parameters import PARAMETERS
from vtm_dynamics.nodes.work_queue import WorkQueue


class _Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def __call__(self, level: str, text: str) -> bool:
        self.lines.append((level, text))
        return True


@pytest.fixture
def controller():
    """Make a control loop from parameters (name, value), its URDF configured as at start-up; stop its worker."""
    workers = []

    def make(*params: tuple[str, object]) -> ControlLoop:
        p = P.values(PARAMETERS, dict(params))
        worker = WorkQueue("test_trajectories", lambda err: None)
        workers.append(worker)
        loop = ControlLoop(p, dict.fromkeys(STATS, 0), _Log(), worker)
        loop.configure(open(p["urdf_path"], encoding="utf-8").read(), p["urdf_path"], strict=True)
        return loop

    yield make
    for w in workers:
        w.stop()


@pytest.fixture(scope="module")
def narrow_3r(tmp_path_factory):
    """The planar 3R arm with joint2 limited to +-1 rad and 1 rad/s."""
    text = open(PLANAR_3R, encoding="utf-8").read()
    first = text.index('<limit lower="-100" upper="100" effort="1000" velocity="100"/>', text.index('name="joint2"'))
    text = text[:first] + '<limit lower="-1" upper="1" effort="1000" velocity="1"/>' + \
        text[first + len('<limit lower="-100" upper="100" effort="1000" velocity="100"/>'):]
    path = tmp_path_factory.mktemp("urdf") / "narrow_3r.urdf"
    path.write_text(text)
    return str(path)


ARM_Q = [0.3, -0.4, 0.5]  # where the arm stands (joint2 inside +-1 rad)


def _send(loop: ControlLoop, names, times, positions, now: float = 100.0) -> str:
    """Hand a task trajectory to the loop's intake and run a control cycle from the arm standing at ``ARM_Q`` (the
    cycle starts a prepared trajectory); return '' if it was accepted and started, else the rejection reason."""
    before = loop.stats["trajectories_rejected"]
    n = len(names)
    msg = trajectory_message(names, times, positions, [[0.0] * n] * len(times), [[0.0] * n] * len(times), 0.0)
    loop.intake.submit(serialize_message(msg), task=True)
    state = JointState(name=["joint1", "joint2", "joint3"], position=ARM_Q, velocity=[0.0] * 3)
    state.header.stamp.sec = int(now)
    loop.receive_state(state, now)
    loop.update(now)
    return loop.intake.last_rejection if loop.stats["trajectories_rejected"] > before else ""


def test_a_task_trajectory_of_a_joint_obeys_its_urdf_position_and_velocity_limits(controller, narrow_3r):
    loop = controller(("urdf_path", narrow_3r), ("task_joints", ["joint2"]))
    assert _send(loop, ["joint2"], [1.0], [[0.5]]) == ""  # inside +-1 rad, 0.5 rad/s
    reason = _send(loop, ["joint2"], [5.0], [[2.0]])
    assert "points[0].positions[joint2]: 2 rad outside [-1, 1]" in reason
    reason = _send(loop, ["joint2"], [1.0, 1.01], [[0.0], [0.9]])  # 90 rad/s between the points
    assert "joint2" in reason and "velocity" in reason.lower(), reason


def test_a_task_trajectory_of_a_frame_point_obeys_the_reach_and_speed_of_the_arm(controller, narrow_3r):
    loop = controller(("urdf_path", narrow_3r), ("task_frame", "tip"), ("task_components", ["x", "angle_y"]))
    assert _send(loop, ["tip.x", "tip.angle_y"], [2.0], [[0.5, 0.3]]) == ""
    started = loop.active
    reason = _send(loop, ["tip.x", "tip.angle_y"], [2.0], [[5.0, 0.0]])  # the arm reaches 3 m
    assert "points[0].positions[tip.x]: 5 m outside" in reason, reason
    reason = _send(loop, ["tip.x", "tip.angle_y"], [0.01], [[0.5, 1e6]])  # 1e6 rad in 0.01 s
    assert "points[0].positions[tip.angle_y]: reached from the measured position" in reason, reason
    reason = _send(loop, ["tip.x", "tip.angle_y"], [1.0, 1.01], [[0.5, 0.0], [0.5, 1e6]])
    assert "points[1].positions[tip.angle_y]" in reason, reason
    assert loop.active is started  # the previous goal continues


def test_the_state_timeout_cannot_be_switched_off():
    from vtm_dynamics.nodes.projection_controller import ProjectionController

    rclpy.init()
    try:
        with pytest.raises(P.ParameterError) as err:
            ProjectionController(parameter_overrides=[Parameter("state_timeout", value=0.0)])
        assert str(err.value).startswith("state_timeout: must lie in")
    finally:
        rclpy.try_shutdown()


def test_a_long_force_measurement_error_does_not_keep_the_efforts_saturated_after_it_is_gone(controller):
    """Slider-crank holding its pose with the guide force loop (G_F 0.25, G_I 6.25 1/s, effort limit 1000 N m);
    the measured guide force is 9 kN off for 1 s, then right again. The efforts saturate while the error lasts and
    leave saturation within 0.3 s of its end (the designed error dynamics decay at 5 1/s); before, the integral
    stored 9 kN s and held the efforts at their limits for seconds."""
    robot = RobotModel.from_urdf_file(SLIDER_CRANK)
    guide = constraints_from_extension(robot)[0]
    cs = ConstraintSet((guide,))
    dt = 0.01
    loop = controller(("urdf_path", SLIDER_CRANK), ("force_control", True), ("force_measurement", "topic"),
                      ("force_gain", 0.25), ("force_integral_gain", 6.25), ("rate_hz", 1.0 / dt),
                      ("publish_reactions", False))
    clock = 100.0
    efforts: list[np.ndarray] = []
    limit = 1000.0
    q, v = np.array([1.0, -2.0, 1.0]) * 0.6, np.zeros(3)
    state = JointState(name=list(robot.joint_names), position=list(q), velocity=list(v))
    loop.receive_state(state, clock)
    hold = trajectory_message(robot.joint_names, [0.0], [q], [np.zeros(3)], [np.zeros(3)], 0.0)
    loop.intake.submit(serialize_message(hold))
    loop.wrench("constraint_wrench_setpoint", "slider_guide", np.array([0.0, 0.0, 20.0, 0.0, 0.0, 0.0]))
    saturated = []
    for k in range(int(2.5 / dt)):
        t = k * dt
        tau = np.zeros(3)
        if efforts:
            tau[:] = efforts[-1]
        w = closure_wrench(robot, guide, q, constrained_dynamics(robot, cs, q, v, tau).constraint_force)
        if t < 1.0:
            w = w + np.array([0.0, 0.0, 9000.0, 0.0, 0.0, 0.0])  # the measurement error
        loop.wrench("constraint_wrench", "slider_guide", np.asarray(w, dtype=float))
        state = JointState(name=list(robot.joint_names), position=list(q), velocity=list(v))
        loop.receive_state(state, clock)
        cycle = loop.update(clock)
        efforts.append(np.zeros(3) if cycle.efforts is None else np.array(cycle.efforts))
        saturated.append((t, bool(np.any(np.abs(efforts[-1]) >= limit - 1e-9))))
        step = constrained_step(robot, cs, q, v, tau, dt, max_step=None)
        q, v = step.q, step.v
        clock += dt
    print("".join("S" if s else "." for _, s in saturated))
    during = [s for t, s in saturated if 0.1 < t < 1.0]
    assert np.mean(during) > 0.7, "the 9 kN error should saturate the efforts"
    after = [t for t, s in saturated if t >= 1.0 and s]
    last = max(after) if after else 1.0
    print(f"efforts saturated until {last - 1.0:.2f} s after the error ended")
    assert last - 1.0 < 0.3
