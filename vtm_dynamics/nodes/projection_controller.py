"""``projection_controller`` node: projected inverse-dynamics control of robots whose constraints change.

Implements the node side of Aghili's projected inverse-dynamics controller (eqs. (45)-(46), passive joints
(55)-(62), controllability (64)); the law itself is ``vtm_dynamics.core.projection.control``. One controller object
lives for the whole run: loop closures of the URDF extension, and joint locks announced while running, are rows of
the constraint matrix A that the next cycle stacks - a lock never restarts or rebuilds the controller.

Inputs
  ``robot_description``  std_msgs/String, transient-local (ROS 2 convention) - used when ``urdf_path`` is empty.
                         The first valid description builds the model and the controller; an invalid one is logged
                         and ignored (the node stays up, waiting). A later, different description is logged and
                         ignored: a running controller does not swap its robot (restart the node to change it).
  ``joint_states``       sensor_msgs/JointState, matched by joint NAME (any order, subsets merged). Messages with
                         NaN, or arrays whose lengths do not match ``name``, are logged and dropped; unknown names
                         are logged once and ignored. Without velocities they are estimated by backward differences.
  ``~/trajectory``       trajectory_msgs/JointTrajectory: the desired motion. It must name every model joint (in any
                         order); it starts at ``header.stamp``, or when it is started (prepared, see below) if the
                         stamp is zero. If its first point lies after t = 0, the state measured when it is started
                         is inserted at t = 0 (smooth start). Sampling: quintic / cubic / linear per segment
                         depending on the fields given (see ``core.projection.desired_trajectory``); after the last point, the last
                         positions are held with zero velocity. A trajectory without points means "stop here": the
                         measured position is held at once. A new trajectory replaces the current one; one that
                         breaks a limit is refused as a whole and the current goal continues.
  ``~/task_trajectory``  trajectory_msgs/JointTrajectory of the task coordinates theta (Aghili eqs. (40)-(46)),
                         configured by ``task_joints`` or ``task_frame`` + ``task_components`` (+ ``task_offset``);
                         ``joint_names`` are their names (a joint name, or ``FRAME.x`` ... ``FRAME.angle_z``).
                         Same pipeline, caps and replacement rules as ``~/trajectory``, and the URDF's limits
                         carried over to theta (``core.projection.task_limits``: exact for selected joints, the
                         reach and speed no motion within the joint limits can exceed for a frame point). The closed loop is e'' + kd e' + kp e = 0 in theta exactly (Theorem 4); the
                         joint-space ``~/trajectory`` gives it only while the projector P is constant.
  ``~/constraint_wrench_setpoint``  geometry_msgs/WrenchStamped (with ``force_control``): ``header.frame_id`` a loop
                         closure of the model; the force [N] and moment [N m], world axes, that the closure shall
                         exert on its child at the child's pair point (eqs. (51)-(52); closures without a set point
                         are driven to zero force). Components beyond ``max_constraint_wrench`` are refused.
  ``constraint_wrench``  geometry_msgs/WrenchStamped, the measured closure wrench, same convention
                         (``force_measurement: topic``); otherwise the set point is the estimate (feedforward).
  ``lock_events``        vtm_msgs/LockEvent: LOCK adds one joint-lock constraint per named joint, bound at the
                         measured configuration, to the SAME controller object; UNLOCK removes it. Unknown joint
                         names are logged and ignored (the known ones of the same event are applied).

Outputs
  ``<controller_name>/commands``  std_msgs/Float64MultiArray, one effort per entry of ``joints`` in that order
                         [N m for revolute, N for prismatic joints] - the ros2_control
                         ``effort_controllers/JointGroupEffortController`` convention. Published every cycle at
                         ``rate_hz``. Passive joints listed in ``joints`` receive exactly 0.0.
  ``~/joint_reactions``  vtm_msgs/JointReactions, every control cycle (see "Constraint forces" below).
  ``/diagnostics``       diagnostic_msgs/DiagnosticArray every ``diagnostic_period``: level, reason, rank of A,
                         degrees of freedom, active constraints, controllability of the passive joints (eq. (64)) with
                         its margin, tolerance, the unmet passive demand per passive joint and the resulting
                         acceleration error, controller object id and how many controllers were built (1), the
                         effort limits in force, saturation since the previous report, the last refused trajectory.

Limits (never command beyond the robot). A desired trajectory is refused as a whole - one log line and the reason on
/diagnostics (WARN), naming field, point and joint, e.g. ``points[17].positions[elbow_joint]: 1e+06 rad outside
[-3.14, 3.14]`` - when a position lies outside the URDF limits of a revolute or prismatic joint (continuous joints
have none), a given velocity or the mean speed between two consecutive points exceeds the URDF velocity limit (a
velocity limit of 0 or none is not checked), a value is not finite, it has more than ``max_trajectory_points``
points, its serialized message exceeds ``max_trajectory_bytes`` or a point lies after ``max_trajectory_duration``.
Every published effort lies in [-limit, +limit] per entry: the URDF effort limit, lowered (never raised) by
``effort_limit_overrides``. A commanded joint whose URDF gives no effort limit (missing or 0) takes
``default_effort_limit``; when that is 0 (the default) the model is refused (at start-up: exit status 2). While the
law asks for more, the entry is saturated, /diagnostics reports WARN with the joints and by how much (never OK
while saturating), and the constraint forces on ``~/joint_reactions`` are those of the saturated command.

Passive joints through lost controllability (rule: bound, then saturate). The core inverts eq. (57) only in
the directions whose controllability margin exceeds ``controllability_tolerance``, so the commanded torque stays
below |f_par| (1 + 1/tolerance) however close the configuration is to losing controllability; the passive demand
it cannot meet is not hidden in a huge torque but reported (``passive_unmet`` per passive joint [N m, N],
``acceleration_error``) with level ERROR while condition (64) fails. The bounded efforts are then saturated at the
effort limits like every other command; the node keeps commanding (a held zero would drop an arm that the active
joints can still partly support).

Off the control loop. A trajectory message is taken serialized; converting, checking and fitting it runs on a
worker thread (messages of at most ``INLINE_BYTES``, a few points, on the callback thread), so the command stream
keeps its period while a long trajectory is prepared or refused. The next control cycle starts the prepared
trajectory (one array copy). A trajectory that arrives while another is prepared supersedes it.

Zero effort before the loop can close. Until a model, a joint state for every joint and a trajectory are
available, and whenever the joint states are older than ``state_timeout``, the node publishes zeros (when it knows
how many joints to command) and reports WARN. Rationale: ros2_control's forward-command controllers keep the last
command they received, so *not* publishing would leave a stale torque from an earlier run or an earlier state
acting on the robot; zero is the defined "no actuation" command, the same value the effort controller itself
writes when it is deactivated. Holding a gravity-loaded arm is the job of its brakes or of a holding trajectory:
send a trajectory with the current position (or one without points) to hold. If the core rejects an input or
returns a non-finite torque, zeros are published and the diagnostics report ERROR. Every callback is guarded: an
unexpected exception is one log line (identical lines at most once per 5 s) and the node keeps serving.

Constraint forces (``JointReactions``). The core returns the generalized constraint force F = A^T lambda of
M q'' + h = tau - F (Aghili, eq. (19), (32)) predicted for the commanded torque, and the multipliers lambda = A^{+T} F
(one per constraint row). The message is filled per model joint (velocity order): ``holding_torques[i] = -F_i``,
the torque [N m] or force [N] along joint i that all active constraints together exert on that coordinate. For a
locked joint whose coordinate no loop closure touches this is exactly the brake torque (its lock row is the unit
row e_i, so -F_i = -lambda_lock). F itself is always unique (it is the (I - P) projection of the applied forces);
``uniquely_determined`` is per joint, from the solvability analysis (Wojtyra & Fraczek,
``core.reactions.solvability``) of the URDF's loop closures plus one driving constraint per locked joint, in 3-D,
at the configuration of the cycle where the active constraint set last changed: false when a rigid-body model
cannot determine that joint's reaction (an overconstrained loop, a brake on a joint the loop already fixes); F
itself is still unique, its split among individual constraints is then one of many. (If the analysis cannot run,
one flag for all joints: ``multipliers_unique`` of the core, Remark 4.) ``wrenches`` is left empty: the projected
controller yields joint-space forces, not 6-D joint wrenches (the estop predictor and the solvability tools
publish those). ``method`` is ``"projection"``.

Run with ros2 run (any ROS 2 installation with this package built)::

    ros2 run vtm_dynamics projection_controller --ros-args \\
        --params-file $(ros2 pkg prefix vtm_dynamics)/share/vtm_dynamics/config/projection_controller.yaml \\
        -p urdf_path:=$(ros2 pkg prefix vtm_dynamics)/share/vtm_dynamics/urdf/slider_crank.urdf

and send a trajectory to ``/projection_controller/trajectory``. With ros2_control: load an
``effort_controllers/JointGroupEffortController`` named like ``controller_name`` whose ``joints`` list equals this
node's ``joints`` parameter (same order), plus a ``joint_state_broadcaster``; spawn both
(``ros2 run controller_manager spawner effort_controller joint_state_broadcaster``) and start this node with
``urdf_path`` empty - it then reads the URDF from ``robot_state_publisher``'s ``robot_description``. Joints of the
model that the effort controller does not command (e.g. the unactuated joints of a closed chain) must be listed in
``passive_joints``; the controller then computes the torques of least norm with those entries zero (eq. (62)).
``launch/projection_controller.launch.py`` starts the node with the package's YAML.

Threads: all callbacks share one mutually exclusive callback group (the default), so a lock event never
interleaves with a control cycle, also under a MultiThreadedExecutor. The trajectory worker touches only its own
job and installs the result by one reference assignment under a lock.

Units: SI (rad, m, s, N m, N); gains K_P [1/s^2], K_D [1/s].

Size: about 930 lines: one node class still holds the parameters, the model, the trajectory intake, the control
cycle with its limits and outputs, and the diagnostics; they are to become stages (configure, activate, update)
over ROS-free parts.
"""

