"""The check_trajectory service part (nodes/trajectory_check.py): its answer is the core's check of the same
trajectory and scene built another way (the documented YAML scene, the trajectory's own arrays, the stop cases of
the live stopping distance's envelope); an unsafe trajectory is a successful answer that names its first unsafe
instant; every cap and the deadline end the work with one line naming the parameter and no numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from builtin_interfaces.msg import Duration
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from vtm_msgs.srv import CheckTrajectory

from test.nodes.node_harness import TEST_BRAKES, UR5_JOINTS
from vtm_dynamics.core.estop import CategoryOne, StopSettings
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.envelope import EnvelopeSpec
from vtm_dynamics.core.stopsafe.check import CheckSettings, TrajectoryChecker
from vtm_dynamics.core.stopsafe.robot_geometry import build_robot_geometry, example_robot_package_dir
from vtm_dynamics.core.stopsafe.sampling import SamplingSpec
from vtm_dynamics.core.stopsafe.scene import scene_from_yaml_text
from vtm_dynamics.core.stopsafe.speed_scaling import largest_speed_scaling
from vtm_dynamics.core.stopsafe.stop_cases import StopSetup
from vtm_dynamics.core.stopsafe.trajectory import planned_trajectory
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes.estop_parameters import PARAMETERS, prediction_settings
from vtm_dynamics.nodes.model_slot import ModelSlot, build_model
from vtm_dynamics.nodes.model_source import load_urdf_text
from vtm_dynamics.nodes.stopsafe_kit import StopsafeKits
from vtm_dynamics.nodes.trajectory_check import TrajectoryChecks

Q0 = np.array([0.0, -1.3, 1.3, -1.5, -1.57, 0.0])
Q1 = Q0 + np.array([0.8, 0.2, -0.2, 0.0, 0.0, 0.0])
WALL = """
scene:
  floor: {height: -0.05}
  self_collision: false
  obstacles:
    - {name: wall, primitive: {type: box, dimensions: [0.1, 2.0, 2.0]}, pose: {position: [0.75, 0, 0.5]}}
