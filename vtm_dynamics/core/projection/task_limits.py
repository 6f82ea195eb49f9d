"""The URDF's joint limits carried over to task coordinates, so that a trajectory of task coordinates theta
(Aghili eqs. (40)-(46), :mod:`.task_coordinates`) is held to the same robot as a joint trajectory.

* Selected joints (theta = q_j): exactly the position and velocity limits of those joints.
* A point on a frame and rotation angles about world axes: bounds that no motion within the joint limits can
  exceed, from the kinematic chain between the world and the frame (the tree path; loop closures only restrict
  motion further). With r_k the largest distance from joint k's origin to the point (the translations of the
  joints after k and of the frame, plus the travel of prismatic joints on the way - triangle inequality):

  - position component c: |theta_c - o_c| <= r_1, o the origin of the chain's first joint (fixed in the world);
  - its speed: |theta_c'| <= sum over revolute joints of v_k r_k plus sum over prismatic joints of v_k;
  - an angle about a world axis: its speed is at most the sum of v_k over revolute joints (angles themselves are
    unbounded: the controller compares them modulo 2 pi).

  A joint without a velocity limit (or with more than one coordinate) makes the dependent bounds infinite. These
  are necessary conditions: a target within them may still be unreachable, one outside them certainly is.

Units: m, rad, s. Pure functions of the model; no ROS.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.projection.desired_trajectory import TrajectoryLimits
from vtm_dynamics.core.projection.task_coordinates import FramePoint, SelectedJoints, TaskCoordinates
from vtm_dynamics.core.robot.model import RobotModel

_AXES = {"x": 0, "y": 1, "z": 2}


def task_trajectory_limits(robot: RobotModel, task: TaskCoordinates, joint_limits: TrajectoryLimits) -> TrajectoryLimits:
    """Position and speed limits of the task coordinates of ``task`` implied by ``joint_limits`` (the URDF's,
    in velocity order of ``robot``), with the same point and duration caps."""
    if isinstance(task, SelectedJoints):
        rows = [joint_limits.names.index(name) for name in task.names]
        return TrajectoryLimits(tuple(task.names), tuple(joint_limits.units[i] for i in rows),
                                joint_limits.lower[rows].copy(), joint_limits.upper[rows].copy(),
                                joint_limits.velocity[rows].copy(), joint_limits.max_points, joint_limits.max_duration)
    if isinstance(task, FramePoint):
        return _frame_point_limits(robot, task, joint_limits)
    k = len(task.names)  # a task of another kind: only the caps
    return TrajectoryLimits(tuple(task.names), tuple("rad" if a else "m" for a in task.angular), np.full(k, -np.inf),
                            np.full(k, np.inf), np.full(k, np.inf), joint_limits.max_points, joint_limits.max_duration)


def _frame_point_limits(robot: RobotModel, task: FramePoint, joint_limits: TrajectoryLimits) -> TrajectoryLimits:
    model = robot.model
    frame = model.frames[robot.frame_id(task.frame)]
    chain = [int(j) for j in model.supports[frame.parentJoint]][1:]  # from the world's first joint to the frame's
    point = (frame.placement * pin.SE3(np.eye(3), task.offset)).translation
    reach = float(np.linalg.norm(point))  # from the last joint's moving frame to the point
    linear, angular, radius = 0.0, 0.0, np.inf
    by_id = {j.joint_id: j for j in robot.joints}
    for pos, jid in enumerate(reversed(chain)):
        joint = by_id.get(jid)
        if pos > 0:  # the translation from this joint's moving frame to the next joint's origin
            reach += float(np.linalg.norm(model.jointPlacements[chain[len(chain) - pos]].translation))
        if joint is None or joint.nv != 1:
            linear = angular = np.inf
            reach = np.inf
            break
        speed = float(joint_limits.velocity[joint.idx_v])
        if joint.prismatic:
            travel = max(abs(float(joint_limits.lower[joint.idx_v])), abs(float(joint_limits.upper[joint.idx_v])))
            reach += travel
            linear += speed
        else:
            linear += speed * reach
            angular += speed
    if chain:
        origin = model.jointPlacements[chain[0]].translation
        radius = reach
    else:  # a frame on the world: it does not move
        origin, radius, linear, angular = point, 0.0, 0.0, 0.0
    names, units, lower, upper, velocity = [], [], [], [], []
    for name, component in zip(task.names, task.components):
        names.append(name)
        if component in _AXES:
            c = _AXES[component]
            units.append("m")
            lower.append(float(origin[c]) - radius)
            upper.append(float(origin[c]) + radius)
            velocity.append(linear)
        else:
            units.append("rad")
            lower.append(-np.inf)
            upper.append(np.inf)
            velocity.append(angular)
    return TrajectoryLimits(tuple(names), tuple(units), np.array(lower), np.array(upper),
                            np.nan_to_num(np.array(velocity), nan=np.inf), joint_limits.max_points,
                            joint_limits.max_duration)
