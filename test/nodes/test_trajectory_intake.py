"""The trajectory intake of projection_controller without ROS (nodes/trajectory_intake.py): serialized
trajectories refused at once or prepared (inline when small, on the worker when large), the newest one winning, a
refused one leaving the current goal and its reason reported once."""

from types import SimpleNamespace

import pytest
from rclpy.serialization import serialize_message

from test.nodes.controller_harness import PLANAR_3R, trajectory_message
from vtm_dynamics.core.projection.desired_trajectory import joint_trajectory_limits
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes.control_loop import STATS
from vtm_dynamics.nodes.controller_parameters import PARAMETERS
from vtm_dynamics.nodes.trajectory_intake import INLINE_BYTES, TrajectoryIntake
from vtm_dynamics.nodes.work_queue import WorkQueue

JOINTS = ["joint1", "joint2", "joint3"]


@pytest.fixture
def rig():
    robot = RobotModel.from_urdf_file(PLANAR_3R)
    limits = {False: joint_trajectory_limits(robot, 10_000, 3600.0), True: None}
    worker = WorkQueue("test_trajectories", lambda err: None)
    lines = []
    intake = TrajectoryIntake(lambda task: limits[task], P.values(PARAMETERS, {"max_trajectory_bytes": 200_000}),
                              dict.fromkeys(STATS, 0), lambda level, text: lines.append((level, text)), worker)
    yield SimpleNamespace(intake=intake, limits=limits, lines=lines, worker=worker)
    worker.stop()


def _raw(points: int, target: float = 0.5) -> bytes:
    times = [0.1 * (k + 1) for k in range(points)]
    positions = [[target * (k + 1) / points] * 3 for k in range(points)]
    zeros = [[0.0] * 3] * points
    return serialize_message(trajectory_message(JOINTS, times, positions, zeros, zeros, 0.0))


def test_without_a_model_or_task_coordinates_a_trajectory_is_refused_at_once(rig):
    rig.limits[False] = None
    rig.intake.submit(_raw(1))
    assert rig.intake.last_rejection == "trajectory: no robot model yet"
    rig.intake.submit(_raw(1), task=True)
    assert rig.intake.last_rejection == "task_trajectory: no task coordinates configured (task_joints or task_frame)"
    assert rig.intake.stats["trajectories_received"] == 2 and rig.intake.stats["trajectories_rejected"] == 2


def test_a_small_trajectory_is_prepared_at_once_and_a_newer_one_supersedes_it(rig):
    raw = _raw(2)
    assert len(raw) <= INLINE_BYTES
    rig.intake.submit(raw)
    first = rig.intake.pending
    assert first is not None and first.points == 2 and first.seq == 1 and first.trajectory.awaits_start
    rig.intake.submit(_raw(3))
    second = rig.intake.pending
    assert second.seq == 2
    assert not rig.intake.claim(first) and rig.intake.stats["trajectories_superseded"] == 1
    assert rig.intake.claim(second) and rig.intake.pending is None


def test_a_large_trajectory_is_prepared_on_the_worker(rig):
    raw = _raw(400)
    assert len(raw) > INLINE_BYTES
    rig.intake.submit(raw)
    assert rig.worker.wait_idle(30.0)
    assert rig.intake.pending.points == 400 and any("prepared: 400 points" in t for _, t in rig.lines)


def test_a_refused_trajectory_leaves_the_current_one_and_is_reported_once(rig):
    rig.intake.submit(_raw(2))
    kept = rig.intake.pending
    rig.intake.submit(_raw(1, target=1e6))  # far outside the joint limits
    assert rig.intake.pending is kept
    reason = rig.intake.take_unreported()
    assert "points[0].positions[joint1]" in reason and "outside" in reason
    assert rig.intake.take_unreported() == ""
    rig.intake.submit(b"\x00" * 300_000)
    assert rig.intake.last_rejection == "message: 300000 bytes, more than max_trajectory_bytes 200000"
    rig.intake.submit(b"\x00\x01\x00\x00garbage")
    assert rig.intake.last_rejection == "message: the serialized data ends early"
    assert rig.intake.pending is kept and rig.intake.stats["trajectories_rejected"] == 3
