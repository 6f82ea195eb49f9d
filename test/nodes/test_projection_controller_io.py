"""The controller's message side without a running node: serialized trajectories read as arrays (checked against
the middleware's own deserializer), limit checks naming point and joint, effort limits and saturation."""

from __future__ import annotations

import math
import os
import struct

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from rclpy.serialization import serialize_message
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from test.ros_helpers import REPO_ROOT
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes import controller_io as io
from vtm_dynamics.nodes.params import ParameterError
from vtm_dynamics.nodes.trajectory_cdr import FIELDS, TrajectoryArrays, UnsupportedEncoding, read_joint_trajectory
from vtm_dynamics.core.projection.desired_trajectory import (TrajectoryError, TrajectoryLimits, check_limits,
                                                             joint_trajectory_limits)

PLANAR_3R = f"{REPO_ROOT}/urdf/planar_3r.urdf"


def random_message(rng: np.random.Generator) -> JointTrajectory:
    msg = JointTrajectory()
    msg.header.stamp.sec = int(rng.integers(0, 2**31 - 1))
    msg.header.stamp.nanosec = int(rng.integers(0, 10**9))
    msg.header.frame_id = "f" * int(rng.integers(0, 7))
    m = int(rng.integers(0, 5))
    msg.joint_names = ["j" * int(rng.integers(0, 6)) + "é" * int(rng.integers(0, 2)) + str(c) for c in range(m)]
    for _ in range(int(rng.integers(0, 6))):
        pt = JointTrajectoryPoint()
        for field in FIELDS:
            n = int(rng.choice([0, m, int(rng.integers(0, 4))]))
            setattr(pt, field, [float(x) for x in rng.normal(size=n) * 10.0 ** rng.integers(-3, 4)])
        pt.time_from_start.sec = int(rng.integers(-5, 100))
        pt.time_from_start.nanosec = int(rng.integers(0, 2**32 - 1))
        msg.points.append(pt)
    return msg


def expected_rows(msg: JointTrajectory, field: str, width: int) -> np.ndarray:
    rows = np.full((len(msg.points), width), np.nan)
    for i, pt in enumerate(msg.points):
        if len(getattr(pt, field)) == width:
            rows[i] = getattr(pt, field)
    return rows


@pytest.mark.parametrize("seed", range(300))
def test_serialized_trajectories_read_as_the_middleware_wrote_them(seed):
    rng = np.random.default_rng(seed)
    msg = random_message(rng)
    arr = read_joint_trajectory(serialize_message(msg), 10, 10)
    assert arr.joint_names == tuple(msg.joint_names)
    assert arr.stamp == msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
    assert list(arr.times) == [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in msg.points]
    for field in FIELDS:
        assert list(arr.counts[field]) == [len(getattr(p, field)) for p in msg.points], field
        for width in range(5):
            np.testing.assert_array_equal(arr.rows(field, width), expected_rows(msg, field, width))
    from_object = TrajectoryArrays.from_message(msg)
    for field in FIELDS:
        np.testing.assert_array_equal(from_object.rows(field, 2), expected_rows(msg, field, 2))


def test_malformed_or_truncated_bytes_are_refused_naming_the_message():
    rng = np.random.default_rng(7)
    msg = JointTrajectory(joint_names=["a", "b"])
    for t in range(3):
        pt = JointTrajectoryPoint(positions=[1.0, 2.0], velocities=[0.0, 0.0])
        pt.time_from_start.sec = t + 1
        msg.points.append(pt)
    raw = serialize_message(msg)
    for cut in range(len(raw)):
        try:
            read_joint_trajectory(raw[:cut], 10, 10)
        except (TrajectoryError, UnsupportedEncoding):
            pass
    for _ in range(2000):
        bad = bytearray(raw)
        for k in rng.integers(4, len(raw), size=3):
            bad[k] = int(rng.integers(0, 256))
        try:
            read_joint_trajectory(bytes(bad), 10, 10)
        except (TrajectoryError, UnsupportedEncoding):
            pass
    with pytest.raises(UnsupportedEncoding):
        read_joint_trajectory(b"\x00\x07\x00\x00" + raw[4:], 10, 10)  # XCDR2: the middleware's deserializer


def test_caps_are_checked_before_the_points_are_read():
    msg = JointTrajectory(joint_names=["a"])
    raw = bytearray(serialize_message(msg))
    # the last 4 bytes are the point count; claim a billion points
    raw[-4:] = struct.pack("<I", 10**9)
    with pytest.raises(TrajectoryError, match=r"^points: 1000000000 points, more than max_trajectory_points 10$"):
        read_joint_trajectory(bytes(raw), 10, 10)
    many_names = serialize_message(JointTrajectory(joint_names=[f"j{i}" for i in range(50)]))
    with pytest.raises(TrajectoryError, match="^joint_names: 50 names, more than the model's 6 joints"):
        read_joint_trajectory(many_names, 10, 6)


