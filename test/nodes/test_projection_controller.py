"""projection_controller over real DDS: the node runs in its own process (as `ros2 run` starts it), the test process
plays the robot - a plant that integrates the core's constrained dynamics (RK4 + constraint projection) with the
efforts the node publishes and sends joint states back at 250 Hz of simulated time (the node runs on /clock, so the
closed loop does not depend on how fast this machine is).

Specified here: tracking on the slider-crank with only the crank actuated (passive joints get exactly 0.0, the
error shrinks, the reported constraint forces do no work on admissible motions); a brake locking a joint of a
planar 3R arm mid-motion and releasing it again (same controller object, locked joint commanded zero, the lock
carries the load alone, free joints keep tracking); robustness to bad inputs; parameter validation at start-up and
at runtime.
"""

from __future__ import annotations

import ast
import os
import py_compile

import numpy as np
import pytest
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory
from vtm_msgs.msg import LockEvent

from test.nodes.controller_harness import (  # noqa: F401 - ros is a fixture
    CONFIG,
    EVENTS,
    LATCHED,
    LAUNCH,
    PLANAR_3R,
    SLIDER_CRANK,
    T0,
    ControllerProcess,
    Outputs,
    Plant,
    latest_diag,
    ros,
    trajectory_message,
    wait_for_subscribers,
)
from test.ros_helpers import spin_until
from vtm_dynamics.core.projection.simulation import ConstraintSet
from vtm_dynamics.core.robot.constraints import JointLock, constraints_from_extension
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.projection.projector import project_velocity

BRANCH = np.array([1.0, -2.0, 1.0])  # slider-crank branch q = BRANCH * theta (q2 = -2 q1, q3 = q1)


# ---------------------------------------------------------------------------------------------------- tracking
def test_slider_crank_driven_by_the_crank_alone_tracks_and_gives_passive_joints_exactly_zero(ros, tmp_path):
    """Only the crank is actuated (rod and slider joints passive, Aghili eqs. (55)-(62)); desired crank motion
    theta(t) = 0.6 + 0.2 sin(2 t) on the branch, the plant starts 0.3 rad behind at rest. Gains kp = 25, kd = 10
    (critically damped at 5 rad/s)."""
    node, executor = ros
    name, controller = "pc_track", "track_effort"
    robot = RobotModel.from_urdf_file(SLIDER_CRANK)
    cs = ConstraintSet(constraints_from_extension(robot))
    proc = ControllerProcess(tmp_path, name, f"urdf_path:={SLIDER_CRANK}", f"controller_name:={controller}",
                             "joints:=[crank_joint, rod_joint, slider_joint]",
                             "passive_joints:=[rod_joint, slider_joint]", "use_sim_time:=true",
                             "diagnostic_period:=0.1")
    out = Outputs(node, name, controller)
    plant = Plant(node, robot, cs, BRANCH * 0.3, robot.joint_names, out)
    pub_traj = node.create_publisher(JointTrajectory, f"/{name}/trajectory", 10)
    try:
        wait_for_subscribers(executor, pub_traj, plant.pub_state, plant.pub_clock)
        ts = np.arange(0.0, 3.0 + 1e-9, 0.05)
        th, thd, thdd = 0.6 + 0.2 * np.sin(2 * ts), 0.4 * np.cos(2 * ts), -0.8 * np.sin(2 * ts)
        msg = trajectory_message(robot.joint_names, ts, np.outer(th, BRANCH), np.outer(thd, BRANCH),
                                 np.outer(thdd, BRANCH), stamp=T0)
        for _ in range(3):  # anchored at an absolute stamp: receiving it again changes nothing
            pub_traj.publish(msg)
            spin_until(executor, lambda: False, 0.1)
        plant.run(executor, T0 + 3.0)
        assert proc.alive(), proc.output()

        efforts = np.array([c for _, c in out.commands])
        assert len(efforts) > 500 and efforts.shape[1] == 3
        assert np.all(efforts[:, 1] == 0.0) and np.all(efforts[:, 2] == 0.0)  # exactly, not approximately
        assert np.max(np.abs(efforts[:, 0])) > 1.0  # the crank does the work
        t = np.array([h[0] for h in plant.history])
        crank = np.array([h[1][0] for h in plant.history])
        error = np.abs(0.6 + 0.2 * np.sin(2 * (t - T0)) - crank)
        early, late = error[t < T0 + 0.1], error[t > T0 + 2.5]
        assert early.max() > 0.25
        assert late.max() < 0.02 and late.max() < 0.05 * early.max()
        # the plant stayed on the constraint manifold, on the branch
        assert np.max(np.abs(np.array([h[1] for h in plant.history]) @ np.array([2.0, 1.0, 0.0]))) < 1e-6

        # constraint forces: the slider guide carries the weight, and a constraint force does no work on any
        # admissible motion (it lies in R(A^T) = N(A)^perp, here N(A) = span(BRANCH))
        late_reactions = [r for r in out.reactions if r.header.stamp.sec + 1e-9 * r.header.stamp.nanosec > T0 + 1.0]
        assert late_reactions
        for r in late_reactions:
            assert list(r.joint_names) == list(robot.joint_names) and r.method == "projection"
            F = np.array(r.holding_torques)
            assert np.linalg.norm(F) > 0.5
            assert abs(F @ BRANCH) < 1e-9 * np.linalg.norm(F) * np.linalg.norm(BRANCH) + 1e-12
            assert list(r.uniquely_determined) == [False] * 3  # planar loop closed by 5 rows: rank 2, redundant
            assert len(r.wrenches) == 0
        last = out.diagnostics[-1]
        assert (last["rank"], last["dof"], last["controllable"], last["controller_builds"]) == ("2", "1", "true", "1")
        assert last["_level"] == 0 and float(last["passive_residual"]) < 1e-9
    finally:
        node.destroy_publisher(pub_traj)
        plant.close()
        out.close()
        proc.stop()