from __future__ import annotations


import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory
from vtm_msgs.msg import JointReactions, LockEvent

from vtm_dynamics.core.excerpt import clip
from vtm_dynamics.core.projection.constraint_wrench import constraint_force_of_wrench
from vtm_dynamics.core.projection.simulation import ConstraintSet, constrained_dynamics
from vtm_dynamics.core.robot.constraints import LoopClosure, constraints_from_extension
from vtm_dynamics.core.robot.model import ModelError, RobotModel
from vtm_dynamics.core.projection.control import ProjectedControl, ProjectedInverseDynamicsController
from vtm_dynamics.core.projection.task_coordinates import FramePoint, SelectedJoints, TaskCoordinates
from vtm_dynamics.core.projection.task_limits import task_trajectory_limits
from vtm_dynamics.core.projection.projector import RankTolerance, unit_weighting
from vtm_dynamics.nodes import controller_io as io
from vtm_dynamics.nodes import graph
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes.conversions import (
    JointStateError,
    JointStateSnapshot,
    JointStateTracker,
    UnsupportedJointError,
    configuration_from_positions,
    stamp_to_seconds,
)
from vtm_dynamics.nodes.latest_worker import LatestWorker
from vtm_dynamics.nodes.model_source import load_urdf_text, model_from_urdf_text
from vtm_dynamics.nodes.node_main import run_node
from vtm_dynamics.core.projection.desired_trajectory import (PiecewiseTrajectory, TrajectoryError, TrajectoryLimits,
                                                             check_start_segment, joint_trajectory_limits)

NODE_NAME = "projection_controller"
_NAME_RE = re.compile(r"^[A-Za-z_~][A-Za-z0-9_/]*$")