def limits3(**caps) -> TrajectoryLimits:
    return TrajectoryLimits(("a", "b", "c"), ("rad", "rad", "m"), np.array([-1.0, -math.inf, 0.0]),
                            np.array([1.0, math.inf, 0.5]), np.array([2.0, math.inf, 0.25]), **caps)


@pytest.mark.parametrize("times, positions, velocities, message", [
    ([0.0, 1.0], [[0, 5e9, 0], [0.5, -5e9, 0.1]], None, None),  # b has no limits at all
    ([0.0, 1.0], [[0, 0, 0], [1.5, 0, 0.1]], None, r"^points\[1\]\.positions\[a\]: 1\.5 rad outside \[-1, 1\]$"),
    ([0.0, 1.0], [[0, 0, 0], [0, 0, -0.1]], None, r"^points\[1\]\.positions\[c\]: -0\.1 m outside \[0, 0\.5\]$"),
    ([0.0, 1.0], [[0, 0, 0], [0, np.inf, 0]], None, r"^points\[1\]\.positions\[b\]: inf is not finite$"),
    ([0.0, 1.0], [[0, 0, 0], [0, 0, 0]], [[0, 0, 0.3], [np.nan] * 3],
     r"^points\[0\]\.velocities\[c\]: 0\.3 m/s beyond the velocity limit 0\.25 m/s$"),
    ([0.0, 0.1], [[0, 0, 0], [0.5, 0, 0]], None,
     r"^points\[1\]\.positions\[a\]: reached from points\[0\] at 5 rad/s, beyond the velocity limit 2 rad/s$"),
    ([0.0, 0.0], [[0, 0, 0], [0, 0, 0]], None, r"^points\[1\]\.time_from_start: 0 s, not after points\[0\]"),
    ([-1.0], [[0, 0, 0]], None, r"^points\[0\]\.time_from_start: -1 s, must be finite and >= 0$"),
    ([0.0, 20.0], [[0, 0, 0], [0, 0, 0]], None, r"^points\[1\]\.time_from_start: 20 s beyond max_trajectory_dura"),
])
def test_limit_checks_name_point_field_and_joint(times, positions, velocities, message):
    lim = limits3(max_points=5, max_duration=10.0)
    v = None if velocities is None else np.array(velocities, dtype=float)
    args = (np.array(times, dtype=float), np.array(positions, dtype=float), v, lim)
    if message is None:
        check_limits(*args)
    else:
        with pytest.raises(TrajectoryError, match=message):
            check_limits(*args)
    with pytest.raises(TrajectoryError, match=r"^points: 6 points, more than max_trajectory_points 5$"):
        check_limits(np.arange(6.0), np.zeros((6, 3)), None, lim)


def test_the_urdf_limits_are_read_from_the_model():
    robot = RobotModel.from_urdf_file(PLANAR_3R)  # +-100 rad, 100 rad/s, 1000 N m per joint
    lim = joint_trajectory_limits(robot, 7, 8.0)
    assert lim.names == ("joint1", "joint2", "joint3") and lim.units == ("rad",) * 3
    assert list(lim.lower) == [-100.0] * 3 and list(lim.upper) == [100.0] * 3 and list(lim.velocity) == [100.0] * 3
    assert (lim.max_points, lim.max_duration) == (7, 8.0)
    eff = io.effort_limits(robot, ["joint3", "joint1"], 0.0, {"joint1": 250.0})
    assert eff.names == ("joint3", "joint1") and list(eff.limits) == [1000.0, 250.0]
    assert eff.sources == ("urdf", "override") and eff.text() == "joint3=1000.0,joint1=250.0"


