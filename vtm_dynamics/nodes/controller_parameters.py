"""The parameters of ``projection_controller``: one table (name, default, description, validator), read once at
start-up into the dict of values the node and its parts read (``params.declare_validated``; ``params.values``
checks the same table without a node).

Every parameter is read-only after start-up (``parameter_policy``): gains, rates, limits, timeouts and caps guard
the robot, so a changed gain needs a restart. The joint lists (``joints``, ``passive_joints``, ``task_joints``,
``task_components``, ``effort_limit_overrides``) and ``task_offset`` are list parameters with an empty default
(``params.ParameterSpec``): listed and dumped by the standard parameter services like every other one.
"""

from __future__ import annotations

import re
from typing import Any

from vtm_dynamics.nodes import params as P

_NAME_RE = re.compile(r"^[A-Za-z_~][A-Za-z0-9_/]*$")


def _ros_name(value: Any) -> str | None:
    ok = isinstance(value, str) and _NAME_RE.match(value) and "//" not in value and not value.endswith("/")
    return None if ok else "must be a ROS name (letters, digits, '_', '/'; not empty)"


JOINTS_DESCRIPTION = ("Joints commanded on <controller_name>/commands, in the effort controller's order. Empty: all "
                      "movable joints of the model in its order. Model joints left out must be passive_joints.")
PASSIVE_DESCRIPTION = ("Joints without actuator (Aghili eqs. (55)-(62)): they get exactly zero effort and the "
                       "controllability condition (64) is reported. Must be joints of the model.")
TASK_JOINTS_DESCRIPTION = ("Task coordinates theta = these joints' coordinates (Aghili eqs. (40)-(46)); "
                           "commands on ~/task_trajectory name them. Excludes task_frame.")
TASK_COMPONENTS_DESCRIPTION = ("With task_frame: components of theta, from x, y, z [m] (world position of the point "
                               "task_offset on the frame) and angle_x, angle_y, angle_z [rad] (rotation about a "
                               "world axis; planar motion only). ~/task_trajectory names them FRAME.COMPONENT.")
TASK_OFFSET_DESCRIPTION = "With task_frame: the point [m] on the frame, in the frame's axes (3 values; default 0)."
OVERRIDES_DESCRIPTION = ("Lower effort limits for commanded joints, as JOINT=LIMIT [N m, N] entries, e.g. "
                         "['elbow_joint=50.0']. A limit above the URDF one (or default_effort_limit) is refused.")