def test_joint_lock_mid_motion_is_absorbed_by_the_running_controller(ros, tmp_path):
    """Planar 3R arm in a vertical plane tracking sinusoids. At 1 s the brake of joint2 locks (the plant gets the
    lock as a constraint with its inelastic velocity jump, the node a LockEvent); at 2 s it is released.

    The start (at rest, 0.9 rad/s behind the desired motion) asks for 13 kN m at joint1 (M a_d + g), more than
    the 1 kN m of urdf/planar_3r.urdf; the node would saturate (see test_projection_controller_limits.py) and the
    error would not follow the linear error dynamics checked here. So this arm's drives are rated 100 kN m."""
    node, executor = ros
    name, controller = "pc_lock", "lock_effort"
    urdf = tmp_path / "planar_3r_strong_drives.urdf"
    urdf.write_text(open(PLANAR_3R).read().replace('effort="1000"', 'effort="100000"'))
    robot = RobotModel.from_urdf_file(PLANAR_3R)
    proc = ControllerProcess(tmp_path, name, f"urdf_path:={urdf}", f"controller_name:={controller}",
                             "use_sim_time:=true", "diagnostic_period:=0.05", "rate_hz:=250.0")
    out = Outputs(node, name, controller)
    q_mid, amp = np.array([0.3, -0.5, 0.4]), np.array([0.3, 0.2, 0.3])
    plant = Plant(node, robot, ConstraintSet(), q_mid, robot.joint_names, out)
    pub_traj = node.create_publisher(JointTrajectory, f"/{name}/trajectory", 10)
    pub_lock = node.create_publisher(LockEvent, "lock_events", EVENTS)
    t_lock, t_unlock, t_end = T0 + 1.0, T0 + 2.0, T0 + 3.0
    marks: dict[str, float] = {}

    def desired(t):
        return q_mid + amp * np.sin(3 * (t - T0))

    def events(p: Plant) -> None:
        if "lock" not in marks and p.t >= t_lock - 1e-9:
            p.constraints = p.constraints.with_constraint(JointLock("joint2").bind(robot, p.q))
            p.v = project_velocity(p.v, p.constraints.jacobian(robot, p.q), W=robot.mass_matrix(p.q))
            pub_lock.publish(LockEvent(joint_names=["joint2"], action=LockEvent.LOCK, source="test brake"))
            marks["lock"] = p.t
        if "ack" not in marks and "lock" in marks and out.reactions and out.reactions[-1].holding_torques[1] != 0.0:
            marks["ack"] = p.t
        if "unlock" not in marks and p.t >= t_unlock - 1e-9:
            p.constraints = ConstraintSet()
            pub_lock.publish(LockEvent(joint_names=["joint2"], action=LockEvent.UNLOCK, source="test brake"))
            marks["unlock"] = p.t

    try:
        wait_for_subscribers(executor, pub_traj, pub_lock, plant.pub_state, plant.pub_clock)
        ts = np.arange(0.0, 3.0 + 1e-9, 0.05)
        msg = trajectory_message(robot.joint_names, ts, [desired(T0 + s) for s in ts],
                                 [3 * amp * np.cos(3 * s) for s in ts], [-9 * amp * np.sin(3 * s) for s in ts], T0)
        for _ in range(3):
            pub_traj.publish(msg)
            spin_until(executor, lambda: False, 0.1)
        plant.run(executor, t_end, on_step=events)
        assert proc.alive(), proc.output()
        assert "ack" in marks and marks["ack"] - marks["lock"] < 0.2, marks

        # the node kept publishing through both topology changes (counted in simulated time windows)
        times = np.array([t for t, _ in out.commands])
        for a in np.arange(T0, t_end - 0.25, 0.25):
            assert np.count_nonzero((times >= a) & (times < a + 0.25)) > 50, f"command gap at {a:.2f} s"

        # while locked: joint2 is commanded zero (least-norm torque: the brake holds it), and the lock carries
        # force along joint2 only (the reactions on the free joints vanish: F lies in R(A^T) = span(e_2))
        locked = np.array([c for t, c in out.commands if marks["ack"] + 0.02 < t < marks["unlock"]])
        assert len(locked) > 100
        assert np.max(np.abs(locked[:, 1])) < 1e-9
        held = [np.array(r.holding_torques) for r in out.reactions
                if marks["ack"] < r.header.stamp.sec + 1e-9 * r.header.stamp.nanosec < marks["unlock"] - 0.01]
        assert held and all(abs(F[0]) <= 1e-9 * max(1.0, abs(F[1])) and abs(F[2]) <= 1e-9 * max(1.0, abs(F[1]))
                            for F in held)
        assert max(abs(F[1]) for F in held) > 100.0  # the brake carries the arm's weight (about 260 N m)
        assert all(r.uniquely_determined[1] for r in out.reactions[-5:])  # one lock row: full row rank

        # before the lock: the error follows e'' + kd e' + kp e = 0 (kp = 25, kd = 10) from the brake release on,
        # up to the sampling (250 Hz, zero-order hold, one cycle of transport)
        k0 = next(i for i, (t, q, v) in enumerate(plant.history) if np.any(v != 0.0)) - 1
        tr, qr, vr = plant.history[k0]
        e0, ed0 = desired(tr) - qr, 3 * amp * np.cos(3 * (tr - T0)) - vr
        deviation = max(np.abs(desired(t) - q - (e0 + (ed0 + 5 * e0) * (t - tr)) * np.exp(-5 * (t - tr))).max()
                        for t, q, _ in plant.history[k0:] if t < t_lock)
        assert np.abs(ed0).max() > 0.5 and deviation < 0.15 * np.abs(ed0).max() / (5 * np.e), deviation

        # free joints keep tracking while joint2 is locked; joint2 returns to its trajectory after the release
        hist = [(t, q) for t, q, _ in plant.history]
        free_err = [np.abs((desired(t) - q)[[0, 2]]).max() for t, q in hist if t_lock + 0.7 < t < t_unlock]
        assert max(free_err) < 0.02
        j2_err = [abs((desired(t) - q)[1]) for t, q in hist if t > t_end - 0.2]
        assert max(j2_err) < 0.02
        # the plant's joint2 really stood still while locked
        locked_q2 = [q[1] for t, q in hist if marks["lock"] <= t < marks["unlock"]]
        assert np.ptp(locked_q2) < 1e-9

        # one controller object for the whole run; the lock was a constraint of it, then removed again
        assert all(d["saturated_joints"] == "" for d in out.diagnostics)  # the law was never cut off
        ids = {d["controller_id"] for d in out.diagnostics}
        assert len(ids) == 1 and {d["controller_builds"] for d in out.diagnostics} == {"1"}
        during = [d for d in out.diagnostics if d.get("locked_joints") == "joint2"]
        assert during and all(d["dof"] == "2" or d["dof"] == "3" for d in during)
        assert any(d["dof"] == "2" for d in during)
        assert out.diagnostics[-1]["locked_joints"] == "" and out.diagnostics[-1]["dof"] == "3"
    finally:
        node.destroy_publisher(pub_traj)
        node.destroy_publisher(pub_lock)
        plant.close()
        out.close()
        proc.stop()


