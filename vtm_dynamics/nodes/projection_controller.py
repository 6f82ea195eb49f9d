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
                         order); it starts at ``header.stamp``, or on receipt when the stamp is zero. If its first
                         point lies after t = 0, the measured state is inserted at t = 0 (smooth start). Sampling:
                         quintic / cubic / linear per segment depending on the fields given (see
                         ``trajectory_sampler``); after the last point, the last positions are held with zero
                         velocity. A new trajectory replaces the current one. A trajectory without points means
                         "stop here": the measured position at receipt is held.
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
                         its margin and residual, controller object id and how many controllers were built (1).

Zero effort before the loop can close. Until a model, a joint state for every joint and a trajectory are
available, and whenever the joint states are older than ``state_timeout``, the node publishes zeros (when it knows
how many joints to command) and reports WARN. Rationale: ros2_control's forward-command controllers keep the last
command they received, so *not* publishing would leave a stale torque from an earlier run or an earlier state
acting on the robot; zero is the defined "no actuation" command, the same value the effort controller itself
writes when it is deactivated. Holding a gravity-loaded arm is the job of its brakes or of a holding trajectory:
send a trajectory with the current position (or one without points) to hold. If the core rejects an input or
returns a non-finite torque, zeros are published and the diagnostics report ERROR.

Constraint forces (``JointReactions``). The core returns the generalized constraint force F = A^T lambda of
M q'' + h = tau - F (Aghili, eq. (19), (32)) predicted for the commanded torque, and the multipliers lambda = A^{+T} F
(one per constraint row). The message is filled per model joint (velocity order): ``holding_torques[i] = -F_i``,
the torque [N m] or force [N] along joint i that all active constraints together exert on that coordinate. For a
locked joint whose coordinate no loop closure touches this is exactly the brake torque (its lock row is the unit
row e_i, so -F_i = -lambda_lock). F itself is always unique (it is the (I - P) projection of the applied forces);
``uniquely_determined`` is ``multipliers_unique`` of the core (A of full row rank, Remark 4) for every joint: when
false, the split of F among individual constraints (brake versus loop closure, and the full joint wrenches) is one
of many. ``wrenches`` is left empty: the projected controller yields joint-space forces, not 6-D joint wrenches
(the estop predictor and the solvability tools publish those). ``method`` is ``"projection"``.

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

Not thread-safe by design: all callbacks share one mutually exclusive callback group (the default), so a lock event
never interleaves with a control cycle, also under a MultiThreadedExecutor.

