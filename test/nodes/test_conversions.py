"""Message <-> numpy conversions: joint states by name, configurations, trajectories, markers."""

import math

import numpy as np
import pytest
from sensor_msgs.msg import JointState
from visualization_msgs.msg import Marker

from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes.conversions import (
    JointStateError,
    JointStateTracker,
    configuration_from_positions,
    joint_trajectory_message,
    parse_joint_state,
    positions_from_configuration,
    seconds_to_stamp,
    stamp_to_seconds,
    subsample_indices,
)
from vtm_dynamics.nodes.markers import MarkerScales, stop_markers

CONTINUOUS = """<robot name="wheel_arm">
  <link name="base"/>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="10" velocity="5"/></joint>
  <link name="a"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="wheel" type="continuous"><parent link="a"/><child link="b"/><origin xyz="1 0 0"/><axis xyz="0 0 1"/></joint>
  <link name="b"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
</robot>"""


@pytest.fixture(scope="module")
def robot():
    return RobotModel.from_urdf(CONTINUOUS)


def _js(names, pos, vel=(), stamp=0.0):
    m = JointState(name=list(names), position=[float(x) for x in pos], velocity=[float(x) for x in vel])
    m.header.stamp = seconds_to_stamp(stamp)
    return m


def test_positions_map_to_configurations_including_continuous_joints(robot):
    assert robot.nq == 3 and robot.nv == 2
    q = configuration_from_positions(robot, [0.4, 2.5])
    assert q == pytest.approx([0.4, math.cos(2.5), math.sin(2.5)])
    assert positions_from_configuration(robot, q) == pytest.approx([0.4, 2.5])


def test_joint_states_are_matched_by_name_in_any_order(robot):
    tracker = JointStateTracker(robot)
    tracker.update(_js(["wheel", "hinge"], [1.0, 0.5], [2.0, -1.0], stamp=3.0))
    s = tracker.snapshot()
    assert s.positions == pytest.approx([0.5, 1.0]) and s.v == pytest.approx([-1.0, 2.0]) and s.stamp == 3.0


@pytest.mark.parametrize("msg, reason", [
    (_js(["hinge", "wheel"], [0.1]), "position: 1 values for 2 names"),
    (_js(["hinge", "wheel"], [0.1, 0.2], [1.0]), "velocity: 1 values for 2 names (must be 0 or 2)"),
    (_js(["hinge", "hinge"], [0.1, 0.2]), "name: duplicate joint names ['hinge']"),
    (_js(["hinge", "wheel"], [0.1, float("nan")]), "position: non-finite value nan for joint 'wheel'"),
    (_js([], []), "name: empty joint state"),
])
def test_malformed_joint_states_are_rejected_with_the_field_named(robot, msg, reason):
    tracker = JointStateTracker(robot)
    with pytest.raises(JointStateError) as err:
        tracker.update(msg)
    assert str(err.value) == reason
    assert tracker.missing == ("hinge", "wheel"), "nothing merged from a rejected message"


def test_unknown_names_are_reported_and_values_of_unknown_joints_may_be_anything(robot):
    parsed = parse_joint_state(_js(["hinge", "gripper", "wheel"], [0.1, float("nan"), 0.2]), robot.joint_names)
    assert parsed.unknown_names == ("gripper",) and parsed.positions == {"hinge": 0.1, "wheel": 0.2}


def test_missing_velocities_are_estimated_by_backward_differences(robot):
    tracker = JointStateTracker(robot)
    tracker.update(_js(["hinge", "wheel"], [0.0, 1.0], stamp=10.0))
    tracker.update(_js(["hinge", "wheel"], [0.02, 0.99], stamp=10.01))
    s = tracker.snapshot()
    assert s.v == pytest.approx([2.0, -1.0]) and s.estimated_velocity == ("hinge", "wheel")
    with pytest.raises(JointStateError, match="no position received yet for \\['wheel'\\]"):
        t = JointStateTracker(robot)
        t.update(_js(["hinge"], [0.0]))
        t.snapshot()


def test_stamps_round_trip_to_the_nanosecond():
    s = seconds_to_stamp(1795303607.123456789)
    assert abs(stamp_to_seconds(s) - 1795303607.123456789) < 1e-6
    assert seconds_to_stamp(2.9999999999).nanosec < 1_000_000_000


def test_trajectory_subsampling_keeps_ends_and_bounds_the_size():
    idx = subsample_indices(1001, 50)
    assert idx[0] == 0 and idx[-1] == 1000 and len(idx) <= 50 and np.all(np.diff(idx) > 0)
    assert list(subsample_indices(5, 50)) == [0, 1, 2, 3, 4]
    t = np.linspace(0, 1, 101)
    msg = joint_trajectory_message(["a"], t, t[:, None], max_points=11)
    assert len(msg.points) == 11 and list(msg.points[-1].positions) == [1.0]
    assert msg.points[-1].time_from_start.sec == 1 and msg.points[-1].time_from_start.nanosec == 0