# ---------------------------------------------------------------------------------------------------- robustness
@pytest.fixture(scope="module")
def waiting_node(ros, tmp_path_factory):
    """A controller without urdf_path: it must get its model from a robot_description topic."""
    node, executor = ros
    name, controller = "pc_robust", "robust_effort"
    proc = ControllerProcess(tmp_path_factory.mktemp("robust"), name, "robot_description_topic:=pc_robust_urdf",
                             f"controller_name:={controller}", "joints:=[joint1, joint2, joint3]",
                             "diagnostic_period:=0.05", "rate_hz:=100.0")
    out = Outputs(node, name, controller)
    yield proc, out, name
    out.close()
    proc.stop()


def test_bad_inputs_are_logged_and_the_node_stays_up(ros, waiting_node):
    node, executor = ros
    proc, out, name = waiting_node
    pub_desc = node.create_publisher(String, "pc_robust_urdf", LATCHED)
    pub_js = node.create_publisher(JointState, "joint_states", 20)
    pub_traj = node.create_publisher(JointTrajectory, f"/{name}/trajectory", 10)
    pub_lock = node.create_publisher(LockEvent, "lock_events", EVENTS)
    try:
        wait_for_subscribers(executor, pub_desc, pub_js, pub_traj, pub_lock)
        # no model yet: zero effort for the configured joints, WARN
        assert spin_until(executor, lambda: len(out.commands) > 3, 10.0)
        assert all(np.array_equal(c, np.zeros(3)) for _, c in out.commands)
        assert latest_diag(executor, out, lambda d: True)["_level"] == 1

        # an invalid URDF: logged, node up, ERROR, still zeros
        pub_desc.publish(String(data="<robot name='broken'><link name='a'/><joint name='j' type='revolute'>"))
        d = latest_diag(executor, out, lambda d: d["_level"] == 2)
        assert "robot_description" in d["_message"] and proc.alive()
        # a valid one: the model is built, waiting for joint states (zeros)
        pub_desc.publish(String(data=open(PLANAR_3R).read()))
        d = latest_diag(executor, out, lambda d: d["model"] == "planar_3r")
        assert "joint_states" in d["_message"] and d["controller_builds"] == "1"
        n = len(out.commands)
        spin_until(executor, lambda: len(out.commands) > n + 3, 5.0)
        assert all(np.array_equal(c, np.zeros(3)) for _, c in out.commands[n:])

        names = ["joint1", "joint2", "joint3"]
        bad_states = [
            JointState(name=names, position=[0.1, float("nan"), 0.0]),
            JointState(name=names, position=[0.1, 0.2]),
            JointState(name=names, position=[0.1, 0.2, 0.3], velocity=[0.0]),
        ]
        for m in bad_states:
            pub_js.publish(m)
        d = latest_diag(executor, out, lambda d: int(d["joint_states_rejected"]) >= 3)
        assert "joint_states" in d["_message"] and proc.alive()  # still waiting: nothing bad was merged
        # unknown names next to known ones: the known joints are used
        good = JointState(name=names + ["gripper"], position=[0.1, -0.2, 0.3, 9.0], velocity=[0.0] * 4)
        keep_state = node.create_timer(0.02, lambda: (setattr(good.header, "stamp", node.get_clock().now().to_msg()),
                                                      pub_js.publish(good)))
        d = latest_diag(executor, out, lambda d: "trajectory" in d["_message"])
        assert d["_level"] == 1

        # a trajectory naming a joint the robot does not have is rejected; a good one is accepted
        bad = trajectory_message(["joint1", "joint2", "elbow"], [0.0], [[0.1, -0.2, 0.3]], [[0, 0, 0]], [[0, 0, 0]], 0)
        pub_traj.publish(bad)
        latest_diag(executor, out, lambda d: d["trajectories_rejected"] == "1")
        hold = trajectory_message(names, [0.0], [[0.1, -0.2, 0.3]], [[0, 0, 0]], [[0, 0, 0]], 0)
        pub_traj.publish(hold)
        d = latest_diag(executor, out, lambda d: d["_level"] == 0)
        assert d["trajectories"] == "1" and d["dof"] == "3"
        n = len(out.commands)
        assert spin_until(executor, lambda: len(out.commands) > n + 3, 5.0)
        assert np.linalg.norm(out.commands[-1][1]) > 10.0  # holding the arm against gravity

        # lock events: unknown joints ignored (known ones applied), unknown action ignored
        pub_lock.publish(LockEvent(joint_names=["no_such_joint", "joint2"], action=LockEvent.LOCK))
        d = latest_diag(executor, out, lambda d: d["locked_joints"] == "joint2" and d["dof"] == "2")
        assert d["lock_names_ignored"] == "1"
        pub_lock.publish(LockEvent(joint_names=["joint2"], action=7))
        d = latest_diag(executor, out, lambda d: d["lock_events"] == "2")
        assert d["locked_joints"] == "joint2" and d["controller_builds"] == "1"
        pub_lock.publish(LockEvent(joint_names=["joint2"], action=LockEvent.UNLOCK))
        latest_diag(executor, out, lambda d: d["locked_joints"] == "" and d["dof"] == "3")

        # a different description later does not swap the robot under a running controller
        pub_desc.publish(String(data=open(SLIDER_CRANK).read()))
        spin_until(executor, lambda: False, 0.3)
        d = latest_diag(executor, out, lambda d: True)
        assert d["model"] == "planar_3r" and d["controller_builds"] == "1"

        # stale joint states: zero effort again, WARN
        node.destroy_timer(keep_state)
        d = latest_diag(executor, out, lambda d: "older than" in d["_message"])
        assert d["_level"] == 1
        n = len(out.commands)
        spin_until(executor, lambda: len(out.commands) > n + 3, 5.0)
        assert all(np.array_equal(c, np.zeros(3)) for _, c in out.commands[-3:])

        assert proc.alive()
        log = proc.output()
        for text in ("robot model rejected", "joint_states: message ignored", "ignoring joints the model does not "
                     "have: ['gripper']", "trajectory rejected", "unknown joints ['no_such_joint']",
                     "unknown action 7", "a different robot description arrived"):
            assert text in log, text
    finally:
        for p in (pub_desc, pub_js, pub_traj, pub_lock):
            node.destroy_publisher(p)