@pytest.mark.parametrize("entries, overrides, message", [
    (["joint1"], None, "^effort_limit_overrides: 'joint1' is not JOINT=LIMIT$"),
    (["joint1=abc"], None, "^effort_limit_overrides: 'joint1=abc': the limit is not a number$"),
    (["joint1=-3"], None, "^effort_limit_overrides: 'joint1=-3': the limit must be a finite number > 0$"),
    (["joint1=nan"], None, "^effort_limit_overrides: 'joint1=nan': the limit must be a finite number > 0$"),
    (["joint1=3", "joint1=4"], None, "^effort_limit_overrides: joint1 given twice$"),
    (["elbow=3"], {"elbow": 3.0}, r"^effort_limit_overrides: \['elbow'\] not commanded joints"),
    (["joint2=1500"], {"joint2": 1500.0},
     r"^effort_limit_overrides: joint2=1500 N m would raise the limit 1000 N m \(overrides can only lower it\)$"),
])
def test_effort_overrides_can_only_lower_the_limits_of_commanded_joints(entries, overrides, message):
    robot = RobotModel.from_urdf_file(PLANAR_3R)
    if overrides is None:
        with pytest.raises(ParameterError, match=message):
            io.parse_effort_overrides(entries)
    else:
        assert io.parse_effort_overrides(entries) == overrides
        with pytest.raises(ParameterError, match=message):
            io.effort_limits(robot, ["joint1", "joint2", "joint3"], 0.0, overrides)


def test_saturation_clips_each_entry_and_remembers_the_largest_excess_until_reported():
    robot = RobotModel.from_urdf_file(PLANAR_3R)
    eff = io.effort_limits(robot, ["joint1", "joint2", "joint3"], 0.0, {"joint3": 10.0})
    window = io.SaturationWindow(eff)
    a = io.saturate(np.array([1500.0, -20.0, -12.0]), eff)
    assert list(a.efforts) == [1000.0, -20.0, -10.0] and list(a.excess) == [500.0, 0.0, 2.0] and a.saturated
    b = io.saturate(np.array([-1200.0, 999.0, 1.0]), eff)
    assert list(b.efforts) == [-1000.0, 999.0, 1.0] and list(b.excess) == [200.0, 0.0, 0.0]
    c = io.saturate(np.array([1000.0, -1000.0, 10.0]), eff)  # exactly at the limits: not saturated
    assert not c.saturated and list(c.efforts) == [1000.0, -1000.0, 10.0]
    for s in (a, b, c):
        window.add(s)
    assert window.take() == (["joint1", "joint3"], {"joint1": 500.0, "joint3": 2.0}, 2)
    assert window.take() == ([], {}, 0)


@pytest.mark.parametrize("m, fields, change_at", [
    (3, ("positions",), None), (2, ("positions",), None), (3, ("positions", "velocities"), None),
    (1, ("positions", "velocities", "accelerations"), None), (6, ("positions", "effort"), None),
    (3, ("positions",), 500), (2, ("positions", "velocities"), 3), (3, ("positions",), 998),
])
def test_long_trajectories_of_one_layout_read_the_same_as_point_by_point(m, fields, change_at):
    """Points that all look alike are read with array operations; a point that differs (``change_at`` gets an
    extra velocity array) must be noticed, and the result must still be what the middleware wrote."""
    rng = np.random.default_rng(m + len(fields))
    msg = JointTrajectory(joint_names=[f"joint{c}" for c in range(m)])
    msg.header.frame_id = "x" * m
    for i in range(1000):
        pt = JointTrajectoryPoint()
        for field in fields:
            setattr(pt, field, [float(x) for x in rng.normal(size=m)])
        if change_at is not None and i == change_at:
            pt.velocities = [float(x) for x in rng.normal(size=m + 1)]
        pt.time_from_start.sec = int(rng.integers(-(2**31), 2**31 - 1))
        pt.time_from_start.nanosec = int(rng.integers(0, 2**32 - 1))
        msg.points.append(pt)
    arr = read_joint_trajectory(serialize_message(msg), 1000, 10)
    assert list(arr.times) == [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in msg.points]
    for field in FIELDS:
        assert list(arr.counts[field]) == [len(getattr(p, field)) for p in msg.points], field
        np.testing.assert_array_equal(arr.rows(field, m), expected_rows(msg, field, m))



def test_reactions_are_unique_per_joint_by_the_solvability_of_the_active_constraints():
    """The slider-crank as a planar loop closed by a 3-D prismatic pair is overconstrained in 3-D (all three
    joints indeterminate); as crank, rod and one point-on-plane row it is not (mobility 6*2 - 5*2 - 1 = 1). Locking
    the crank (one drive row) leaves it determinate (mobility 0, 12 independent rows); locking the rod as well adds
    a 13th row to 12 coordinates, so some reactions can no longer be determined."""
    with open(os.path.join(REPO_ROOT, "urdf", "slider_crank.urdf")) as fh:
        prismatic = fh.read()
    with open(os.path.join(REPO_ROOT, "urdf", "slider_crank_point_on_plane.urdf")) as fh:
        point = fh.read()
    names3, names2 = ["crank_joint", "rod_joint", "slider_joint"], ["crank_joint", "rod_joint"]
    assert io.joint_uniqueness(prismatic, names3, [], np.array([0.6, -1.2, 0.6])) == [False] * 3
    q = np.array([0.6, -1.2])
    assert io.joint_uniqueness(point, names2, [], q) == [True, True]
    assert io.joint_uniqueness(point, names2, ["crank_joint"], q) == [True, True]
    assert not all(io.joint_uniqueness(point, names2, ["crank_joint", "rod_joint"], q))
    msg = io.reactions_message(names2, np.zeros(2), [True, False], Time())
    assert list(msg.uniquely_determined) == [True, False]


