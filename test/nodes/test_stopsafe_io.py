"""CheckTrajectory requests become the core's trajectory, scene and sampling, or one line naming the request field
(and the parameter of a cap) before anything is allocated for it; a failed answer carries no numbers that could be
read as a result; SeparationDistance messages carry every ISO/TS 15066 term (nodes/stopsafe_io.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Pose
from shape_msgs.msg import SolidPrimitive
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from vtm_msgs.srv import CheckTrajectory

from vtm_dynamics.core.stopsafe.scene import scene_from_yaml_text
from vtm_dynamics.core.stopsafe.separation import SeparationDistance as CoreSeparation
from vtm_dynamics.nodes import stopsafe_io as io

LIMITS = io.CheckLimits(max_points=50, max_obstacles=3, max_dimension=5.0, max_stops=1000, tolerance=0.005,
                        deadline=10.0)
NAMES = ["a", "b"]


def trajectory(n=3, names=NAMES, velocities=False, step=0.5) -> JointTrajectory:
    pts = []
    for k in range(n):
        t = k * step
        pts.append(JointTrajectoryPoint(positions=[0.1 * k + j for j in range(len(names))],
                                        velocities=[0.2] * len(names) if velocities else [],
                                        time_from_start=Duration(sec=int(t), nanosec=int(round((t % 1) * 1e9)))))
    return JointTrajectory(joint_names=list(names), points=pts)


def pose(x=0.0, y=0.0, z=0.0, w=1.0) -> Pose:
    p = Pose()
    p.position.x, p.position.y, p.position.z, p.orientation.w = x, y, z, w
    return p


def request(**fields) -> CheckTrajectory.Request:
    r = CheckTrajectory.Request(trajectory=trajectory(), margin=0.02)
    r.obstacles = [SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[1.0, 2.0, 0.5]),
                   SolidPrimitive(type=SolidPrimitive.CYLINDER, dimensions=[0.4, 0.1])]
    r.obstacle_poses = [pose(1.0, 0.0, 0.25), pose(0.0, 0.5, 0.2, w=1.0)]
    r.obstacle_names = ["table", "post"]
    for k, v in fields.items():
        setattr(r, k, v)
    return r


def refused(func, *args) -> str:
    with pytest.raises(ValueError) as err:
        func(*args)
    text = str(err.value)
    assert "\n" not in text
    return text


def test_a_trajectory_message_becomes_the_planned_trajectory_by_joint_name():
    traj = io.trajectory_of(trajectory(3, velocities=True), LIMITS)
    assert traj.joint_names == ("a", "b") and traj.interpolation == "cubic"
    assert np.allclose(traj.time_from_start, [0.0, 0.5, 1.0])
    assert np.allclose(traj.positions, [[0.0, 1.0], [0.1, 1.1], [0.2, 1.2]])
    assert io.trajectory_of(trajectory(2), LIMITS).interpolation == "linear"


@pytest.mark.parametrize("msg, field", [
    (trajectory(51), "trajectory.points: expected 2..50 points (check_max_points), got 51"),
    (trajectory(1), "trajectory.points: expected 2..50 points"),
    (trajectory(2, names=[f"j{k}" for k in range(65)]), "trajectory.joint_names: expected 1..64 names, got 65"),
    (trajectory(2, names=["a", "a"]), "trajectory.joint_names: 'a' appears twice"),
])
def test_trajectory_sizes_and_names_are_refused_naming_the_field(msg, field):
    assert refused(io.trajectory_of, msg, LIMITS).startswith(field)


def test_point_arrays_must_match_the_joint_names_and_the_first_point():
    msg = trajectory(3)
    msg.points[1].positions = [0.0]
    assert refused(io.trajectory_of, msg, LIMITS).startswith("trajectory.points[1].positions: expected 2 values")
    msg = trajectory(3, velocities=True)
    msg.points[2].velocities = []
    assert refused(io.trajectory_of, msg, LIMITS).startswith("trajectory.points[2].velocities: expected 2 values")
    msg = trajectory(3)
    msg.points[1].time_from_start = Duration(sec=0, nanosec=0)
    assert refused(io.trajectory_of, msg, LIMITS).startswith("trajectory.time_from_start[1]:")
    msg = trajectory(2)
    msg.points[0].positions = [math.nan, 0.0]
    assert refused(io.trajectory_of, msg, LIMITS).startswith("trajectory.positions")


def test_the_scene_of_a_request_is_the_scene_of_the_same_yaml_file():
    """An independent route to the same scene: the documented YAML format parsed by the core."""
    got = io.scene_of(request(has_floor=True, floor_height=-0.1, self_collision=True), LIMITS)
    want = scene_from_yaml_text("""