"""


class Part:
    def __init__(self, brakes: str = TEST_BRAKES, **overrides) -> None:
        self.p = P.values(PARAMETERS, {"robot": "ur5", "brake_config": brakes, **overrides})
        self.model = build_model(load_urdf_text("ur5"), brakes, "ur5", warm=False)
        self.slot = ModelSlot(False)
        self.slot.install(self.model)
        self.stats = {"rejected_inputs": 0}
        self.lines: list[tuple[str, str]] = []
        self.checks = TrajectoryChecks(self.slot, StopsafeKits(self.p, prediction_settings(self.p)), self.p,
                                       self.stats, lambda level, text: self.lines.append((level, text)))

    def answer(self, req) -> CheckTrajectory.Response:
        return self.checks.answer(req, CheckTrajectory.Response())


@pytest.fixture(scope="module")
def part():
    return Part()


def joint_trajectory(q0=Q0, q1=Q1, seconds=1.0) -> JointTrajectory:
    order = [2, 0, 1, 5, 3, 4]  # not the model's order: inputs are by name
    return JointTrajectory(joint_names=[UR5_JOINTS[k] for k in order], points=[
        JointTrajectoryPoint(positions=[float(q0[k]) for k in order], velocities=[0.0] * 6,
                             time_from_start=Duration(sec=0)),
        JointTrajectoryPoint(positions=[float(q1[k]) for k in order], velocities=[0.0] * 6,
                             time_from_start=Duration(sec=int(seconds), nanosec=int((seconds % 1) * 1e9)))])


def wall_request(**fields) -> CheckTrajectory.Request:
    from geometry_msgs.msg import Pose
    from shape_msgs.msg import SolidPrimitive

    pose = Pose()
    pose.position.x, pose.position.z, pose.orientation.w = 0.75, 0.5, 1.0
    req = CheckTrajectory.Request(trajectory=joint_trajectory(), margin=0.02, sample_period=0.1, has_floor=True,
                                  floor_height=-0.05, obstacle_names=["wall"], obstacle_poses=[pose],
                                  obstacles=[SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.1, 2.0, 2.0])])
    for k, v in fields.items():
        setattr(req, k, v)
    return req


@pytest.fixture(scope="module")
def reference(part):
    """The core's checker built without the node: the URDF's geometry, the test brakes, the envelope of the
    documented defaults (torque x0.9..1.1, delay x1..1.5, payload 0..5 kg: the UR5's rated payload), the YAML
    scene."""
    text = load_urdf_text("ur5")
    robot, geometry = build_robot_geometry(text, [example_robot_package_dir()])
    setup = StopSetup(robot, brakes_from_config(robot, TEST_BRAKES),
                      EnvelopeSpec(torque_factor=(0.9, 1.1), delay_factor=(1.0, 1.5), payload=(0.0, 5.0),
                                   payload_frame="tool0"),
                      (0,), CategoryOne(deceleration=3.0), payload_frame="tool0", settings=StopSettings(t_max=5.0))
    checker = TrajectoryChecker(setup, geometry, scene_from_yaml_text(WALL),
                                CheckSettings(margin=0.02, sampling=SamplingSpec(rate=10.0)), "tool0")
    traj = planned_trajectory(UR5_JOINTS, [0.0, 1.0], [Q0, Q1], [np.zeros(6), np.zeros(6)])
    return checker, traj


def test_the_answer_is_the_cores_check_of_the_same_inputs(part, reference):
    checker, traj = reference
    want = checker.check(traj)
    got = part.answer(wall_request())
    assert got.success, got.message
    assert (got.model_name, got.model_hash, got.tcp_frame, got.header.frame_id) == \
        ("ur5", part.model.hash, "tool0", "world")
    assert list(got.cases) == list(want.cases) and len(got.cases) == 9
    assert np.allclose(got.time, want.column("time"), atol=1e-12)
    for field, column in (("stop_time", "stop_time"), ("tcp_distance", "tcp_distance"),
                          ("min_clearance", "clearance"), ("certified_clearance", "certified_clearance")):
        assert np.allclose(getattr(got, field), want.column(column), rtol=1e-9, atol=1e-9), field
    assert list(got.link) == [s.pair[0] for s in want.samples]
    assert list(got.obstacle) == [s.pair[1] for s in want.samples]
    assert got.safe == want.safe and got.predicted_stops == want.n_stops == 11 * 9
    assert got.first_unsafe == (want.first_unsafe.index if want.first_unsafe else -1)
    assert math.isnan(got.speed_scaling) and got.computation_time > 0


def test_an_unsafe_trajectory_is_answered_with_its_first_unsafe_instant(part):
    """The wall moved into the arm's path (x = 0.45 m): a successful answer that says unsafe, not a failure."""
    req = wall_request()
    req.obstacle_poses[0].position.x = 0.45
    got = part.answer(req)
    assert got.success and not got.safe, got.message
    k = got.first_unsafe
    assert k >= 0 and not got.sample_safe[k] and all(got.sample_safe[:k])
    assert got.certified_clearance[k] < 0.02 and got.message.startswith(f"unsafe: first at t = {got.time[k]:.4f} s")


def test_the_speed_scaling_is_the_cores_search_on_the_same_inputs(reference):
    """Nominal brakes only, the wall alone: the search's dozen checks stay cheap. Full speed is unsafe there."""
    checker, traj = reference
    nominal = Part(stopping_envelope=False)
    req = wall_request(search_speed_scaling=True, has_floor=False)
    setup = StopSetup(checker.setup.robot, checker.setup.brakes, None, (0,), CategoryOne(deceleration=3.0),
                      settings=StopSettings(t_max=5.0))
    want = largest_speed_scaling(TrajectoryChecker(setup, checker.geometry, scene_from_yaml_text(
        WALL.replace("floor: {height: -0.05}", "")), checker.settings, "tool0"), traj)
    got = nominal.answer(req)
    assert got.success and not got.safe, got.message
    assert 0.0 < want.scaling < 1.0 and got.speed_scaling == pytest.approx(want.scaling, rel=1e-12)
    assert got.speed_scaling_rechecked and want.recheck.safe
    assert got.predicted_stops >= 11 * len(want.trials) + want.recheck.n_stops  # every check of the search counts


def test_the_stop_cap_ends_the_work_with_one_line_naming_it_and_no_numbers():
    small = Part(check_max_stops=50)
    # 5 instants x 9 cases (brake corners x payload 0 and 5 kg, and the nominal) fit in one check; the speed-scaling
    # search needs more
    got = small.answer(wall_request(sample_period=0.25, search_speed_scaling=True))
    assert not got.success and got.message.startswith("check_max_stops: the check needs more than 50"), got.message
    assert got.first_unsafe == CheckTrajectory.Response.NOT_CHECKED and not got.safe and len(got.time) == 0
    for period in (0.1, 0.0):  # 11 instants x 9 cases: refused before anything is predicted
        fixed = small.answer(wall_request(sample_period=period))
        assert not fixed.success and fixed.message.startswith("sample_period:"), fixed.message
        assert "check_max_stops 50" in fixed.message
    assert [level for level, _ in small.lines] == ["warning", "warning"]  # the requests; a cap reached is no input
    assert all("check_trajectory: request refused: sample_period" in text for _, text in small.lines)


def test_the_deadline_ends_the_work_naming_check_deadline():
    hurried = Part(check_deadline=1e-4)
    got = hurried.answer(wall_request())
    assert not got.success and got.message == "deadline: no answer within check_deadline 0.0001 s", got.message
    assert len(got.min_clearance) == 0 and math.isnan(got.speed_scaling)
    assert hurried.checks.deadline == pytest.approx(1.0001)


def test_bad_requests_get_one_line_each_naming_the_field(part):
    before = part.stats["rejected_inputs"]
    mark = len(part.lines)
    req = wall_request()
    req.trajectory.joint_names[0] = "no_such_joint"
    got = part.answer(req)
    assert not got.success and got.message.startswith("trajectory.joint_names: 'no_such_joint' is not a movable")
    got = part.answer(wall_request(margin=math.inf))
    assert not got.success and got.message.startswith("margin:")
    assert part.stats["rejected_inputs"] == before + 2 and len(part.lines) == mark + 2
    assert all(text.startswith("check_trajectory: request refused: ") for _, text in part.lines[mark:])


def test_no_model_and_no_collision_geometry_are_refused():
    part = Part()
    part.slot.current = None
    assert part.answer(wall_request()).message == "no robot model yet (waiting for robot_description)"


def test_meshes_outside_the_configured_directories_are_not_read(tmp_path):
    part = Part(collision_package_dirs=[str(tmp_path)])
    got = part.answer(wall_request())
    assert not got.success and got.message.startswith("collision geometry of 'ur5': urdf: collision mesh ")
    assert got.message.endswith("(parameter collision_package_dirs)")


def test_a_stop_past_a_joint_limit_is_an_unsafe_instant_named_in_the_message():
    """The elbow runs at 3 rad/s to 10 mrad below its upper limit (the trajectory ends there, still moving), the
    wall 3 m away, the shipped UR5 brakes: the stops of the last instants rest past the limit (the independent
    integration says so), which the answer called safe ("every predicted stop ends clear")."""
    from test.core.limit_case import UR5_BRAKES, elbow_towards_limit, reference_elbow_rest

    part = Part(UR5_BRAKES)
    robot = part.model.robot
    q_end, v, limit = elbow_towards_limit(robot)
    elbow = robot.joint_names.index("elbow_joint")
    q_start = q_end.copy()
    q_start[elbow] -= 0.3
    assert reference_elbow_rest(robot, q_end, v) > limit + 0.1
    traj = JointTrajectory(joint_names=list(robot.joint_names), points=[
        JointTrajectoryPoint(positions=[float(x) for x in q], velocities=[float(x) for x in v],
                             time_from_start=Duration(sec=0, nanosec=n)) for q, n in ((q_start, 0), (q_end, 10**8))])
    req = wall_request(trajectory=traj, sample_period=0.02, has_floor=False)
    req.obstacle_poses[0].position.x = 3.0
    got = part.answer(req)
    assert got.success and not got.safe, got.message
    assert not got.sample_safe[-1] and min(got.certified_clearance) > 1.0  # the wall alone would pass every instant
    assert got.message.startswith(f"unsafe: first at t = {got.time[got.first_unsafe]:.4f} s: case (cat 0")
    assert "past a joint limit: elbow_joint reaches" in got.message and f"upper limit {limit:.4f} rad" in got.message
