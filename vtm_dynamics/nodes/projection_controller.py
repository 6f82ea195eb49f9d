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

Off the control loop. A trajectory message is taken serialized; converting, checking and fitting it runs on the
node's worker (``trajectory_intake``; a message of at most a few points on the callback thread), so the command
stream keeps its period while a long trajectory is prepared or refused. The next control cycle starts the prepared
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

Stages (ros2_control's): *configure* builds the model, limits and the one controller when the description is
there (``controller_setup``); *activate* starts a prepared trajectory from the measured state and *update* is one
control cycle (``control_loop``). This node converts messages, calls them and publishes; parameters are one table
(``controller_parameters``). Threads: all callbacks share one mutually exclusive callback group (the default), so
a lock event never interleaves with a control cycle, also under a MultiThreadedExecutor; the trajectory worker
(``work_queue``) touches only its own job and hands the result over by one reference assignment under a lock.

Units: SI (rad, m, s, N m, N); gains K_P [1/s^2], K_D [1/s].
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any, Callable

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory
from vtm_msgs.msg import JointReactions, LockEvent

from vtm_dynamics.core.robot.model import ModelError
from vtm_dynamics.nodes import controller_io as io
from vtm_dynamics.nodes import diagnostics, graph
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes.control_loop import STATS, ControlLoop, Cycle
from vtm_dynamics.nodes.controller_parameters import PARAMETERS
from vtm_dynamics.nodes.conversions import UnsupportedJointError
from vtm_dynamics.nodes.model_source import load_urdf_text
from vtm_dynamics.nodes.node_main import run_node
from vtm_dynamics.nodes.work_queue import WorkQueue

NODE_NAME = "projection_controller"


class ProjectionController(Node):
    """See the module docstring. Build with ``ProjectionController(parameter_overrides=[...])`` or from ROS args.

    Raises ``P.ParameterError`` / ``ModelError`` at construction when a start parameter is invalid or the model
    given by ``urdf_path`` cannot be used (``main`` turns these into exit code 2 with a one-line message).
    """

    def __init__(self, **node_kwargs: Any) -> None:
        self.closing = ExitStack()  # what destroy_node undoes, registered as it is made (rclpy destroys a node
        super().__init__(NODE_NAME, **node_kwargs)  # whose constructor failed too, when its context shuts down)
        self.log = graph.LogLimiter(self.get_logger())
        self.p = P.declare_validated(self, PARAMETERS, self._on_parameters)
        self.stats = dict.fromkeys(STATS, 0)
        io.parse_effort_overrides(self.p["effort_limit_overrides"])  # refuses the node before any thread runs
        self.worker = self.closing.enter_context(WorkQueue(f"{NODE_NAME}_trajectories", self._on_worker_error))
        self.loop = ControlLoop(self.p, self.stats, self.log, self.worker)
        self.intake = self.loop.intake
        self.status = (diagnostics.WARN, "starting")
        if self.p["urdf_path"]:
            self._configure(load_urdf_text(urdf_path=self.p["urdf_path"]), self.p["urdf_path"], strict=True)

        guard = self._guard
        if not self.p["urdf_path"]:
            self.create_subscription(String, self.p["robot_description_topic"],
                                     guard("robot_description", self.on_description), graph.LATCHED)
        self.create_subscription(JointState, "joint_states", guard("joint_states", self.on_joint_state),
                                 graph.sensor_qos(20))
        # serialized: the conversion of a long trajectory happens on the worker, not here
        self.create_subscription(JointTrajectory, "~/trajectory", guard("trajectory", self.intake.submit), 10,
                                 raw=True)
        self.create_subscription(JointTrajectory, "~/task_trajectory",
                                 guard("task_trajectory", lambda raw: self.intake.submit(raw, task=True)), 10,
                                 raw=True)
        self.create_subscription(LockEvent, "lock_events", guard("lock_events", self.on_lock_event),
                                 graph.events_qos(50))
        if self.p["force_control"]:
            self.create_subscription(WrenchStamped, "~/constraint_wrench_setpoint",
                                     guard("constraint_wrench_setpoint", self.on_wrench), 10)
            if self.p["force_measurement"] == "topic":
                self.create_subscription(WrenchStamped, "constraint_wrench",
                                         guard("constraint_wrench", lambda msg: self.on_wrench(msg, measured=True)),
                                         graph.sensor_qos(20))
        self.pub_cmd = self.create_publisher(Float64MultiArray, f"{self.p['controller_name']}/commands",
                                             graph.OUTPUT_DEPTH)
        self.pub_reactions = self.create_publisher(JointReactions, "~/joint_reactions", graph.OUTPUT_DEPTH)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", graph.OUTPUT_DEPTH)
        self.control_timer = self.create_timer(1.0 / self.p["rate_hz"], self._guard("control", self.update))
        self.diag_timer = self.create_timer(self.p["diagnostic_period"],
                                            self._guard("diagnostics", self._publish_diagnostics))
        setup = self.loop.setup
        self.get_logger().info(
            f"projection_controller ready: model {setup.robot.name if setup else '(waiting for robot_description)'}"
            f", commands on {self.pub_cmd.topic_name}, {self.p['rate_hz']} Hz, kp {self.p['kp']}, kd {self.p['kd']}"
        )

    def destroy_node(self) -> None:
        self.closing.close()
        super().destroy_node()

    def _guard(self, where: str, func: Callable) -> Callable:
        return graph.guarded(self.log, where)(func)

    def _on_parameters(self, changes: dict[str, Any]) -> None:
        """Never called after start-up: every parameter of this node (gains, rates, limits, timeouts, caps) is
        read-only once the node runs (``parameter_policy``); a changed gain needs a restart."""
        self.p.update(changes)

    def _on_worker_error(self, err: BaseException) -> None:
        self.intake.reject(f"trajectory: unexpected {type(err).__name__}: {graph.one_line(err)}")

    def now(self) -> float:
        """Node clock [s]."""
        return self.get_clock().now().nanoseconds * 1e-9

    # ================================================================== inputs: the subscriptions' callbacks
    def on_description(self, msg: String) -> None:
        self._configure(msg.data, "robot_description")

    def on_joint_state(self, msg: JointState) -> None:
        self.loop.receive_state(msg, self.now())

    def _configure(self, text: str, source: str, strict: bool = False) -> None:
        setup = self.loop.configure(text, source, strict)
        if setup is not None:
            constraints = ", ".join(setup.controller.constraints.names) or "none"
            self.get_logger().info(f"model {setup.robot.name!r} from {source}: joints {list(setup.robot.joint_names)}, "
                                   f"constraints {constraints}, commanded joints {list(setup.command_joints)}, effort "
                                   f"limits {setup.effort_limits.text()}")

    def on_lock_event(self, msg: LockEvent) -> None:
        self.stats["lock_events"] += 1
        if msg.action not in (LockEvent.LOCK, LockEvent.UNLOCK):
            self.log("error", f"lock_events: unknown action {msg.action} ignored (LOCK=0, UNLOCK=1)")
            return
        if self.loop.setup is None:
            self.log("error", f"lock_events: no robot model yet; event for {io.shown(msg.joint_names)} ignored")
            return
        if not msg.joint_names:
            self.log("warning", "lock_events: joint_names: empty, event ignored")
            return
        changed, unknown = self.loop.lock(msg.action == LockEvent.LOCK, list(dict.fromkeys(msg.joint_names)))
        if unknown:
            self.stats["lock_names_ignored"] += len(unknown)
            self.log("warning", f"lock_events: unknown joints {io.shown(unknown)} ignored")
        if changed:
            verb = "locked" if msg.action == LockEvent.LOCK else "unlocked"
            self.get_logger().info(f"lock_events: {verb} {changed} (source {msg.source[:100]!r}); active "
                                   f"constraints: {list(self.loop.setup.controller.constraints.names)}")

    def on_wrench(self, msg: WrenchStamped, measured: bool = False) -> None:
        f, m = msg.wrench.force, msg.wrench.torque
        self.loop.wrench("constraint_wrench" if measured else "constraint_wrench_setpoint", msg.header.frame_id,
                         np.array([f.x, f.y, f.z, m.x, m.y, m.z], dtype=float))

    # ================================================================== update
    def update(self) -> None:
        """One control cycle: the command of ``ControlLoop.update`` (zeros when it gives none), then the
        predicted constraint forces; whatever fails, the robot gets the defined zero command."""
        self.stats["cycles"] += 1
        try:
            cycle = self.loop.update(self.now())
        except Exception as err:  # noqa: BLE001 - whatever failed, the robot gets the defined zero command
            text = f"control: unexpected {type(err).__name__}: {graph.one_line(err)}"
            self.log("error", f"{text}; zero effort")
            cycle = Cycle(None, diagnostics.ERROR, text)
        self.status = (cycle.level, cycle.reason)
        if cycle.efforts is None:
            self.stats["zero_cycles"] += 1
            setup = self.loop.setup
            n = len(setup.command_joints) if setup is not None else len(self.p["joints"])
            if n:
                self.pub_cmd.publish(io.command_message(np.zeros(n)))
            return
        self.pub_cmd.publish(io.command_message(cycle.efforts))
        if self.p["publish_reactions"]:
            force, unique = self.loop.reactions(cycle)
            self.pub_reactions.publish(io.reactions_message(self.loop.setup.robot.joint_names, force, unique,
                                                            self.get_clock().now().to_msg()))

    def _publish_diagnostics(self) -> None:
        level, message, values = self.loop.report(*self.status)
        setup = self.loop.setup
        self.pub_diag.publish(diagnostics.diagnostic_array(self.get_clock().now().to_msg(), diagnostics.status(
            f"{self.get_fully_qualified_name()}: projected inverse dynamics", level, message, values,
            hardware_id=setup.robot.name if setup else "")))


def main(args: list[str] | None = None) -> int:
    return run_node(NODE_NAME, ProjectionController,
                    (P.ParameterError, ModelError, UnsupportedJointError, ValueError), args)


if __name__ == "__main__":
    raise SystemExit(main())