def test_a_urdf_drive_on_a_locked_joint_does_not_make_its_reaction_indeterminate():
    """The controller's constraints are the loop closures, knife edges and locks, not the URDF's drives: a drive on
    the locked crank of the point-on-plane slider crank is no second row beside the lock (the analysis once spliced
    the drives into the text, and two identical rows made the crank's reaction indeterminate)."""
    with open(os.path.join(REPO_ROOT, "urdf", "slider_crank_point_on_plane.urdf")) as fh:
        point = fh.read()
    cut = point.rfind("</robot>")
    driven = point[:cut] + '<driving_constraint name="drive_crank" joint="crank_joint"/>' + point[cut:]
    names, q = ["crank_joint", "rod_joint"], np.array([0.6, -1.2])
    assert io.joint_uniqueness(driven, names, ["crank_joint"], q) == io.joint_uniqueness(point, names,
                                                                                      ["crank_joint"], q)
    assert io.joint_uniqueness(driven, names, ["crank_joint"], q) == [True, True]


def test_effort_limit_weighting_minimizes_the_torques_relative_to_their_limits():
    """Aghili Sec. 7.2 with W^1/2 = diag(limits): among all torques producing the law's constrained motion it
    returns the one minimizing sum (f_i / limit_i)^2 - checked against a least-squares peer over A^T lambda."""
    from vtm_dynamics.core.projection.control import projected_inverse_dynamics

    robot = RobotModel.from_urdf_file(PLANAR_3R)
    limits = io.effort_limits(robot, list(robot.joint_names), 0.0, {"joint2": 50.0, "joint3": 400.0})
    W = io.effort_limit_weighting(robot, limits)
    np.testing.assert_allclose(np.diag(W), [1000.0**2, 50.0**2, 400.0**2])
    rng = np.random.default_rng(3)
    q, v = rng.normal(size=3), rng.normal(size=3)
    A, drift = np.array([[1.0, 0.5, -0.2]]), np.array([0.3])
    args = (robot.mass_matrix(q), robot.bias_forces(q, v), A, drift, np.full(3, 0.1), np.zeros(3), np.zeros(3),
            9.0, 6.0)
    out = projected_inverse_dynamics(*args, W=W)
    tau = out.tau
    base = robot.mass_matrix(q) @ out.qdd + robot.bias_forces(q, v)  # every torque giving this motion: base + A^T lam
    assert abs(A @ out.qdd + drift[0]) < 1e-9
    scale = 1.0 / np.diag(W) ** 0.5
    # peer: minimize |scale * (base + A^T lam)| over lam
    lam = np.linalg.lstsq((scale[:, None] * A.T), -(scale * base), rcond=None)[0]
    np.testing.assert_allclose(tau, base + A.T @ lam, atol=1e-9 * max(1.0, np.abs(tau).max()))


def test_trajectory_messages_are_mapped_by_name_and_malformed_ones_rejected_naming_the_field():
    ab = TrajectoryLimits.unlimited(["a", "b"])
    msg = JointTrajectory(joint_names=["b", "a"])
    msg.points = [JointTrajectoryPoint(positions=[1.0, 2.0])]
    assert list(io.trajectory_from_message(msg, ab).positions[0]) == [2.0, 1.0]  # mapped by name
    for names, points, field in (
        (["a"], [JointTrajectoryPoint(positions=[1.0])], "joint_names"),
        (["a", "b", "c"], [JointTrajectoryPoint(positions=[1.0, 2.0, 3.0])], "joint_names"),
        (["a", "b"], [JointTrajectoryPoint(positions=[1.0])], r"points\[0\].positions"),
        (["a", "b"], [JointTrajectoryPoint(positions=[1.0, 2.0], velocities=[1.0])], r"points\[0\].velocities"),
        (["a", "b"], [], "points"),
    ):
        with pytest.raises(TrajectoryError, match=f"^{field}:"):
            io.trajectory_from_message(JointTrajectory(joint_names=names, points=points), ab)
