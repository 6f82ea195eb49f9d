"""projection_controller over real DDS never commands beyond the robot's URDF limits.

The node runs in its own process; the test process plays a planar 3R arm standing still (joint states at 100 Hz of
wall time). The arm's URDF (urdf/planar_3r.urdf) allows +-100 rad, 100 rad/s and 1000 N m per joint; each bar
weighs 108 kg and is 1 m long with its centre of mass in the middle, so holding the arm horizontal needs
m g (0.5 + 1.5 + 2.5) m = 4767.7 N m at joint1, m g (0.5 + 1.5) m = 2119.0 N m at joint2 and m g 0.5 m = 529.7 N m at
joint3 - more than joint1 and joint2 can give.

Specified here: trajectories outside the position limits, faster than the velocity limits, non-finite or longer than
the duration cap are refused as a whole (one log line naming field, point and joint; /diagnostics says why; the
previous goal continues); every published effort lies within [-limit, +limit] (the URDF limit, or a lower
per-joint override), also for the hold of a gravity-loaded arm, with /diagnostics at WARN (never OK) while
saturating; a joint without an effort limit in the URDF needs ``default_effort_limit``.

The nodes run with ``state_timeout`` 2 s: on a loaded machine this process may publish the robot's state late, and
the zero command of a stale state is not what these tests are about.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
from rclpy.serialization import serialize_message
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from test.nodes.controller_harness import (  # noqa: F401 - ros is a fixture
    PLANAR_3R,
    ControllerProcess,
    FixedRobot,
    Outputs,
    latest_diag,
    ros,
    trajectory_message,
    wait_for_subscribers,
)
from test.ros_helpers import spin_until

NAMES = ["joint1", "joint2", "joint3"]
MG = 108.0 * 9.81  # [N] weight of one bar
HORIZONTAL = np.array([math.pi / 2, 0.0, 0.0])  # all three bars horizontal
HOLD_TORQUE = MG * np.array([4.5, 2.0, 0.5])  # [N m] static torques that hold the arm horizontal
HANGING = np.array([0.1, -0.2, 0.3])  # near the bottom: hold torques well inside the limits
URDF_EFFORT = 1000.0  # [N m]


def hold_message(q) -> JointTrajectory:
    return trajectory_message(NAMES, [0.0], [q], [[0.0] * 3], [[0.0] * 3], 0.0)


def points_message(names, rows, times) -> JointTrajectory:
    """A trajectory whose points carry the given field dicts (e.g. {'positions': [...], 'velocities': [...]})."""
    msg = JointTrajectory(joint_names=list(names))
    for t, fields in zip(times, rows):
        pt = JointTrajectoryPoint(**{k: [float(x) for x in v] for k, v in fields.items()})
        pt.time_from_start.sec = int(t)
        pt.time_from_start.nanosec = int(round((t % 1) * 1e9))
        msg.points.append(pt)
    return msg


def commands_after(out: Outputs, n: int, executor, count: int = 20) -> np.ndarray:
    assert spin_until(executor, lambda: len(out.commands) >= n + count, 10.0), "the command stream stopped"
    return np.array([c for _, c in out.commands[n:]])


@contextlib.contextmanager
def controller_at(ros, tmp_path, name: str, urdf: str, pose, *params: str):
    """A controller process ``name`` on ``urdf`` (100 Hz, diagnostics every 0.05 s, ``params``) beside a robot
    standing at ``pose``, up and reporting; yields (process, outputs, trajectory publisher) and ends all of them."""
    node, executor = ros
    controller = f"{name}_effort"
    proc = ControllerProcess(tmp_path, name, f"urdf_path:={urdf}", f"controller_name:={controller}",
                             "diagnostic_period:=0.05", "rate_hz:=100.0", "state_timeout:=2.0", *params)
    out = Outputs(node, name, controller)
    robot = FixedRobot(node, NAMES, pose)
    pub_traj = node.create_publisher(JointTrajectory, f"/{name}/trajectory", 10)
    try:
        wait_for_subscribers(executor, pub_traj, robot.pub)
        latest_diag(executor, out, lambda d: "trajectory" in d["_message"], 20.0)
        yield proc, out, pub_traj
    finally:
        node.destroy_publisher(pub_traj)
        robot.close()
        out.close()
        proc.stop()


def test_the_hold_of_a_gravity_loaded_arm_is_saturated_at_the_effort_limits_and_reported(ros, tmp_path):
    """Holding the horizontal arm needs 4768 / 2119 / 530 N m; joint1 and joint2 may give 1000 N m (URDF), joint3
    is lowered to 200 N m by an override. Every command stays inside, /diagnostics is WARN and says by how much."""
    node, executor = ros
    with controller_at(ros, tmp_path, "pc_sat", PLANAR_3R, HORIZONTAL, "effort_limit_overrides:=[joint3=200.0]") as (
            proc, out, pub_traj):
        pub_traj.publish(hold_message(HORIZONTAL))
        latest_diag(executor, out, lambda d: d["trajectories"] == "1")
        n_diag = len(out.diagnostics)
        efforts = commands_after(out, len(out.commands), executor, 50)
        assert proc.alive(), proc.output()
        limits = np.array([URDF_EFFORT, URDF_EFFORT, 200.0])
        assert np.all(np.abs(efforts) <= limits), np.abs(efforts).max(axis=0)
        # the requested torques exceed every limit here, so each entry sits at its limit with the hold's sign
        assert np.allclose(np.abs(efforts[-10:]), limits)

        spin_until(executor, lambda: len(out.diagnostics) > n_diag + 5, 5.0)
        after = out.diagnostics[n_diag:]
        assert after and all(d["_level"] == 1 for d in after), [(d["_level"], d["_message"]) for d in after]
        last = after[-1]
        assert "saturat" in last["_message"] and all(j in last["_message"] for j in NAMES), last["_message"]
        assert last["saturated_joints"] == "joint1,joint2,joint3"
        excess = dict(item.split("=") for item in last["saturation_excess"].split(","))
        for j, requested, limit in zip(NAMES, HOLD_TORQUE, limits):
            assert float(excess[j]) == pytest.approx(requested - limit, rel=2e-3), (j, excess)
        assert last["effort_limits"] == "joint1=1000.0,joint2=1000.0,joint3=200.0"


def test_targets_outside_the_limits_are_refused_and_the_previous_goal_continues(ros, tmp_path):
    node, executor = ros
    q = [float(x) for x in HANGING]
    cases = [
        ("1e6 rad", points_message(NAMES, [{"positions": [q[0], 1e6, q[2]]}], [1.0]),
         "points[0].positions[joint2]: 1e+06 rad outside [-100, 100]"),
        ("1e300 rad", points_message(["joint3", "joint1", "joint2"], [{"positions": [q[2], q[0], q[1]]},
                                                                       {"positions": [1e300, q[0], q[1]]}], [0.5, 1.0]),
         "points[1].positions[joint3]: 1e+300 rad outside [-100, 100]"),
        ("nan", points_message(NAMES, [{"positions": q}, {"positions": [float("nan"), q[1], q[2]]}], [0.5, 1.0]),
         "points[1].positions[joint1]: nan is not finite"),
        ("velocity", points_message(NAMES, [{"positions": q, "velocities": [0.0, 0.0, 0.0]},
                                            {"positions": q, "velocities": [0.0, 0.0, -250.0]}], [0.5, 1.0]),
         "points[1].velocities[joint3]: -250 rad/s beyond the velocity limit 100 rad/s"),
        ("segment", points_message(NAMES, [{"positions": q}, {"positions": [q[0] + 50.0, q[1], q[2]]}], [0.5, 0.6]),
         "points[1].positions[joint1]: reached from points[0] at 500 rad/s, beyond the velocity limit 100 rad/s"),
        ("duration", points_message(NAMES, [{"positions": q}, {"positions": q}], [0.5, 1e6]),
         "points[1].time_from_start: 1e+06 s beyond max_trajectory_duration 600 s"),
    ]
    with controller_at(ros, tmp_path, "pc_refuse", PLANAR_3R, HANGING, "max_trajectory_duration:=600.0") as (
            proc, out, pub_traj):
        pub_traj.publish(hold_message(HANGING))
        latest_diag(executor, out, lambda d: d["trajectories"] == "1" and d["_level"] == 0)
        hold = commands_after(out, len(out.commands), executor)[-1]
        assert 100.0 < np.abs(hold).max() < URDF_EFFORT  # holding the hanging arm: inside the limits

        for k, (case, msg, text) in enumerate(cases, start=1):
            pub_traj.publish(msg)
            d = latest_diag(executor, out, lambda d: d["trajectories_rejected"] == str(k))
            assert d["trajectories"] == "1", case
            # /diagnostics says why: WARN with the reason, which is also kept as a key
            d = latest_diag(executor, out, lambda d: text in d["last_rejection"])
            assert any(text in e["_message"] and e["_level"] == 1 for e in out.diagnostics
                       if e.get("last_rejection", "").endswith(text)), (case, text)
            # the previous goal (the hold) continues, inside the limits
            efforts = commands_after(out, len(out.commands), executor)
            assert np.allclose(efforts, hold, atol=1e-6 * np.abs(hold).max()), (case, efforts[-1], hold)
            assert proc.alive(), proc.output()

        log = proc.output()
        for case, _, text in cases:
            lines = [ln for ln in log.splitlines() if text in ln]
            assert len(lines) == 1, (case, text, lines)
            assert "trajectory rejected" in lines[0], lines[0]
        # bytes that are no trajectory at all (a publisher can send any serialized data): refused, node up
        good = serialize_message(points_message(NAMES, [{"positions": q}] * 3, [0.5, 1.0, 1.5]))
        rng = np.random.default_rng(3)
        garbage = [b"\x00\x01\x00\x00" + b"\xff" * 64, good[: len(good) // 2], b"\x00\x07\x00\x00" + b"\xff" * 100,
                   b"\x00\x01\x00\x00" + rng.integers(0, 256, 3000).astype(np.uint8).tobytes()]
        for k, raw in enumerate(garbage, start=len(cases) + 1):
            pub_traj.publish(raw)
            latest_diag(executor, out, lambda d: d["trajectories_rejected"] == str(k))
        efforts = commands_after(out, len(out.commands), executor)
        assert np.allclose(efforts, hold, atol=1e-6 * np.abs(hold).max()) and proc.alive()
        # a good trajectory is still accepted afterwards
        pub_traj.publish(points_message(NAMES, [{"positions": q}, {"positions": [q[0] + 0.1, q[1], q[2]]}],
                                        [0.5, 1.0]))
        latest_diag(executor, out, lambda d: d["trajectories"] == "2")


def _planar_3r_text(**replacements: str) -> str:
    text = open(PLANAR_3R).read()
    for old, new in replacements.items():
        assert old in text
        text = text.replace(old, new)
    return text


def test_a_joint_without_effort_limit_needs_default_effort_limit(ros, tmp_path):
    """joint3 of this URDF says effort="0" (no limit given): the node refuses to start unless default_effort_limit
    is set, and then saturates joint3 at that value."""
    node, executor = ros
    lines = open(PLANAR_3R).read().splitlines(keepends=True)
    index = [i for i, ln in enumerate(lines) if 'effort="1000"' in ln][2]  # joint3's limit element
    lines[index] = lines[index].replace('effort="1000"', 'effort="0"')
    urdf = tmp_path / "no_effort_limit.urdf"
    urdf.write_text("".join(lines))

    refused = ControllerProcess(tmp_path, "pc_noeff", f"urdf_path:={urdf}")
    try:
        assert refused.proc.wait(timeout=30) == 2
    finally:
        refused.stop()
    reason = [ln for ln in refused.output().splitlines() if "cannot start" in ln]
    assert len(reason) == 1 and reason[0].split("cannot start: ")[1].startswith("default_effort_limit:"), reason
    assert "joint3" in reason[0]

    with controller_at(ros, tmp_path, "pc_defeff", urdf, HORIZONTAL, "default_effort_limit:=300.0") as (
            proc, out, pub_traj):
        pub_traj.publish(hold_message(HORIZONTAL))
        d = latest_diag(executor, out, lambda d: d["trajectories"] == "1" and "saturat" in d["_message"])
        assert d["effort_limits"] == "joint1=1000.0,joint2=1000.0,joint3=300.0"
        efforts = commands_after(out, len(out.commands), executor)
        assert np.allclose(np.abs(efforts[-5:]), [URDF_EFFORT, URDF_EFFORT, 300.0])