def set_parameter(node, executor, target: str, name: str, value) -> tuple[bool, str]:
    client = node.create_client(SetParameters, f"/{target}/set_parameters")
    try:
        assert spin_until(executor, client.service_is_ready, 20.0)
        if isinstance(value, float):
            pv = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=value)
        else:
            pv = ParameterValue(type=ParameterType.PARAMETER_STRING_ARRAY, string_array_value=list(value))
        future = client.call_async(SetParameters.Request(parameters=[ParameterMsg(name=name, value=pv)]))
        assert spin_until(executor, future.done, 20.0)
        result = future.result().results[0]
        return result.successful, result.reason
    finally:
        node.destroy_client(client)


def test_no_parameter_changes_at_run_time(ros, waiting_node):
    """Gains, rates, limits and the state timeout are configuration: another node cannot change them (before,
    kp=1e6, kd=1e4 and state_timeout=0 were accepted)."""
    node, executor = ros
    proc, out, name = waiting_node
    for param, value in (("kp", 1e6), ("kd", 1e4), ("state_timeout", 0.0), ("kp", 36.0), ("rate_hz", 100.0),
                         ("joints", ["joint1"])):
        ok, reason = set_parameter(node, executor, name, param, value)
        assert not ok and param in reason and "\n" not in reason, reason
    d = latest_diag(executor, out, lambda d: "kp" in d)
    assert d["kp"] == "25.0" and d["kd"] == "10.0" and proc.alive()