def _ros_name(value: Any) -> str | None:
    ok = isinstance(value, str) and _NAME_RE.match(value) and "//" not in value and not value.endswith("/")
    return None if ok else "must be a ROS name (letters, digits, '_', '/'; not empty)"


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
                    P.all_of(P.positive, P.in_range(0.0, 1e6)), float_range=(0.0, 1e6),
                    constraint="0 < kp <= 1e6 1/s^2"),
    P.ParameterSpec("kd", 10.0, "Velocity gain K_D [1/s] (critically damped: kd = 2 sqrt(kp)).",
                    P.all_of(P.positive, P.in_range(0.0, 1e4)), float_range=(0.0, 1e4),
                    constraint="0 < kd <= 1e4 1/s"),
    P.ParameterSpec("rate_hz", 250.0, "Control rate [Hz]: one effort command per cycle.",
                    P.in_range(1.0, 2000.0), float_range=(1.0, 2000.0), constraint="1 .. 2000 Hz"),
    P.ParameterSpec("state_timeout", 0.2, "Joint states older than this [s] (node clock, since receipt) stop the "
                    "control law: zero effort is published and diagnostics report WARN. Always on (no value "
                    "disables it).", P.in_range(1e-3, 2.0), float_range=(1e-3, 2.0), constraint="1e-3 .. 2 s"),
    P.ParameterSpec("future_stamp_tolerance", 0.05, "Joint states stamped more than this [s] ahead of the node "
                    "clock are rejected (their stamps would corrupt velocity estimates).",
                    P.in_range(0.0, 10.0), float_range=(0.0, 10.0), constraint="0 .. 10 s"),
    P.ParameterSpec("diagnostic_period", 1.0, "Period [s] of the status published on /diagnostics.",
                    P.in_range(0.01, 60.0), float_range=(0.01, 60.0), constraint="0.01 .. 60 s"),
    P.ParameterSpec("rank_tolerance_absolute", 1e-9, "Absolute SVD threshold of the rank of A (units of A's "
                    "entries); see docs/projection.md.", P.all_of(P.non_negative, P.in_range(0.0, 1.0)),
                    read_only=True, constraint="0 .. 1"),
    P.ParameterSpec("rank_tolerance_relative", 1e-10, "Relative SVD threshold (times the largest singular value).",
                    P.all_of(P.non_negative, P.in_range(0.0, 1.0)), read_only=True, constraint="0 .. 1"),
    P.ParameterSpec("weighting_length", 0.0, "Characteristic length kappa [m] of the unit weighting of mixed "
                    "revolute/prismatic joints (Aghili Sec. 7.2, eq. (50)): the torque minimizes "
                    "kappa^2 |f_force|^2 + |f_torque|^2. 0: Euclidean norm.", P.in_range(0.0, 1e3),
                    read_only=True, float_range=(0.0, 1e3), constraint="0 (off) .. 1000 m"),
    P.ParameterSpec("controllability_tolerance", 1e-2, "Margin of the passive-joint controllability condition "
                    "(Aghili eq. (64), dimensionless) at or below which a direction is not inverted: the added "
                    "torque stays below |f_par| / tolerance and the unmet passive demand is reported.",
                    P.in_range(1e-6, 0.5), read_only=True, float_range=(1e-6, 0.5), constraint="1e-6 .. 0.5"),
    P.ParameterSpec("weight_by_effort_limits", False, "Minimize sum (f_i / limit_i)^2 instead of |f|^2 (Aghili "
                    "Sec. 7.2: W^1/2 = diag(effort limits); passive joints weigh 1). Excludes weighting_length.",
                    read_only=True),
    P.ParameterSpec("force_control", False, "Constraint force control (Aghili eqs. (51)-(52)): once a set point "
                    "arrived on ~/constraint_wrench_setpoint, the generalized constraint force follows it with "
                    "(1 + force_gain) e' + force_integral_gain e = 0. With passive_joints: the nearest force they "
                    "allow.",
                    read_only=True),
    P.ParameterSpec("force_gain", 0.0, "Proportional force gain G_F (dimensionless) of eq. (52).",
                    P.in_range(0.0, 1e3), float_range=(0.0, 1e3), constraint="0 .. 1000"),
    P.ParameterSpec("force_integral_gain", 0.0, "Integral force gain G_I [1/s] of eq. (52).",
                    P.in_range(0.0, 1e4), float_range=(0.0, 1e4), constraint="0 .. 1e4 1/s"),
    P.ParameterSpec("force_measurement", "estimate", "Measured constraint force of the force loop: 'topic' "
                    "(geometry_msgs/WrenchStamped on constraint_wrench, frame_id = loop closure name) or "
                    "'estimate' (the set point itself: feedforward only, the integral stays 0).",
                    P.one_of(["estimate", "topic"]), read_only=True, constraint="estimate | topic"),
    P.ParameterSpec("max_constraint_wrench", 1e4, "Largest force [N] or moment [N m] component of a set point or "
                    "a measured constraint wrench; larger messages are refused.", P.in_range(1e-3, 1e7),
                    read_only=True, float_range=(1e-3, 1e7), constraint="1e-3 .. 1e7"),
    P.ParameterSpec("task_frame", "", "Frame whose point gives task coordinates (see task_components); empty: "
                    "none. The law then follows ~/task_trajectory with e'' + kd e' + kp e = 0 in theta exactly.",
                    read_only=True),
    P.ParameterSpec("publish_reactions", True, "Publish the predicted constraint forces on ~/joint_reactions."),
    P.ParameterSpec("max_trajectory_points", 10_000, "Most points of a trajectory on ~/trajectory; a longer one is "
                    "refused (10,000 points: 40 s at 250 Hz, or 2.8 h at one point per second).",
                    P.in_range(1, 10_000_000), int_range=(1, 10_000_000), constraint="1 .. 1e7"),
    P.ParameterSpec("max_trajectory_bytes", 16_000_000, "Largest serialized trajectory message [bytes]; a larger "
                    "one is refused before it is converted.", P.in_range(1_000, 2_000_000_000),
                    int_range=(1_000, 2_000_000_000), constraint="1e3 .. 2e9 bytes"),
    P.ParameterSpec("max_trajectory_duration", 3600.0, "Latest time_from_start [s] of a trajectory point; a later "
                    "one is refused.", P.in_range(1e-3, 1e7), float_range=(1e-3, 1e7), constraint="1e-3 .. 1e7 s"),
    P.ParameterSpec("default_effort_limit", 0.0, "Effort limit [N m, N] of a commanded joint whose URDF gives none "
                    "(effort missing or 0). 0: such a model is refused.", P.in_range(0.0, 1e7), read_only=True,
                    float_range=(0.0, 1e7), constraint="0 (refuse) .. 1e7"),
)
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


#: A serialized trajectory up to this size [bytes] is read on the callback thread (a few points at most: a hold takes
#: effect at once, even while the worker prepares a long trajectory); anything larger goes to the worker.
INLINE_BYTES = 2048


#: [s] pause of the trajectory worker after each chunk of points (see ``_let_others_run``).
PAUSE = 2e-4


def _let_others_run() -> None:
    """Called by the trajectory worker every few hundred points: a short sleep releases the interpreter lock long
    enough for the control cycle to take it at once, instead of after the interpreter's switch interval."""
    time.sleep(PAUSE)


@dataclass(frozen=True)
class PreparedTrajectory:
    """A checked trajectory waiting for the control cycle to start it. ``stamp`` [s]: its ``header.stamp``
    (0: start on activation); ``seq``: its place in the arrival order (a newer arrival supersedes it)."""

    trajectory: PiecewiseTrajectory | None  # None: hold the measured position
    stamp: float
    points: int
    seq: int
    task: bool = False  # a trajectory of the task coordinates theta (~/task_trajectory)