def test_markers_start_with_deleteall_and_clip_long_arrows():
    path = np.array([[0, 0, 1.0], [0.1, 0, 1.0], [0.2, 0, 0.9]])
    origins = np.array([[0, 0, 0.0], [0, 0, 0.5]])
    axes = np.array([[0, 0, 1.0], [0, 1.0, 0]])
    arr = stop_markers("world", seconds_to_stamp(1.0), path, origins, axes, np.array([[10.0, 0, 0], [0, 0, 5000.0]]),
                       np.array([2.0, -4.0]), "stop", MarkerScales(force_scale=0.01, torque_scale=0.1, max_arrow=1.0))
    assert arr.markers[0].action == Marker.DELETEALL
    forces = [m for m in arr.markers if m.ns == "reaction_forces"]
    lengths = [math.dist((m.points[0].x, m.points[0].y, m.points[0].z), (m.points[1].x, m.points[1].y, m.points[1].z))
               for m in forces]
    assert lengths == pytest.approx([0.1, 1.0])  # 0.01 m/N * 10 N; 50 m clipped to 1 m
    torque = [m for m in arr.markers if m.ns == "holding_torques"][1]
    assert (torque.points[1].y - torque.points[0].y) == pytest.approx(-0.4)  # negative torque: along -axis


# ---------------------------------------------------------------------------------------------- untrusted joint states
def test_twenty_thousand_names_are_rejected_fast(robot):
    import time

    names = [f"joint_{i}" for i in range(20_000)]
    msg = _js(names, [0.0] * len(names))
    tracker = JointStateTracker(robot)
    t0 = time.perf_counter()
    with pytest.raises(JointStateError) as err:
        tracker.update(msg)
    elapsed = time.perf_counter() - t0
    assert str(err.value).startswith("name: 20000 names") and "max_joints" in str(err.value)
    assert elapsed < 2.0, f"{elapsed:.2f} s"
    with pytest.raises(JointStateError, match="max_joints"):
        parse_joint_state(msg, robot.joint_names)


def test_the_duplicate_check_is_linear_when_the_cap_is_raised(robot):
    import time

    names = [f"joint_{i}" for i in range(50_000)] + ["joint_7"]
    t0 = time.perf_counter()
    with pytest.raises(JointStateError, match=r"name: duplicate joint names \['joint_7'\]"):
        parse_joint_state(_js(names, [0.0] * len(names)), robot.joint_names, max_joints=100_000)
    assert time.perf_counter() - t0 < 2.0


def test_zero_stamps_without_velocities_make_velocities_unavailable(robot):
    tracker = JointStateTracker(robot)
    tracker.update(_js(["hinge", "wheel"], [0.0, 1.0], stamp=0.0))
    tracker.update(_js(["hinge", "wheel"], [0.02, 0.99], stamp=0.0))
    s = tracker.snapshot()
    assert s.velocity_source == "unavailable"
    assert s.unavailable_velocity == ("hinge", "wheel") and s.estimated_velocity == ()


def test_stamps_that_do_not_advance_make_velocities_unavailable(robot):
    tracker = JointStateTracker(robot)
    tracker.update(_js(["hinge", "wheel"], [0.0, 1.0], stamp=10.0))
    tracker.update(_js(["hinge", "wheel"], [0.02, 0.99], stamp=10.01))
    assert tracker.snapshot().velocity_source == "estimated"
    tracker.update(_js(["hinge"], [0.05], stamp=10.01))  # not newer: no estimate possible for hinge
    s = tracker.snapshot()
    assert s.velocity_source == "unavailable" and s.unavailable_velocity == ("hinge",)
    assert s.estimated_velocity == ("wheel",)
    tracker.update(_js(["hinge"], [0.06], stamp=10.02))  # newer again: estimated from the last two positions
    s = tracker.snapshot()
    assert s.velocity_source == "estimated" and s.v[0] == pytest.approx(1.0)


def test_a_single_message_without_velocities_gives_no_velocity_estimate(robot):
    tracker = JointStateTracker(robot)
    tracker.update(_js(["hinge", "wheel"], [0.0, 1.0], stamp=5.0))
    assert tracker.snapshot().velocity_source == "unavailable"


def test_measured_velocities_are_reported_as_measured(robot):
    tracker = JointStateTracker(robot)
    tracker.update(_js(["hinge", "wheel"], [0.0, 1.0], [0.5, 0.25], stamp=0.0))
    s = tracker.snapshot()
    assert s.velocity_source == "measured" and s.unavailable_velocity == () and s.estimated_velocity == ()