@pytest.mark.parametrize("params, field", [
    (["kp:=0.0"], "kp:"),
    (["kd:=-2.0"], "kd:"),
    (["rate_hz:=0.1"], "rate_hz:"),
    ([f"urdf_path:={SLIDER_CRANK}", "passive_joints:=[rod_joint, elbow]"], "passive_joints:"),
    ([f"urdf_path:={SLIDER_CRANK}", "joints:=[crank_joint]"], "joints:"),
    (["urdf_path:=/nonexistent/robot.urdf"], "urdf_path:"),
    ([f"urdf_path:={SLIDER_CRANK}", "effort_limit_overrides:=[crank_joint=5000.0]"], "effort_limit_overrides:"),
    ([f"urdf_path:={SLIDER_CRANK}", "effort_limit_overrides:=[elbow=5.0]"], "effort_limit_overrides:"),
    (["effort_limit_overrides:=[crank_joint]"], "effort_limit_overrides:"),
    (["max_trajectory_points:=0"], "max_trajectory_points:"),
    (["default_effort_limit:=-1.0"], "default_effort_limit:"),
])
def test_invalid_start_parameters_stop_the_node_with_a_one_line_reason(tmp_path, params, field):
    proc = ControllerProcess(tmp_path, "pc_bad", *params)
    try:
        assert proc.proc.wait(timeout=30) == 2
    finally:
        proc.stop()
    lines = [ln for ln in proc.output().splitlines() if "cannot start" in ln]
    assert len(lines) == 1 and lines[0].split("cannot start: ")[1].startswith(field), proc.output()


# ---------------------------------------------------------------------------------------------------- launch file
def test_launch_file_is_valid_python_and_starts_this_node_with_the_package_yaml(tmp_path):
    py_compile.compile(LAUNCH, cfile=str(tmp_path / "launch.pyc"), doraise=True)
    tree = ast.parse(open(LAUNCH).read())
    assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert {"vtm_dynamics", "projection_controller", "projection_controller.yaml"} <= strings
    assert os.path.isfile(CONFIG)
