"""The *configure* stage of ``projection_controller`` (as a ros2_control controller's ``on_configure``): from the URDF
text and the parameters, the model, the joint lists, the limits and the one controller object of the run. Plain
Python (no node, no executor).

:func:`configure` checks the joint lists against the model (``passive_joints`` and ``joints`` name movable joints
of the model; every model joint is commanded or passive), builds the effort limits (the URDF's, lowered by
``effort_limit_overrides``; ``default_effort_limit`` for a commanded joint without one, 0 refuses the model), the
trajectory limits of the joints (``core.projection.desired_trajectory``) and of the task coordinates
(``task_joints`` or ``task_frame`` + ``task_components`` + ``task_offset``; ``core.projection.task_limits``), the
torque weighting (``weighting_length``, Aghili Sec. 7.2 eq. (50), or ``weight_by_effort_limits``) and the projected
inverse-dynamics controller (Aghili eqs. (45)-(46), passive joints (55)-(62), force control (51)-(52)) with the
URDF's loop closures as constraints. Anything it cannot use raises one line naming the parameter or the model
(``ParameterError``, ``ModelError``, ``UnsupportedJointError``, ``ValueError``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from vtm_dynamics.core.projection.control import ProjectedInverseDynamicsController
from vtm_dynamics.core.projection.desired_trajectory import TrajectoryLimits, joint_trajectory_limits
from vtm_dynamics.core.projection.projector import RankTolerance, unit_weighting
from vtm_dynamics.core.projection.simulation import ConstraintSet
from vtm_dynamics.core.projection.task_coordinates import FramePoint, SelectedJoints, TaskCoordinates
from vtm_dynamics.core.projection.task_limits import task_trajectory_limits
from vtm_dynamics.core.robot.constraints import constraints_from_extension
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes import controller_io as io
from vtm_dynamics.nodes.conversions import JointStateTracker
from vtm_dynamics.nodes.model_source import model_from_urdf_text
from vtm_dynamics.nodes.params import ParameterError


@dataclass(frozen=True, eq=False)
class Configured:
    """What the configure stage built from one URDF text: the ``robot``, its joint-state ``tracker``, the commanded
    joints (names, velocity indices), the effort limits, the trajectory limits of the joints and (with task
    coordinates) of the task, and the ``controller``."""

    text: str
    robot: RobotModel
    tracker: JointStateTracker
    command_joints: tuple[str, ...]
    command_index: np.ndarray
    effort_limits: io.EffortLimits
    trajectory_limits: TrajectoryLimits
    task_limits: TrajectoryLimits | None
    controller: ProjectedInverseDynamicsController

    @property
    def task(self) -> TaskCoordinates | None:
        return self.controller.task


def configure(text: str, p: Mapping[str, Any], effort_overrides: Mapping[str, float]) -> Configured:
    """Build everything of one model (module docstring); ``p`` the node's parameters."""
    robot = model_from_urdf_text(text)
    # velocities are estimated from positions only over gaps up to state_timeout (a longer gap is a stale state)
    tracker = JointStateTracker(robot, max_velocity_gap=p["state_timeout"])
    joints = command_joints(robot, p)
    effort = io.effort_limits(robot, joints, p["default_effort_limit"], effort_overrides)
    limits = joint_trajectory_limits(robot, p["max_trajectory_points"], p["max_trajectory_duration"])
    task = task_of(robot, p)
    controller = build_controller(robot, p, joints, effort, task)
    task_limits = None if task is None else task_trajectory_limits(robot, task, limits)
    return Configured(text, robot, tracker, tuple(joints), robot.v_indices(joints), effort, limits, task_limits,
                      controller)


def command_joints(robot: RobotModel, p: Mapping[str, Any]) -> list[str]:
    """The commanded joints (``joints``, or every movable joint), checked with ``passive_joints``."""
    names = set(robot.joint_names)
    bad = [j for j in p["passive_joints"] if j not in names]
    if bad:
        raise ParameterError(f"passive_joints: not movable joints of {robot.name!r}: {bad} "
                             f"(joints: {list(robot.joint_names)})")
    joints = list(p["joints"] or robot.joint_names)
    bad = [j for j in joints if j not in names]
    if bad:
        raise ParameterError(f"joints: not movable joints of {robot.name!r}: {bad} (joints: {list(robot.joint_names)})")
    listed = set(joints) | set(p["passive_joints"])
    uncommanded = [j for j in robot.joint_names if j not in listed]
    if uncommanded:
        raise ParameterError(f"joints: model joints {uncommanded} are neither commanded nor passive_joints")
    return joints


def task_of(robot: RobotModel, p: Mapping[str, Any]) -> TaskCoordinates | None:
    """The task coordinates chosen by ``task_joints`` or ``task_frame`` (at most one), or None."""
    frame = p["task_frame"]
    if p["task_joints"] and frame:
        raise ParameterError("task_joints: give task_joints or task_frame, not both")
    if p["task_joints"]:
        return SelectedJoints(robot, list(p["task_joints"]))
    if frame:
        offset = tuple(float(x) for x in p["task_offset"]) or (0.0, 0.0, 0.0)
        if len(offset) != 3:
            raise ParameterError(f"task_offset: expected 3 values [m], got {len(offset)}")
        return FramePoint(robot, frame, list(p["task_components"]), offset)
    return None


def build_controller(robot: RobotModel, p: Mapping[str, Any], joints: list[str], effort: io.EffortLimits,
                     task: TaskCoordinates | None) -> ProjectedInverseDynamicsController:
    """The one controller object of the run, with the URDF's loop closures as its first constraints."""
    W = None
    if p["weighting_length"] > 0 and p["weight_by_effort_limits"]:
        raise ParameterError("weight_by_effort_limits: cannot be combined with weighting_length > 0")
    if p["weighting_length"] > 0:
        W = unit_weighting(np.array([j.prismatic for j in robot.joints], dtype=bool), p["weighting_length"])
    elif p["weight_by_effort_limits"]:
        W = io.effort_limit_weighting(robot, effort)
    return ProjectedInverseDynamicsController(
        robot, ConstraintSet(constraints_from_extension(robot)), kp=p["kp"], kd=p["kd"], W=W,
        passive_joints=list(p["passive_joints"]),
        tolerance=RankTolerance(p["rank_tolerance_absolute"], p["rank_tolerance_relative"]),
        controllability_tol=p["controllability_tolerance"], force_gain=p["force_gain"],
        force_integral_gain=p["force_integral_gain"], task=task,
        force_integral_limit=io.integral_limits(robot, joints, effort))