PARAMETERS = (
    P.ParameterSpec("urdf_path", "", "URDF file of the robot (loop closures from the vtm_dynamics URDF extension). "
                    "Empty: read the robot_description topic.", P.existing_file_or_empty, read_only=True,
                    constraint="an existing file or empty"),
    P.ParameterSpec("robot_description_topic", "robot_description", "Topic of the URDF text (std_msgs/String, "
                    "transient local), used when urdf_path is empty.", _ros_name, read_only=True,
                    constraint="a ROS topic name"),
    P.ParameterSpec("controller_name", "effort_controller", "Name of the ros2_control JointGroupEffortController; "
                    "efforts go to <controller_name>/commands (std_msgs/Float64MultiArray).", _ros_name,
                    read_only=True, constraint="a ROS name"),
    P.ParameterSpec("kp", 25.0, "Position gain K_P of a_d = q''_d + K_D e' + K_P e (Aghili eq. (46)) [1/s^2].",
                    P.all_of(P.positive, P.in_range(0.0, 1e6)),
                    constraint="0 < kp <= 1e6 1/s^2"),
    P.ParameterSpec("kd", 10.0, "Velocity gain K_D [1/s] (critically damped: kd = 2 sqrt(kp)).",
                    P.all_of(P.positive, P.in_range(0.0, 1e4)),
                    constraint="0 < kd <= 1e4 1/s"),
    P.ParameterSpec("rate_hz", 250.0, "Control rate [Hz]: one effort command per cycle.",
                    P.in_range(1.0, 2000.0), constraint="1 .. 2000 Hz"),
    P.ParameterSpec("state_timeout", 0.2, "Joint states older than this [s] (node clock, since receipt) stop the "
                    "control law: zero effort is published and diagnostics report WARN. Always on (no value "
                    "disables it).", P.in_range(1e-3, 2.0), constraint="1e-3 .. 2 s"),
    P.ParameterSpec("future_stamp_tolerance", 0.05, "Joint states stamped more than this [s] ahead of the node "
                    "clock are rejected (their stamps would corrupt velocity estimates).",
                    P.in_range(0.0, 10.0), constraint="0 .. 10 s"),
    P.ParameterSpec("diagnostic_period", 1.0, "Period [s] of the status published on /diagnostics.",
                    P.in_range(0.01, 60.0), constraint="0.01 .. 60 s"),
    P.ParameterSpec("rank_tolerance_absolute", 1e-9, "Absolute SVD threshold of the rank of A (units of A's "
                    "entries); see docs/projection.md.", P.all_of(P.non_negative, P.in_range(0.0, 1.0)),
                    read_only=True, constraint="0 .. 1"),
    P.ParameterSpec("rank_tolerance_relative", 1e-10, "Relative SVD threshold (times the largest singular value).",
                    P.all_of(P.non_negative, P.in_range(0.0, 1.0)), read_only=True, constraint="0 .. 1"),
    P.ParameterSpec("weighting_length", 0.0, "Characteristic length kappa [m] of the unit weighting of mixed "
                    "revolute/prismatic joints (Aghili Sec. 7.2, eq. (50)): the torque minimizes "
                    "kappa^2 |f_force|^2 + |f_torque|^2. 0: Euclidean norm.", P.in_range(0.0, 1e3),
                    read_only=True, constraint="0 (off) .. 1000 m"),
    P.ParameterSpec("controllability_tolerance", 1e-2, "Margin of the passive-joint controllability condition "
                    "(Aghili eq. (64), dimensionless) at or below which a direction is not inverted: the added "
                    "torque stays below |f_par| / tolerance and the unmet passive demand is reported.",
                    P.in_range(1e-6, 0.5), read_only=True, constraint="1e-6 .. 0.5"),
    P.ParameterSpec("weight_by_effort_limits", False, "Minimize sum (f_i / limit_i)^2 instead of |f|^2 (Aghili "
                    "Sec. 7.2: W^1/2 = diag(effort limits); passive joints weigh 1). Excludes weighting_length.",
                    read_only=True),
    P.ParameterSpec("force_control", False, "Constraint force control (Aghili eqs. (51)-(52)): once a set point "
                    "arrived on ~/constraint_wrench_setpoint, the generalized constraint force follows it with "
                    "(1 + force_gain) e' + force_integral_gain e = 0. With passive_joints: the nearest force they "
                    "allow.",
                    read_only=True),
    P.ParameterSpec("force_gain", 0.0, "Proportional force gain G_F (dimensionless) of eq. (52).",
                    P.in_range(0.0, 1e3), constraint="0 .. 1000"),
    P.ParameterSpec("force_integral_gain", 0.0, "Integral force gain G_I [1/s] of eq. (52).",
                    P.in_range(0.0, 1e4), constraint="0 .. 1e4 1/s"),
    P.ParameterSpec("force_measurement", "estimate", "Measured constraint force of the force loop: 'topic' "
                    "(geometry_msgs/WrenchStamped on constraint_wrench, frame_id = loop closure name) or "
                    "'estimate' (the set point itself: feedforward only, the integral stays 0).",
                    P.one_of(["estimate", "topic"]), read_only=True, constraint="estimate | topic"),
    P.ParameterSpec("max_constraint_wrench", 1e4, "Largest force [N] or moment [N m] component of a set point or "
                    "a measured constraint wrench; larger messages are refused.", P.in_range(1e-3, 1e7),
                    read_only=True, constraint="1e-3 .. 1e7"),
    P.ParameterSpec("task_frame", "", "Frame whose point gives task coordinates (see task_components); empty: "
                    "none. The law then follows ~/task_trajectory with e'' + kd e' + kp e = 0 in theta exactly.",
                    read_only=True),
    P.ParameterSpec("publish_reactions", True, "Publish the predicted constraint forces on ~/joint_reactions."),
    P.ParameterSpec("max_trajectory_points", 10_000, "Most points of a trajectory on ~/trajectory; a longer one is "
                    "refused (10,000 points: 40 s at 250 Hz, or 2.8 h at one point per second).",
                    P.in_range(1, 10_000_000), constraint="1 .. 1e7"),
    P.ParameterSpec("max_trajectory_bytes", 16_000_000, "Largest serialized trajectory message [bytes]; a larger "
                    "one is refused before it is converted.", P.in_range(1_000, 2_000_000_000),
                    constraint="1e3 .. 2e9 bytes"),
    P.ParameterSpec("max_trajectory_duration", 3600.0, "Latest time_from_start [s] of a trajectory point; a later "
                    "one is refused.", P.in_range(1e-3, 1e7), constraint="1e-3 .. 1e7 s"),
    P.ParameterSpec("default_effort_limit", 0.0, "Effort limit [N m, N] of a commanded joint whose URDF gives none "
                    "(effort missing or 0). 0: such a model is refused.", P.in_range(0.0, 1e7), read_only=True,
                    constraint="0 (refuse) .. 1e7"),
    P.ParameterSpec("joints", (), JOINTS_DESCRIPTION, P.names, constraint="joint names of the model"),
    P.ParameterSpec("passive_joints", (), PASSIVE_DESCRIPTION, P.names, constraint="joint names of the model"),
    P.ParameterSpec("task_joints", (), TASK_JOINTS_DESCRIPTION, P.names, constraint="joint names of the model"),
    P.ParameterSpec("task_components", (), TASK_COMPONENTS_DESCRIPTION, P.strings,
                    constraint="x, y, z, angle_x, angle_y, angle_z"),
    P.ParameterSpec("task_offset", (), TASK_OFFSET_DESCRIPTION, P.numbers(3), constraint="3 values [m] or none"),
    P.ParameterSpec("effort_limit_overrides", (), OVERRIDES_DESCRIPTION, P.strings, constraint="JOINT=LIMIT entries"),
)