Units: SI (rad, m, s, N m, N); gains K_P [1/s^2], K_D [1/s].
"""

from __future__ import annotations


import math
import re
import time
from collections import deque
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension, String
from trajectory_msgs.msg import JointTrajectory
from vtm_msgs.msg import JointReactions, LockEvent

from vtm_dynamics.core.projection.simulation import ConstraintSet
from vtm_dynamics.core.robot.constraints import constraints_from_extension
from vtm_dynamics.core.robot.model import ModelError, RobotModel
from vtm_dynamics.core.projection.control import ProjectedControl, ProjectedInverseDynamicsController
from vtm_dynamics.core.projection.projector import RankTolerance, unit_weighting
from vtm_dynamics.nodes import graph
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes.conversions import (
    JointStateError,
    JointStateTracker,
    UnsupportedJointError,
    configuration_from_positions,
)
from vtm_dynamics.nodes.model_source import load_urdf_text, model_from_urdf_text
from vtm_dynamics.nodes.node_main import run_node
from vtm_dynamics.nodes.trajectory_sampler import (
    PiecewiseTrajectory,
    TrajectoryError,
    trajectory_from_message,
)

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
                    "control law: zero effort is published and diagnostics report WARN. 0 disables the check.",
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
    P.ParameterSpec("publish_reactions", True, "Publish the predicted constraint forces on ~/joint_reactions."),
)
JOINTS_DESCRIPTION = ("Joints commanded on <controller_name>/commands, in the effort controller's order. Empty: all "
                      "movable joints of the model in its order. Model joints left out must be passive_joints.")
PASSIVE_DESCRIPTION = ("Joints without actuator (Aghili eqs. (55)-(62)): they get exactly zero effort and the "
                       "controllability condition (64) is reported. Must be joints of the model.")


class ProjectionController(Node):
    """See the module docstring. Build with ``ProjectionController(parameter_overrides=[...])`` or from ROS args.

    Raises ``P.ParameterError`` / ``ModelError`` at construction when a start parameter is invalid or the model
    given by ``urdf_path`` cannot be used (``main`` turns these into exit code 2 with a one-line message).
    """

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(NODE_NAME, **node_kwargs)
        self.p = P.declare_validated(self, PARAMETERS, self._on_parameters)
        self.joints_param = self._declare_names("joints", JOINTS_DESCRIPTION)
        self.passive_param = self._declare_names("passive_joints", PASSIVE_DESCRIPTION)
        self.robot: RobotModel | None = None
        self.controller: ProjectedInverseDynamicsController | None = None
        self.controller_builds = 0
        self.model_text = ""
        self.model_error = "waiting for robot_description"
        self.model_rejected = False  # a description arrived and could not be used
        self.tracker: JointStateTracker | None = None
        self.command_index = np.zeros(0, dtype=int)
        self.trajectory: PiecewiseTrajectory | None = None
        self.trajectory_start = 0.0  # [s] node clock
        self.last_state_time: float | None = None  # [s] node clock at receipt
        self.last_output: ProjectedControl | None = None
        self.status = (DiagnosticStatus.WARN, "starting")
        self.stats = {"cycles": 0, "zero_cycles": 0, "joint_states_rejected": 0, "trajectories": 0,
                      "trajectories_rejected": 0, "lock_events": 0, "lock_names_ignored": 0}
        self.update_times: deque[float] = deque(maxlen=500)
        self.reported_unknown: set[str] = set()

        if self.p["urdf_path"]:
            self._set_model(load_urdf_text(urdf_path=self.p["urdf_path"]), self.p["urdf_path"], strict=True)

        latched = graph.LATCHED
        events_qos = graph.events_qos(50)
        if not self.p["urdf_path"]:
            self.create_subscription(String, self.p["robot_description_topic"], self._on_description, latched)
        self.create_subscription(JointState, "joint_states", self._on_joint_state, graph.sensor_qos(20))
        self.create_subscription(JointTrajectory, "~/trajectory", self._on_trajectory, 10)
        self.create_subscription(LockEvent, "lock_events", self._on_lock_event, events_qos)
        self.pub_cmd = self.create_publisher(Float64MultiArray, f"{self.p['controller_name']}/commands", 10)
        self.pub_reactions = self.create_publisher(JointReactions, "~/joint_reactions", 10)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.control_timer = None
        self.diag_timer = None
        self._make_timers()
        self.get_logger().info(
            f"projection_controller ready: model {self.robot.name if self.robot else '(waiting for robot_description)'}"
            f", commands on {self.pub_cmd.topic_name}, {self.p['rate_hz']} Hz, kp {self.p['kp']}, kd {self.p['kd']}"
        )

    # ================================================================== parameters
    def _declare_names(self, name: str, description: str) -> tuple[str, ...]:
        """A read-only string-array parameter (declared by type: an empty list default would be a byte array)."""
        param = self.declare_parameter(name, Parameter.Type.STRING_ARRAY,
                                       ParameterDescriptor(name=name, description=description, read_only=True))
        value = param.value or []
        if len(set(value)) != len(value):
            raise P.ParameterError(f"{name}: repeated joint names (got {list(value)!r})")
        return tuple(value)

    def _on_parameters(self, changes: dict[str, Any]) -> None:
        """Apply validated runtime changes (gains, rates); the controller object is kept."""
        self.p.update(changes)
        if self.controller is not None:
            n = self.robot.nv
            if "kp" in changes:
                self.controller.kp = np.full(n, float(self.p["kp"]))
            if "kd" in changes:
                self.controller.kd = np.full(n, float(self.p["kd"]))
        if {"rate_hz", "diagnostic_period"} & set(changes):
            self._make_timers()

    def _make_timers(self) -> None:
        for timer in (self.control_timer, self.diag_timer):
            if timer is not None:
                self.destroy_timer(timer)
        self.control_timer = self.create_timer(1.0 / self.p["rate_hz"], self._on_control)
        self.diag_timer = self.create_timer(self.p["diagnostic_period"], self._publish_diagnostics)

    # ================================================================== model
    def _set_model(self, text: str, source: str, strict: bool = False) -> None:
        """Build model and controller from URDF text. ``strict``: raise on errors (start-up), else log them."""
        if self.controller is not None:
            if text != self.model_text:
                self.get_logger().warning(
                    f"{source}: a different robot description arrived; the running controller keeps its model "
                    f"{self.robot.name!r} (restart the node to change the robot)")
            return
        try:
            robot = model_from_urdf_text(text)
            tracker = JointStateTracker(robot)
            command_index = self._check_joint_lists(robot)
            controller = self._build_controller(robot)
        except (ModelError, UnsupportedJointError, P.ParameterError, ValueError) as err:
            if strict:
                raise
            self.model_error = f"{source}: {err}"
            self.model_rejected = True
            self.get_logger().error(f"{source}: robot model rejected, still waiting for a usable one ({err})")
            return
        self.robot, self.tracker, self.command_index, self.controller = robot, tracker, command_index, controller
        self.model_text = text
        self.model_error = ""
        self.model_rejected = False
        self.controller_builds += 1
        closures = ", ".join(controller.constraints.names) or "none"
        self.get_logger().info(f"model {robot.name!r} from {source}: joints {list(robot.joint_names)}, "
                               f"constraints {closures}, commanded joints {self.command_joints}")

    def _check_joint_lists(self, robot: RobotModel) -> np.ndarray:
        names = set(robot.joint_names)
        bad = [j for j in self.passive_param if j not in names]
        if bad:
            raise P.ParameterError(f"passive_joints: not movable joints of {robot.name!r}: {bad} "
                                   f"(joints: {list(robot.joint_names)})")
        joints = self.joints_param or robot.joint_names
        bad = [j for j in joints if j not in names]
        if bad:
            raise P.ParameterError(f"joints: not movable joints of {robot.name!r}: {bad} "
                                   f"(joints: {list(robot.joint_names)})")
        uncommanded = [j for j in robot.joint_names if j not in joints and j not in self.passive_param]
        if uncommanded:
            raise P.ParameterError(f"joints: model joints {uncommanded} are neither commanded nor passive_joints")
        return robot.v_indices(list(joints))

    def _build_controller(self, robot: RobotModel) -> ProjectedInverseDynamicsController:
        W = None
        if self.p["weighting_length"] > 0:
            prismatic = [j.kind.startswith("JointModelP") and j.kind != "JointModelPlanar" for j in robot.joints]
            W = unit_weighting(np.array(prismatic, dtype=bool), self.p["weighting_length"])
        return ProjectedInverseDynamicsController(
            robot,
            ConstraintSet(constraints_from_extension(robot)),
            kp=self.p["kp"],
            kd=self.p["kd"],
            W=W,
            passive_joints=list(self.passive_param),
            tolerance=RankTolerance(self.p["rank_tolerance_absolute"], self.p["rank_tolerance_relative"]),
        )

    @property
    def command_joints(self) -> list[str]:
        if self.robot is not None:
            return list(self.joints_param or self.robot.joint_names)
        return list(self.joints_param)

    def _on_description(self, msg: String) -> None:
        self._set_model(msg.data, "robot_description")

    # ================================================================== inputs
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_joint_state(self, msg: JointState) -> None:
        if self.tracker is None:
            return
        try:
            parsed = self.tracker.update(msg)
        except JointStateError as err:
            self.stats["joint_states_rejected"] += 1
            self.get_logger().warning(f"joint_states: message ignored ({err})", throttle_duration_sec=2.0)
            return
        new_unknown = set(parsed.unknown_names) - self.reported_unknown
        if new_unknown:
            self.reported_unknown |= new_unknown
            self.get_logger().warning(f"joint_states: ignoring joints the model does not have: {sorted(new_unknown)}")
        if parsed.positions:
            self.last_state_time = self._now()

    def _measured(self):
        """Snapshot of the measured state, or None while some joint was never reported."""
        if self.tracker is None or self.tracker.missing:
            return None
        return self.tracker.snapshot()

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if self.robot is None:
            self.get_logger().warning("trajectory ignored: no robot model yet")
            return
        stamp = float(msg.header.stamp.sec) + 1e-9 * float(msg.header.stamp.nanosec)
        start = stamp if stamp > 0 else self._now()
        state = self._measured()
        try:
            if not msg.points:
                if state is None:
                    raise TrajectoryError("points: an empty trajectory (hold) needs a measured state")
                traj = PiecewiseTrajectory([0.0], state.positions[None, :])
                start = self._now()
            else:
                traj = trajectory_from_message(msg, self.robot.joint_names)
                if state is not None:
                    traj = traj.with_start(state.positions, state.v)
        except TrajectoryError as err:
            self.stats["trajectories_rejected"] += 1
            self.get_logger().error(f"trajectory rejected, the previous goal stays ({err})")
            return
        self.trajectory, self.trajectory_start = traj, start
        self.stats["trajectories"] += 1
        self.get_logger().info(f"trajectory accepted: {len(traj.times)} points over {traj.duration:.3f} s")

    def _on_lock_event(self, msg: LockEvent) -> None:
        self.stats["lock_events"] += 1
        if msg.action not in (LockEvent.LOCK, LockEvent.UNLOCK):
            self.get_logger().error(f"lock_events: unknown action {msg.action} ignored (LOCK=0, UNLOCK=1)")
            return
        if self.controller is None:
            self.get_logger().error(f"lock_events: no robot model yet; event for {list(msg.joint_names)} ignored")
            return
        names = list(msg.joint_names)
        unknown = [j for j in names if j not in self.robot.joint_names]
        if unknown:
            self.stats["lock_names_ignored"] += len(unknown)
            self.get_logger().warning(f"lock_events: unknown joints {unknown} ignored")
        state = self._measured()
        active = set(self.controller.constraints.names)
        changed = []
        for j in dict.fromkeys(names):
            if j in unknown:
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
            self.get_logger().info(f"lock_events: {verb} {changed} (source {msg.source!r}); active constraints: "
                                   f"{list(self.controller.constraints.names)}")

    # ================================================================== control cycle
    def _publish_command(self, values: np.ndarray) -> None:
        msg = Float64MultiArray()
        msg.layout.dim = [MultiArrayDimension(label="joints", size=len(values), stride=len(values))]
        msg.data = [float(x) for x in values]
        self.pub_cmd.publish(msg)

    def _publish_zero(self, level: int, reason: str) -> None:
        self.status = (level, reason)
        self.stats["zero_cycles"] += 1
        n = len(self.command_joints)
        if n:
            self._publish_command(np.zeros(n))

    def _on_control(self) -> None:
        self.stats["cycles"] += 1
        if self.controller is None:
            level = DiagnosticStatus.ERROR if self.model_rejected else DiagnosticStatus.WARN
            self._publish_zero(level, f"no robot model ({self.model_error})")
            return
        now = self._now()
        state = self._measured()
        if state is None:
            self._publish_zero(DiagnosticStatus.WARN, f"waiting for joint_states of {list(self.tracker.missing)}")
            return
        timeout = self.p["state_timeout"]
        if timeout > 0 and self.last_state_time is not None and now - self.last_state_time > timeout:
            self._publish_zero(DiagnosticStatus.WARN, f"joint_states older than state_timeout ({timeout} s)")
            return
        if self.trajectory is None:
            self._publish_zero(DiagnosticStatus.WARN, "waiting for a trajectory on ~/trajectory")
            return
        t0 = time.perf_counter()
        try:
            sample = self.trajectory.sample(now - self.trajectory_start)
            q_d = configuration_from_positions(self.robot, sample.positions)
            out = self.controller.update(state.q, state.v, q_d, sample.velocities, sample.accelerations)
        except ValueError as err:  # ProjectionInputError, ModelError, ConstraintError, TrajectoryError
            self.get_logger().error(f"control cycle failed, zero effort ({err})", throttle_duration_sec=2.0)
            self._publish_zero(DiagnosticStatus.ERROR, f"control law failed: {err}")
            return
        self.update_times.append(time.perf_counter() - t0)
        if not np.all(np.isfinite(out.tau)):
            self._publish_zero(DiagnosticStatus.ERROR, "control law returned non-finite effort")
            return
        self._publish_command(out.tau[self.command_index])
        self.last_output = out
        if out.controllability is not None and not out.controllability.controllable:
            self.status = (DiagnosticStatus.ERROR, "passive joints not controllable here (eq. (64) fails): the "
                           "desired motion cannot be produced with zero passive torque")
        else:
            self.status = (DiagnosticStatus.OK, "holding the last trajectory point" if sample.finished
                           else "tracking")
        if self.p["publish_reactions"]:
            self._publish_reactions(out)

    def _publish_reactions(self, out: ProjectedControl) -> None:
        msg = JointReactions()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.joint_names = list(self.robot.joint_names)
        msg.holding_torques = [float(-f) for f in out.constraint_force]
        msg.uniquely_determined = [bool(out.multipliers_unique)] * self.robot.nv
        msg.method = "projection"
        self.pub_reactions.publish(msg)

    # ================================================================== diagnostics
    def _publish_diagnostics(self) -> None:
        level, message = self.status
        values: dict[str, Any] = {
            "model": self.robot.name if self.robot else "",
            "commanded_joints": ",".join(self.command_joints),
            "passive_joints": ",".join(self.passive_param),
            "controller_id": id(self.controller) if self.controller is not None else "",
            "controller_builds": self.controller_builds,
            "kp": self.p["kp"],
            "kd": self.p["kd"],
            "rate_hz": self.p["rate_hz"],
        }
        if self.controller is not None:
            values["constraints"] = ",".join(self.controller.constraints.names)
            values["locked_joints"] = ",".join(
                n[len("lock("):-1] for n in self.controller.constraints.names if n.startswith("lock("))
            values["n"] = self.robot.nv
        out = self.last_output
        if out is not None:
            values.update(rank=out.rank, dof=out.dof, multipliers_unique=out.multipliers_unique)
            c = out.controllability
            if c is not None:
                values.update(controllable=c.controllable, controllability_margin=c.margin,
                              passive_residual=c.passive_residual)
        if self.update_times:
            values["update_time_mean_ms"] = 1e3 * float(np.mean(self.update_times))
            values["update_time_max_ms"] = 1e3 * float(np.max(self.update_times))
        values.update(self.stats)
        status = DiagnosticStatus(level=level, name=f"{self.get_fully_qualified_name()}: projected inverse dynamics",
                                  message=message, hardware_id=self.robot.name if self.robot else "")
        status.values = [KeyValue(key=k, value=_text(v)) for k, v in values.items()]
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [status]
        self.pub_diag.publish(arr)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)


def main(args: list[str] | None = None) -> int:
    return run_node("projection_controller", ProjectionController,
                    (P.ParameterError, ModelError, UnsupportedJointError, ValueError), args)


if __name__ == "__main__":
    raise SystemExit(main())