scene:
  floor: {height: -0.1}
  obstacles:
    - {name: table, primitive: {type: box, dimensions: [1.0, 2.0, 0.5]}, pose: {position: [1.0, 0, 0.25]}}
    - {name: post, primitive: {type: cylinder, dimensions: [0.4, 0.1]}, pose: {position: [0, 0.5, 0.2]}}
""")
    assert got.floor_height == want.floor_height and got.self_collision == want.self_collision
    for a, b in zip(got.obstacles, want.obstacles, strict=True):
        assert (a.name, a.kind, a.dimensions) == (b.name, b.kind, b.dimensions)
        assert np.allclose(a.position, b.position) and np.allclose(a.orientation, b.orientation)
    unnamed = io.scene_of(request(obstacle_names=[]), LIMITS)
    assert [o.name for o in unnamed.obstacles] == ["obstacle_0", "obstacle_1"]


@pytest.mark.parametrize("fields, reason", [
    ({"obstacles": [SolidPrimitive(type=1, dimensions=[1.0] * 3)] * 4, "obstacle_poses": [pose()] * 4,
      "obstacle_names": []}, "obstacles: 4 obstacles, more than 3 (check_max_obstacles)"),
    ({"obstacle_poses": [pose()]}, "obstacle_poses: 1 poses for 2 obstacles"),
    ({"obstacle_names": ["x"]}, "obstacle_names: 1 names for 2 obstacles"),
    ({"obstacle_names": ["x", "x"]}, "obstacle_names: a name is used twice"),
    ({"obstacle_names": ["x", ""]}, "obstacle_names[1]: expected 1..128 characters"),
    ({"obstacles": [SolidPrimitive(type=1, dimensions=[1.0, 6.0, 1.0])] * 2},
     "obstacles[0].dimensions[1]: expected 0 < d <= 5 m (check_max_dimension), got 6"),
    ({"obstacles": [SolidPrimitive(type=2, dimensions=[1.0, 1.0])] * 2}, "obstacles[0].dimensions: a sphere needs 1"),
    ({"obstacles": [SolidPrimitive(type=2, dimensions=[math.inf])] * 2}, "obstacles[0].dimensions[0]: expected"),
    ({"obstacles": [SolidPrimitive(type=5, dimensions=[1.0])] * 2}, "obstacles[0].type: SolidPrimitive type 5"),
    ({"obstacle_poses": [pose(w=0.5), pose()]}, "obstacle_poses[0].orientation: not a unit quaternion"),
    ({"obstacle_poses": [pose(x=math.nan), pose()]}, "obstacle_poses[0]: expected finite coordinates"),
    ({"has_floor": True, "floor_height": math.inf}, "floor_height: expected a finite height"),
    ({"obstacles": [], "obstacle_poses": [], "obstacle_names": [], "self_collision": False},
     "obstacles: empty scene"),
])
def test_bad_scenes_are_refused_naming_the_field_and_cap(fields, reason):
    assert refused(io.scene_of, request(**fields), LIMITS).startswith(reason)


def test_categories_default_to_the_nodes_and_must_be_zero_or_one_once():
    assert io.categories_of(request(), 1) == (1,)
    assert io.categories_of(request(stop_categories=[1, 0]), 0) == (1, 0)
    for bad in ([2], [0, 0], [0, 1, 0]):
        assert refused(io.categories_of, request(stop_categories=bad), 0).startswith("stop_categories:")


def test_a_fixed_sample_period_is_counted_against_the_stop_cap_before_anything_is_predicted():
    traj = io.trajectory_of(trajectory(3, velocities=True), LIMITS)  # 1 s
    spec = io.sampling_of(request(sample_period=0.01), traj, 9, LIMITS)  # 101 instants x 9 = 909 stops
    assert spec.rate == pytest.approx(100.0)
    assert refused(io.sampling_of, request(sample_period=0.001), traj, 9, LIMITS).startswith(
        "sample_period: 1 s every 0.001 s is 1001 E-stop instants x 9 cases, more than check_max_stops 1000")
    refined = io.sampling_of(request(sample_period=0.0), traj, 9, LIMITS)
    assert refined.rate is None and refined.tolerance == 0.005 and refined.max_samples == 1000 // 9
    for bad in (-1.0, math.nan, 1e-5):
        assert refused(io.sampling_of, request(sample_period=bad), traj, 9, LIMITS).startswith("sample_period:")


def test_a_refused_check_carries_no_number_that_looks_like_a_result():
    r = CheckTrajectory.Response(success=True, safe=True, time=[0.0], min_clearance=[0.1], link=["l"],
                                 first_unsafe=-1, speed_scaling=1.0, speed_scaling_rechecked=True,
                                 max_sampling_bound=0.001)
    io.refuse_check(r, "margin: expected -1..10 m")
    assert not r.success and not r.safe and r.message == "margin: expected -1..10 m"
    assert not any(len(getattr(r, f)) for f in ("time", "stop_time", "tcp_distance", "min_clearance",
                                                 "certified_clearance", "link", "obstacle", "sample_safe", "cases"))
    assert r.first_unsafe == CheckTrajectory.Response.NOT_CHECKED
    assert math.isnan(r.speed_scaling) and math.isnan(r.max_sampling_bound) and not r.speed_scaling_rechecked


def _core_value() -> CoreSeparation:
    return CoreSeparation(S_p=1.5, S_h=0.4, S_r=0.1, S_s=0.2, C=0.3, Z_d=0.25, Z_r=0.25, T_r=0.1, T_s=0.15, v_h=1.6,
                          v_r=1.0, link="wrist", closest_point=np.array([0.1, 0.2, 0.3]),
                          person=np.array([1.0, 0.0, 0.3]), direction=np.array([1.0, 0.0, 0.0]), separation=0.9,
                          margin=-0.6, safe=False, case="cat 0", stopped=True)


def test_a_separation_message_carries_every_term_or_none():
    msg = io.separation_message(_core_value(), "", stamp=Duration(), frame="base", model_name="ur5",
                                model_hash="h", category=1, person_age=0.05)
    assert msg.success and (msg.s_p, msg.s_h, msg.s_r, msg.s_s, msg.c, msg.z_d, msg.z_r) == \
        (1.5, 0.4, 0.1, 0.2, 0.3, 0.25, 0.25)
    assert (msg.t_r, msg.t_s, msg.v_h, msg.v_r, msg.margin, msg.safe) == (0.1, 0.15, 1.6, 1.0, -0.6, False)
    assert (msg.link, msg.closest_point.z, msg.person.x, msg.header.frame_id) == ("wrist", 0.3, 1.0, "base")
    assert (msg.model_name, msg.stop_category, msg.person_age) == ("ur5", 1, 0.05)
    stale = io.separation_message(_core_value(), "input state is 0.2 s old", stamp=Duration(), frame="base",
                                  model_name="ur5", model_hash="h", category=0, person_age=0.0)
    assert not stale.success and stale.message == "input state is 0.2 s old"
    assert all(math.isnan(getattr(stale, f)) for f in ("s_p", "s_s", "t_s", "margin", "separation"))
    assert math.isnan(stale.closest_point.x) and not stale.safe