def test_a_state_merged_from_subsets_is_stamped_with_its_oldest_joint_value(robot):
    """A silent publisher's joints are as old as its last message; the merged state must not look newer."""
    tracker = JointStateTracker(robot)
    tracker.update(_js(["hinge", "wheel"], [0.1, 1.0], [0.0, 2.0], stamp=95.0))  # the wheel's publisher, then silent
    tracker.update(_js(["hinge"], [0.2], [0.0], stamp=100.0))
    assert tracker.snapshot().stamp == 95.0
    tracker.update(_js(["wheel"], [1.5], [2.0], stamp=99.5))
    assert tracker.snapshot().stamp == 99.5
    tracker.update(_js(["hinge"], [0.3], [0.0], stamp=0.0), at=101.0)  # an unstamped message held at its receipt
    assert tracker.snapshot().stamp == 99.5


def test_positions_further_apart_than_max_velocity_gap_give_no_velocity(robot):
    tracker = JointStateTracker(robot, max_velocity_gap=0.05)
    tracker.update(_js(["hinge", "wheel"], [0.0, 1.0], stamp=10.0))
    tracker.update(_js(["hinge", "wheel"], [0.0, 1.0], stamp=13.0))  # 3 s later: not the velocity now
    s = tracker.snapshot()
    assert s.velocity_source == "unavailable" and s.unavailable_velocity == ("hinge", "wheel")
    tracker.update(_js(["hinge", "wheel"], [0.01, 1.02], stamp=13.01))
    s = tracker.snapshot()
    assert s.velocity_source == "estimated" and s.v == pytest.approx([1.0, 2.0])


def test_a_continuous_joint_reported_wrapped_is_estimated_on_the_circle(robot):
    """The wheel turns at +2 rad/s through +pi; its reported angle jumps from about +pi to about -pi."""
    speed, dt = 2.0, 0.1
    a0 = math.pi - 0.001
    a1 = math.atan2(math.sin(a0 + speed * dt), math.cos(a0 + speed * dt))
    tracker = JointStateTracker(robot)
    tracker.update(_js(["hinge", "wheel"], [2.9, a0], stamp=20.0))
    tracker.update(_js(["hinge", "wheel"], [-2.9, a1], stamp=20.0 + dt))
    s = tracker.snapshot()
    assert s.v[1] == pytest.approx(speed, rel=1e-9)
    assert s.v[0] == pytest.approx(-5.8 / dt)  # the limited hinge really moved 5.8 rad: no wrap there


def test_a_value_older_than_the_one_held_for_a_joint_is_skipped_and_named(robot):
    """A joint_state_publisher republishing every joint with an older stamp among a driver's newer messages: the
    driver's values stay, and no velocity is differenced with the older one."""
    tracker = JointStateTracker(robot)
    tracker.update(_js(["hinge", "wheel"], [0.10, 1.00], stamp=50.00))
    tracker.update(_js(["hinge", "wheel"], [0.11, 1.02], stamp=50.01))
    parsed = tracker.update(_js(["wheel", "hinge"], [0.5, 0.0], [0.0, 0.0], stamp=49.95))  # older: both skipped
    assert parsed.superseded == ("wheel", "hinge") and parsed.merged == ()
    s = tracker.snapshot()
    assert s.positions == pytest.approx([0.11, 1.02]) and s.stamp == 50.01
    assert s.v == pytest.approx([1.0, 2.0]) and s.velocity_source == "estimated"
    tracker.update(_js(["hinge", "wheel"], [0.12, 1.04], stamp=50.02))  # differenced with 50.01, not 49.95
    assert tracker.snapshot().v == pytest.approx([1.0, 2.0])
    parsed = tracker.update(_js(["hinge", "wheel"], [0.13, 0.9], [1.0, 0.0], stamp=50.02 - 1e-3))
    assert parsed.superseded == ("hinge", "wheel")


def test_a_message_newer_for_some_joints_and_older_for_others_merges_only_the_newer(robot):
    tracker = JointStateTracker(robot)
    tracker.update(_js(["hinge"], [0.1], [0.0], stamp=10.0))
    tracker.update(_js(["wheel"], [1.0], [0.0], stamp=10.2))
    parsed = tracker.update(_js(["hinge", "wheel"], [0.3, 2.0], [0.5, 0.5], stamp=10.1))
    assert parsed.superseded == ("wheel",) and parsed.merged == ("hinge",)
    s = tracker.snapshot()
    assert s.positions == pytest.approx([0.3, 1.0]) and s.stamp == 10.1


def test_a_snapshot_carries_the_exact_stamp_of_its_oldest_joint_value(robot):
    """Float seconds at today's epoch lose nanoseconds; the snapshot names the stamp exactly."""
    old, new = _js(["hinge"], [0.1], [0.0]), _js(["wheel"], [1.0], [0.0])
    old.header.stamp.sec, old.header.stamp.nanosec = 1_790_000_000, 123_456_789
    new.header.stamp.sec, new.header.stamp.nanosec = 1_790_000_000, 125_456_789
    tracker = JointStateTracker(robot)
    tracker.update(old)
    tracker.update(new)
    assert tracker.snapshot().header_stamp == old.header.stamp