@dataclass(frozen=True)
class ActiveTrajectory:
    """The trajectory being followed: sampled at (node time - ``start``) [s]; ``points`` as received."""

    trajectory: PiecewiseTrajectory
    start: float
    points: int
    task: bool = False


class ProjectionController(Node):
    """See the module docstring. Build with ``ProjectionController(parameter_overrides=[...])`` or from ROS args.

    Raises ``P.ParameterError`` / ``ModelError`` at construction when a start parameter is invalid or the model
    given by ``urdf_path`` cannot be used (``main`` turns these into exit code 2 with a one-line message).
    """

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(NODE_NAME, **node_kwargs)
        self.log = graph.LogLimiter(self.get_logger())  # callback thread
        self.worker_log = graph.LogLimiter(self.get_logger())  # trajectory worker thread
        self.worker = LatestWorker(f"{NODE_NAME}_trajectories", self._on_worker_error)
        self.p = P.declare_validated(self, PARAMETERS, self._on_parameters)
        self.joints_param = self._declare_names("joints", JOINTS_DESCRIPTION)
        self.passive_param = self._declare_names("passive_joints", PASSIVE_DESCRIPTION)
        self.task_joints = self._declare_names("task_joints", TASK_JOINTS_DESCRIPTION)
        self.task_components = self._declare_strings("task_components", TASK_COMPONENTS_DESCRIPTION)
        self.task_offset = self._declare_doubles("task_offset", TASK_OFFSET_DESCRIPTION)
        self.task = None  # TaskCoordinates, built with the model
        self.effort_overrides = io.parse_effort_overrides(
            self._declare_strings("effort_limit_overrides", OVERRIDES_DESCRIPTION))
        self.robot: RobotModel | None = None
        self.controller: ProjectedInverseDynamicsController | None = None
        self.controller_builds = 0
        self.model_text = ""
        self.model_error = "waiting for robot_description"
        self.model_rejected = False  # a description arrived and could not be used
        self.tracker: JointStateTracker | None = None
        self.command_index = np.zeros(0, dtype=int)
        self.trajectory_limits: TrajectoryLimits | None = None
        self.task_limits: TrajectoryLimits | None = None  # the URDF's limits carried over to the task coordinates
        self.effort_limits: io.EffortLimits | None = None
        self.saturation: io.SaturationWindow | None = None
        self.pending: PreparedTrajectory | None = None  # set by the worker, started by the control cycle
        self.active: ActiveTrajectory | None = None  # the control cycle's own
        self.last_state_time: float | None = None  # [s] node clock at receipt
        self.last_output: ProjectedControl | None = None
        self.status = (io.WARN, "starting")
        self.stats = {"cycles": 0, "zero_cycles": 0, "saturated_cycles": 0, "joint_states_rejected": 0,
                      "trajectories_received": 0, "trajectories": 0, "trajectories_rejected": 0,
                      "trajectories_superseded": 0, "lock_events": 0, "lock_names_ignored": 0}
        self.update_times: deque[float] = deque(maxlen=500)
        self.preparation_ms = 0.0  # [ms] of the last trajectory prepared by the worker
        self.reported_unknown: set[str] = set()
        self.last_rejection = ""
        self._rejection_unreported = False
        self._lock = threading.Lock()  # guards what the worker hands over: pending, _submitted, rejections
        self._submitted = 0  # sequence number of the newest trajectory handed to the worker
        self.wrench_setpoints: dict[str, np.ndarray] = {}  # loop closure name -> [f; m] [N, N m], world axes
        self.wrench_measured: dict[str, np.ndarray] = {}
        self.last_cycle_time: float | None = None
        self.saturated_last = False  # the previous cycle's command was saturated (holds the force integral)
        self.uniqueness: tuple[tuple[str, ...], list[bool] | None] | None = None  # (constraint names, per joint)

        if self.p["urdf_path"]:
            self._set_model(load_urdf_text(urdf_path=self.p["urdf_path"]), self.p["urdf_path"], strict=True)

        guard = self._guard
        if not self.p["urdf_path"]:
            self.create_subscription(String, self.p["robot_description_topic"],
                                     guard("robot_description", self._on_description), graph.LATCHED)
        self.create_subscription(JointState, "joint_states", guard("joint_states", self._on_joint_state),
                                 graph.sensor_qos(20))
        # serialized: the conversion of a long trajectory happens on the worker, not here
        self.create_subscription(JointTrajectory, "~/trajectory", guard("trajectory", self._on_trajectory), 10,
                                 raw=True)
        self.create_subscription(JointTrajectory, "~/task_trajectory",
                                 guard("task_trajectory", self._on_task_trajectory), 10, raw=True)
        self.create_subscription(LockEvent, "lock_events", guard("lock_events", self._on_lock_event),
                                 graph.events_qos(50))
        if self.p["force_control"]:
            self.create_subscription(WrenchStamped, "~/constraint_wrench_setpoint",
                                     guard("constraint_wrench_setpoint", self._on_wrench_setpoint), 10)
            if self.p["force_measurement"] == "topic":
                self.create_subscription(WrenchStamped, "constraint_wrench",
                                         guard("constraint_wrench", self._on_wrench_measured), graph.sensor_qos(20))
        self.pub_cmd = self.create_publisher(Float64MultiArray, f"{self.p['controller_name']}/commands",
                                             graph.OUTPUT_DEPTH)
        self.pub_reactions = self.create_publisher(JointReactions, "~/joint_reactions", graph.OUTPUT_DEPTH)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", graph.OUTPUT_DEPTH)
        self.control_timer = None
        self.diag_timer = None
        self._make_timers()
        self.get_logger().info(
            f"projection_controller ready: model {self.robot.name if self.robot else '(waiting for robot_description)'}"
            f", commands on {self.pub_cmd.topic_name}, {self.p['rate_hz']} Hz, kp {self.p['kp']}, kd {self.p['kd']}"
        )

    def destroy_node(self) -> None:
        self.worker.stop()
        super().destroy_node()

    def _guard(self, where: str, func: Callable) -> Callable:
        return graph.guarded(self.log, where)(func)

    # ================================================================== parameters
    def _declare_strings(self, name: str, description: str) -> tuple[str, ...]:
        """A read-only string-array parameter (declared by type: an empty list default would be a byte array)."""
        param = self.declare_parameter(name, Parameter.Type.STRING_ARRAY,
                                       ParameterDescriptor(name=name, description=description, read_only=True))
        return tuple(param.value or [])

    def _declare_doubles(self, name: str, description: str) -> tuple[float, ...]:
        param = self.declare_parameter(name, Parameter.Type.DOUBLE_ARRAY,
                                       ParameterDescriptor(name=name, description=description, read_only=True))
        return tuple(float(x) for x in (param.value or []))

    def _task_of(self, robot: RobotModel) -> TaskCoordinates | None:
        """The task coordinates chosen by task_joints or task_frame (at most one), or None."""
        frame = self.p["task_frame"]
        if self.task_joints and frame:
            raise P.ParameterError("task_joints: give task_joints or task_frame, not both")
        if self.task_joints:
            return SelectedJoints(robot, list(self.task_joints))
        if frame:
            offset = self.task_offset or (0.0, 0.0, 0.0)
            if len(offset) != 3:
                raise P.ParameterError(f"task_offset: expected 3 values [m], got {len(offset)}")
            return FramePoint(robot, frame, list(self.task_components), offset)
        return None

    def _declare_names(self, name: str, description: str) -> tuple[str, ...]:
        value = self._declare_strings(name, description)
        if len(set(value)) != len(value):
            raise P.ParameterError(f"{name}: repeated joint names (got {list(value)!r})")
        return value

    def _on_parameters(self, changes: dict[str, Any]) -> None:
        """Never called after start-up: every parameter of this node (gains, rates, limits, timeouts, caps) is
        read-only once the node runs (``parameter_policy``); a changed gain needs a restart."""
        self.p.update(changes)

    def _make_timers(self) -> None:
        self.control_timer = self.create_timer(1.0 / self.p["rate_hz"], self._guard("control", self._on_control))
        self.diag_timer = self.create_timer(self.p["diagnostic_period"],
                                            self._guard("diagnostics", self._publish_diagnostics))

    # ================================================================== model
    def _set_model(self, text: str, source: str, strict: bool = False) -> None:
        """Build model, limits and controller from URDF text. ``strict``: raise on errors (start-up), else log."""
        if self.controller is not None:
            if text != self.model_text:
                self.log("warning", f"{source}: a different robot description arrived; the running controller "
                                    f"keeps its model {self.robot.name!r} (restart the node to change the robot)")
            return
        try:
            robot = model_from_urdf_text(text)
            tracker = JointStateTracker(robot)
            command_index = self._check_joint_lists(robot)
            effort = io.effort_limits(robot, self._command_joints_of(robot), self.p["default_effort_limit"],
                                      self.effort_overrides)
            limits = joint_trajectory_limits(robot, self.p["max_trajectory_points"], self.p["max_trajectory_duration"])
            task = self._task_of(robot)
            controller = self._build_controller(robot, effort, task)
        except (ModelError, UnsupportedJointError, P.ParameterError, ValueError) as err:
            if strict:
                raise
            self.model_error = f"{source}: {graph.one_line(err)}"
            self.model_rejected = True
            self.log("error", f"{source}: robot model rejected, still waiting for a usable one "
                              f"({graph.one_line(err)})")
            return
        self.robot, self.tracker, self.command_index = robot, tracker, command_index
        self.effort_limits, self.saturation, self.trajectory_limits = effort, io.SaturationWindow(effort), limits
        self.controller = controller
        self.task = controller.task
        self.task_limits = None if self.task is None else task_trajectory_limits(robot, self.task, limits)
        self.model_text = text
        self.model_error = ""
        self.model_rejected = False
        self.controller_builds += 1
        closures = ", ".join(controller.constraints.names) or "none"
        self.get_logger().info(f"model {robot.name!r} from {source}: joints {list(robot.joint_names)}, "
                               f"constraints {closures}, commanded joints {self.command_joints}, effort limits "
                               f"{effort.text()}")

    def _command_joints_of(self, robot: RobotModel) -> list[str]:
        return list(self.joints_param or robot.joint_names)

    def _check_joint_lists(self, robot: RobotModel) -> np.ndarray:
        names = set(robot.joint_names)
        bad = [j for j in self.passive_param if j not in names]
        if bad:
            raise P.ParameterError(f"passive_joints: not movable joints of {robot.name!r}: {bad} "
                                   f"(joints: {list(robot.joint_names)})")
        joints = self._command_joints_of(robot)
        bad = [j for j in joints if j not in names]
        if bad:
            raise P.ParameterError(f"joints: not movable joints of {robot.name!r}: {bad} "
                                   f"(joints: {list(robot.joint_names)})")
        listed = set(joints) | set(self.passive_param)
        uncommanded = [j for j in robot.joint_names if j not in listed]
        if uncommanded:
            raise P.ParameterError(f"joints: model joints {uncommanded} are neither commanded nor passive_joints")
        return robot.v_indices(joints)

    def _build_controller(self, robot: RobotModel, effort: io.EffortLimits,
                          task: TaskCoordinates | None = None) -> ProjectedInverseDynamicsController:
        W = None
        if self.p["weighting_length"] > 0 and self.p["weight_by_effort_limits"]:
            raise P.ParameterError("weight_by_effort_limits: cannot be combined with weighting_length > 0")
        if self.p["weighting_length"] > 0:
            prismatic = [j.prismatic for j in robot.joints]
            W = unit_weighting(np.array(prismatic, dtype=bool), self.p["weighting_length"])
        elif self.p["weight_by_effort_limits"]:
            W = io.effort_limit_weighting(robot, effort)
        return ProjectedInverseDynamicsController(
            robot,
            ConstraintSet(constraints_from_extension(robot)),
            kp=self.p["kp"],
            kd=self.p["kd"],
            W=W,
            passive_joints=list(self.passive_param),
            tolerance=RankTolerance(self.p["rank_tolerance_absolute"], self.p["rank_tolerance_relative"]),
            controllability_tol=self.p["controllability_tolerance"],
            force_gain=self.p["force_gain"],
            force_integral_gain=self.p["force_integral_gain"],
            task=task,
            force_integral_limit=io.integral_limits(robot, self._command_joints_of(robot), effort),
        )

    @property
    def command_joints(self) -> list[str]:
        if self.robot is not None:
            return self._command_joints_of(self.robot)
        return list(self.joints_param)

    def _on_description(self, msg: String) -> None:
        self._set_model(msg.data, "robot_description")

    # ================================================================== inputs
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_joint_state(self, msg: JointState) -> None:
        if self.tracker is None:
            return
        ahead = stamp_to_seconds(msg.header.stamp) - self._now()
        if ahead > self.p["future_stamp_tolerance"]:
            self.stats["joint_states_rejected"] += 1
            self.log("warning", f"joint_states: message ignored (header.stamp: {ahead:.3f} s in the future, "
                                f"future_stamp_tolerance {self.p['future_stamp_tolerance']:g} s)")
            return
        try:
            parsed = self.tracker.update(msg)
        except JointStateError as err:
            self.stats["joint_states_rejected"] += 1
            self.log("warning", f"joint_states: message ignored ({graph.one_line(err)})")
            return
        # remembered by a short excerpt: names of megabytes must not accumulate (a cut name collides at worst,
        # and is then not reported again)
        new_unknown = {clip(n) for n in parsed.unknown_names} - self.reported_unknown
        if new_unknown and len(self.reported_unknown) < 1000:
            self.reported_unknown |= new_unknown
            self.log("warning", "joint_states: ignoring joints the model does not have: "
                                f"{io.shown(sorted(new_unknown))}")
        if parsed.positions:
            self.last_state_time = self._now()

    def _measured(self) -> JointStateSnapshot | None:
        """Snapshot of the measured state, or None while some joint was never reported."""
        if self.tracker is None or self.tracker.missing:
            return None
        return self.tracker.snapshot()

    def _on_task_trajectory(self, raw: bytes) -> None:
        """A trajectory of the task coordinates (joint_names = their names, e.g. ``tip.x``); same pipeline."""
        if self.task is None:
            self.stats["trajectories_received"] += 1
            self._reject("task_trajectory: no task coordinates configured (task_joints or task_frame)", self.log)
            return
        self._on_trajectory(raw, task=True)

    def _on_trajectory(self, raw: bytes, task: bool = False) -> None:
        """Hand the serialized trajectory to the worker (a small one is read here): bounded time on this thread."""
        self.stats["trajectories_received"] += 1
        if self.robot is None or self.trajectory_limits is None:
            self._reject("trajectory: no robot model yet", self.log)
            return
        too_big = io.trajectory_message_bytes_ok(len(raw), self.p["max_trajectory_bytes"])
        if too_big:
            self._reject(too_big, self.log)
            return
        # one limit for every way a command comes in: task coordinates are held to the URDF's joint limits too
        base = self.task_limits if task else self.trajectory_limits
        limits = io.with_caps(base, self.p["max_trajectory_points"], self.p["max_trajectory_duration"])
        with self._lock:
            self._submitted += 1  # supersedes whatever arrived before, prepared or not
            seq = self._submitted
        if len(raw) <= INLINE_BYTES:
            self._prepare(seq, raw, limits, self.log, task=task)
        else:
            self.worker.submit(lambda: self._prepare(seq, raw, limits, self.worker_log, _let_others_run, task))

    def _prepare(self, seq: int, raw: bytes, limits: TrajectoryLimits, log: Callable[[str, str], Any],
                 pause: Callable[[], None] | None = None, task: bool = False) -> None:
        """Convert, check and fit one trajectory; leave it for the control cycle unless a newer one arrived.

        Runs on the worker thread (or, for a message of a few points, on the callback thread)."""
        t0 = time.perf_counter()
        try:
            arrays = io.read_trajectory(raw, limits, pause)  # numpy arrays, no Python object per point
            points, stamp = arrays.n_points, arrays.stamp
            # the copy with room for the start state happens here; the control cycle only fills that row in
            traj = io.trajectory_from_arrays(arrays, limits).with_start_slot() if points else None
        except TrajectoryError as err:
            self._reject(graph.one_line(err, limit=400), log)
            return
        except Exception as err:  # noqa: BLE001 - e.g. the middleware's deserializer refusing the bytes
            self._reject(f"message: cannot be read ({type(err).__name__}: {graph.one_line(err, limit=200)})", log)
            return
        with self._lock:
            self.preparation_ms = 1e3 * (time.perf_counter() - t0)
            if seq != self._submitted:
                self.stats["trajectories_superseded"] += 1
                return
            self.pending = PreparedTrajectory(traj, stamp, points, seq, task)
        if points:
            log("info", f"trajectory prepared: {points} points over {traj.duration:.3f} s in "
                        f"{self.preparation_ms:.0f} ms")

    def _activate(self, pending: PreparedTrajectory, state: JointStateSnapshot, now: float) -> None:
        """Control cycle: start a prepared trajectory from the state measured now (O(points) copy at most)."""
        with self._lock:
            if self.pending is pending:
                self.pending = None
            if pending.seq != self._submitted:
                self.stats["trajectories_superseded"] += 1
                return
        positions, velocities = state.positions, state.v
        if pending.task:  # start from the measured task coordinates theta(q), theta' = J q'
            theta, J, _ = self.task.evaluate(self.robot, state.q, state.v)
            positions, velocities = theta, J @ state.v
        if pending.trajectory is None:  # hold here
            traj, start = PiecewiseTrajectory([0.0], positions[None, :]), now
        else:
            traj = pending.trajectory
            from_measured = traj.awaits_start
            traj.set_start(positions, velocities)  # O(joints): the worker made room for it
            start = pending.stamp if pending.stamp > 0 else now
            if from_measured:  # the segment from the measured state: its limits can be checked only now
                try:
                    check_start_segment(traj.positions[0], traj.positions[1], traj.times[1] - (now - start),
                                        self.task_limits if pending.task else self.trajectory_limits)
                except TrajectoryError as err:
                    self._reject(graph.one_line(err, limit=400), self.log)
                    return
        self.active = ActiveTrajectory(traj, start, pending.points, pending.task)
        with self._lock:
            self.stats["trajectories"] += 1
        self.log("info", f"trajectory {pending.seq} started: {pending.points} points, until {traj.duration:.3f} s "
                         f"after {'its stamp' if pending.stamp > 0 else 'now'}")

    def _reject(self, reason: str, log: Callable[[str, str], Any]) -> None:
        with self._lock:
            self.stats["trajectories_rejected"] += 1
            self.last_rejection = reason
            self._rejection_unreported = True
        log("error", f"trajectory rejected, the previous goal continues: {reason}")

    def _on_worker_error(self, err: BaseException) -> None:
        self._reject(f"trajectory: unexpected {type(err).__name__}: {graph.one_line(err)}", self.worker_log)

    def _closure_wrench(self, msg: WrenchStamped, field: str) -> tuple[str, np.ndarray] | None:
        """(closure name, [f; m]) of a wrench message, or None (logged) when it names no loop closure of the
        model or breaks max_constraint_wrench."""
        if self.controller is None:
            self.log("warning", f"{field}: no robot model yet; message ignored")
            return None
        name = msg.header.frame_id
        closures = {c.name for c in self.controller.constraints.constraints if isinstance(c, LoopClosure)}
        if name not in closures:
            self.log("warning", f"{field}: header.frame_id: {clip(name)!r} is not a loop closure of the model "
                                f"({io.shown(sorted(closures))}); message ignored")
            return None
        f, m = msg.wrench.force, msg.wrench.torque
        w = np.array([f.x, f.y, f.z, m.x, m.y, m.z], dtype=float)
        cap = self.p["max_constraint_wrench"]
        if not np.all(np.isfinite(w)) or np.max(np.abs(w)) > cap:
            self.log("warning", f"{field}: wrench: components must be finite and within +-{cap:g} N / N m; "
                                "message ignored")
            return None
        return name, w

    def _on_wrench_setpoint(self, msg: WrenchStamped) -> None:
        got = self._closure_wrench(msg, "constraint_wrench_setpoint")
        if got is None:
            return
        closure = next(c for c in self.controller.constraints.constraints if c.name == got[0])
        state = self._measured()
        q = state.q if state is not None else self.robot.neutral()
        if not constraint_force_of_wrench(self.robot, closure, q, got[1]).exact:
            self.log("error", f"constraint_wrench_setpoint: {got[0]!r}: this closure's rows are not a wrench of "
                              "its pair in this model (see docs/projection.md); set point ignored")
            return
        self.wrench_setpoints[got[0]] = got[1]

    def _on_wrench_measured(self, msg: WrenchStamped) -> None:
        got = self._closure_wrench(msg, "constraint_wrench")
        if got is not None:
            self.wrench_measured[got[0]] = got[1]

    def _force_demand(self, q: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(F_d, F_measured) of eqs. (51)-(52) at q, or (None, None) while force control is off or waits for its
        first set point. Closures without a set point are driven to zero constraint force (F_d is the whole
        constraint force, eq. (52)); closures without a measurement count as meeting their set point."""
        if not self.p["force_control"] or not self.wrench_setpoints:
            return None, None
        n = self.robot.nv
        F_d, F_m = np.zeros(n), np.zeros(n)
        for c in self.controller.constraints.constraints:
            if not isinstance(c, LoopClosure):
                continue
            w_d = self.wrench_setpoints.get(c.name, np.zeros(6))
            Fd_c = constraint_force_of_wrench(self.robot, c, q, w_d).force
            F_d += Fd_c
            w_m = self.wrench_measured.get(c.name)
            F_m += Fd_c if w_m is None else constraint_force_of_wrench(self.robot, c, q, w_m).force
        return F_d, (F_m if self.p["force_measurement"] == "topic" else None)

    def _on_lock_event(self, msg: LockEvent) -> None:
        self.stats["lock_events"] += 1
        if msg.action not in (LockEvent.LOCK, LockEvent.UNLOCK):
            self.log("error", f"lock_events: unknown action {msg.action} ignored (LOCK=0, UNLOCK=1)")
            return
        if self.controller is None:
            self.log("error", f"lock_events: no robot model yet; event for {io.shown(msg.joint_names)} ignored")
            return
        if not msg.joint_names:
            self.log("warning", "lock_events: joint_names: empty, event ignored")
            return
        names = list(dict.fromkeys(msg.joint_names))
        known = set(self.robot.joint_names)
        unknown = [j for j in names if j not in known]
        if unknown:
            self.stats["lock_names_ignored"] += len(unknown)
            self.log("warning", f"lock_events: unknown joints {io.shown(unknown)} ignored")
        state = self._measured()
        active = set(self.controller.constraints.names)
        changed = []
        for j in names:
            if j not in known:
                continue
            name = f"lock({j})"
            if msg.action == LockEvent.LOCK and name not in active:
                # bound at the measured configuration when known (the angle only matters to simulations)
                self.controller.lock_joints(j, None if state is None else state.q, name=name)
                changed.append(j)
            elif msg.action == LockEvent.UNLOCK and name in active:
                self.controller.remove_constraint(name)
                changed.append(j)
        verb = "locked" if msg.action == LockEvent.LOCK else "unlocked"
        if changed:
            self.get_logger().info(f"lock_events: {verb} {changed} (source {msg.source[:100]!r}); active "
                                   f"constraints: {list(self.controller.constraints.names)}")

    # ================================================================== control cycle
    def _publish_zero(self, level: int, reason: str) -> None:
        self.status = (level, reason)
        self.stats["zero_cycles"] += 1
        n = len(self.command_joints)
        if n:
            self.pub_cmd.publish(io.command_message(np.zeros(n)))

    def _on_control(self) -> None:
        self.stats["cycles"] += 1
        try:
            self._control_cycle()
        except Exception as err:  # noqa: BLE001 - whatever failed, the robot gets the defined zero command
            text = f"control: unexpected {type(err).__name__}: {graph.one_line(err)}"
            self.log("error", f"{text}; zero effort")
            self._publish_zero(io.ERROR, text)

    def _control_cycle(self) -> None:
        if self.controller is None:
            level = io.ERROR if self.model_rejected else io.WARN
            self._publish_zero(level, f"no robot model ({self.model_error})")
            return
        now = self._now()
        state = self._measured()
        if state is None:
            self._publish_zero(io.WARN, f"waiting for joint_states of {io.shown(self.tracker.missing)}")
            return
        timeout = self.p["state_timeout"]
        if self.last_state_time is None or now - self.last_state_time > timeout:
            self._publish_zero(io.WARN, f"joint_states older than state_timeout ({timeout} s)")
            return
        pending = self.pending  # one read: the worker may leave a newer one at any time
        if pending is not None:
            self._activate(pending, state, now)
        active = self.active
        if active is None:
            self._publish_zero(io.WARN, "waiting for a trajectory on ~/trajectory")
            return
        t0 = time.perf_counter()
        try:
            sample = active.trajectory.sample(now - active.start)
            F_d, F_m = self._force_demand(state.q)
            dt = 0.0 if self.last_cycle_time is None else min(max(now - self.last_cycle_time, 0.0),
                                                                2.0 / self.p["rate_hz"])
            self.last_cycle_time = now
            hold = self.saturated_last  # anti-windup: no integration while the command is saturated
            if active.task:
                out = self.controller.update_task(state.q, state.v, sample.positions, sample.velocities,
                                                  sample.accelerations, force_desired=F_d, force_measured=F_m, dt=dt,
                                                  hold_integral=hold)
            else:
                q_d = configuration_from_positions(self.robot, sample.positions)
                out = self.controller.update(state.q, state.v, q_d, sample.velocities, sample.accelerations,
                                             force_desired=F_d, force_measured=F_m, dt=dt, hold_integral=hold)
        except ValueError as err:  # ProjectionInputError, ModelError, ConstraintError, TrajectoryError
            self.log("error", f"control cycle failed, zero effort ({graph.one_line(err)})")
            self._publish_zero(io.ERROR, f"control law failed: {graph.one_line(err)}")
            return
        self.update_times.append(time.perf_counter() - t0)
        if not np.all(np.isfinite(out.tau)):
            self._publish_zero(io.ERROR, "control law returned non-finite effort")
            return
        sat = io.saturate(out.tau[self.command_index], self.effort_limits)
        self.saturated_last = bool(sat.saturated)
        self.pub_cmd.publish(io.command_message(sat.efforts))
        self.last_output = out
        self.saturation.add(sat)
        if sat.saturated:
            self.stats["saturated_cycles"] += 1
            saturated = [n for n, x in zip(self.effort_limits.names, sat.excess) if x > 0.0]
            self.log("warning", f"effort saturated at the limits of {io.shown(saturated)} (amounts on /diagnostics)")
        if out.controllability is not None and not out.controllability.controllable:
            unmet = io.passive_unmet_text(self.robot.joint_names, out.controllability)
            self.status = (io.ERROR, "passive joints not controllable here (eq. (64) fails): the desired motion "
                                     f"cannot be produced with zero passive torque; unmet passive demand {unmet}")
        else:
            self.status = (io.OK, "holding the last trajectory point" if sample.finished else "tracking")
        if self.p["publish_reactions"]:
            self._publish_reactions(out, state, sat)

    def _joint_uniqueness(self, q: np.ndarray) -> list[bool] | None:
        """Per-joint uniqueness of the reactions for the active constraint set (solvability analysis), computed
        when the set changes, at the configuration of that cycle; None if the analysis cannot run (logged)."""
        names = self.controller.constraints.names
        if self.uniqueness is None or self.uniqueness[0] != names:
            locked = [n[len("lock("):-1] for n in names if n.startswith("lock(")]
            try:
                flags = io.joint_uniqueness(self.model_text, self.robot.joint_names, locked, q)
            except ValueError as err:
                self.log("warning", f"joint_reactions: per-joint solvability unavailable, one flag for all joints "
                                    f"({graph.one_line(err)})")
                flags = None
            self.uniqueness = (names, flags)
        return self.uniqueness[1]

    def _publish_reactions(self, out: ProjectedControl, state: JointStateSnapshot, sat: io.Saturation) -> None:
        force, unique = out.constraint_force, out.multipliers_unique
        if sat.saturated:  # the law's prediction is for the torque it asked for; the robot gets the saturated one
            applied = out.tau.copy()
            applied[self.command_index] = sat.efforts
            dyn = constrained_dynamics(self.robot, self.controller.constraints, state.q, state.v, applied,
                                       tolerance=self.controller.tolerance)
            force, unique = dyn.constraint_force, dyn.multipliers_unique
        per_joint = self._joint_uniqueness(state.q)
        self.pub_reactions.publish(io.reactions_message(self.robot.joint_names, force,
                                                        unique if per_joint is None else per_joint,
                                                        self.get_clock().now().to_msg()))

    # ================================================================== diagnostics
    def _publish_diagnostics(self) -> None:
        level, message = self.status
        parts = [message]
        values: dict[str, Any] = {
            "model": self.robot.name if self.robot else "",
            "commanded_joints": ",".join(self.command_joints),
            "passive_joints": ",".join(self.passive_param),
            "controller_id": id(self.controller) if self.controller is not None else "",
            "controller_builds": self.controller_builds,
            "kp": self.p["kp"],
            "kd": self.p["kd"],
            "rate_hz": self.p["rate_hz"],
            "effort_limits": self.effort_limits.text() if self.effort_limits else "",
        }
        if self.saturation is not None:
            joints, excess, cycles = self.saturation.take()
            values["saturated_joints"] = ",".join(joints)
            values["saturation_excess"] = ",".join(f"{n}={x!r}" for n, x in excess.items())
            if joints:  # saturated at least once since the last report: never OK
                level = max(level, io.WARN)
                parts.append(f"{self.saturation.describe(excess)} in {cycles} cycles")
        if self.controller is not None:
            values["constraints"] = ",".join(self.controller.constraints.names)
            values["locked_joints"] = ",".join(
                n[len("lock("):-1] for n in self.controller.constraints.names if n.startswith("lock("))
            values["n"] = self.robot.nv
        out = self.last_output
        if out is not None:
            values.update(rank=out.rank, dof=out.dof, multipliers_unique=out.multipliers_unique)
            if out.force_error is not None:
                values["force_error_norm"] = float(np.linalg.norm(out.force_error))
            c = out.controllability
            if c is not None:
                values.update(controllable=c.controllable, controllability_margin=c.margin,
                              controllability_tolerance=c.tolerance, passive_residual=c.passive_residual,
                              passive_unmet=io.passive_unmet_text(self.robot.joint_names, c),
                              acceleration_error=c.acceleration_error)
        if out is not None and out.task_conditioning is not None:
            values["task_conditioning"] = out.task_conditioning
        if self.update_times:
            values["update_time_mean_ms"] = 1e3 * float(np.mean(self.update_times))
            values["update_time_max_ms"] = 1e3 * float(np.max(self.update_times))
        active = self.active
        values["trajectory_points"] = active.points if active is not None else 0
        values["preparing_trajectory"] = self.worker.busy
        with self._lock:
            values["trajectory_preparation_ms"] = self.preparation_ms
            values["last_rejection"] = self.last_rejection
            if self._rejection_unreported:
                self._rejection_unreported = False
                level = max(level, io.WARN)
                parts.append(f"trajectory rejected ({self.last_rejection}); the previous goal continues")
            values.update(self.stats)
        self.pub_diag.publish(io.diagnostic_array(
            f"{self.get_fully_qualified_name()}: projected inverse dynamics", self.robot.name if self.robot else "",
            level, "; ".join(parts), values, self.get_clock().now().to_msg()))


def main(args: list[str] | None = None) -> int:
    return run_node("projection_controller", ProjectionController,
                    (P.ParameterError, ModelError, UnsupportedJointError, ValueError), args)


if __name__ == "__main__":
    raise SystemExit(main())
