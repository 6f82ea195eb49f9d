"""The URDF's joint limits carried over to task coordinates are bounds that no motion within the joint limits
exceeds (checked on sampled configurations and velocities), exact for selected joints, and reached by the
stretched planar arm (so they are not loose by construction)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from vtm_dynamics.core.projection.desired_trajectory import TrajectoryLimits, joint_trajectory_limits
from vtm_dynamics.core.projection.task_coordinates import FramePoint, SelectedJoints
from vtm_dynamics.core.projection.task_limits import task_trajectory_limits
from vtm_dynamics.core.robot.model import RobotModel

URDF = os.path.join(os.path.dirname(__file__), "..", "..", "..", "urdf")


@pytest.fixture(scope="module")
def arm():
    robot = RobotModel.from_urdf_file(os.path.join(URDF, "planar_3r.urdf"))
    return robot, joint_trajectory_limits(robot, 100, 60.0)


def test_selected_joints_take_exactly_their_joint_limits(arm):
    robot, joints = arm
    limits = task_trajectory_limits(robot, SelectedJoints(robot, ["joint3", "joint1"]), joints)
    assert limits.names == ("joint3", "joint1") and limits.units == ("rad", "rad")
    assert np.array_equal(limits.lower, joints.lower[[2, 0]]) and np.array_equal(limits.velocity, joints.velocity[[2, 0]])


def test_a_frame_point_stays_within_its_bounds_over_sampled_motions(arm):
    robot, joints = arm
    # joint limits of +-100 rad do not restrict a revolute arm: sample angles and speeds within the limits
    task = FramePoint(robot, "tip", ("x", "z", "angle_y"), offset=(0.1, 0.0, 0.0))
    narrow = TrajectoryLimits(joints.names, joints.units, joints.lower, joints.upper, np.array([1.0, 2.0, 3.0]))
    limits = task_trajectory_limits(robot, task, narrow)
    rng = np.random.default_rng(3)
    for _ in range(400):
        q = rng.uniform(-np.pi, np.pi, 3)
        v = rng.uniform(-1.0, 1.0, 3) * narrow.velocity
        theta, J, _ = task.evaluate(robot, q, v)
        assert np.all(theta[:2] >= limits.lower[:2] - 1e-12) and np.all(theta[:2] <= limits.upper[:2] + 1e-12)
        speed = np.abs(J @ v)
        assert np.all(speed <= limits.velocity + 1e-9), (speed, limits.velocity)
    assert limits.units == ("m", "m", "rad") and np.isinf(limits.lower[2])
    assert limits.velocity[2] == pytest.approx(6.0)  # sum of the joint speed limits


def test_the_stretched_planar_arm_reaches_the_bound(arm):
    robot, joints = arm
    task = FramePoint(robot, "tip", ("x", "z"))
    limits = task_trajectory_limits(robot, task, joints)
    stretched = [task.value(robot, np.array([a, 0.0, 0.0])) for a in np.linspace(-np.pi, np.pi, 721)]
    reach = max(np.linalg.norm(p - 0.5 * (limits.lower + limits.upper)) for p in stretched)
    assert reach == pytest.approx(0.5 * (limits.upper - limits.lower)[0], rel=1e-6)
