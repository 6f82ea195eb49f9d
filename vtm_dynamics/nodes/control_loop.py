"""The control loop of ``projection_controller`` as a ros2_control controller's stages, over ROS-free inputs:
*configure* (``controller_setup``: the model and the one controller of the run), *activate* (a prepared trajectory
starts from the measured state) and *update* (one control cycle: the effort command, its saturation, the
predicted constraint forces). Plain Python (no node, no executor): the node converts messages, calls these and publishes.

Configure: the first usable description builds everything; an unusable one is logged and the loop keeps waiting
(at start-up, with ``urdf_path``, it raises); a later, different description is logged and ignored: a running
controller does not swap its robot. Joint locks (:meth:`ControlLoop.lock`) are rows of the SAME controller, bound at
the measured configuration; constraint-wrench set points and measurements (:meth:`ControlLoop.wrench`) name a loop
closure of the model and stay within ``max_constraint_wrench``.

Update (:meth:`ControlLoop.update`) publishes zero effort - the defined "no actuation" command of ros2_control's
effort controllers - with the reason, until a model, a state of every joint no older than ``state_timeout`` with
every velocity known (measured, or estimated from positions at most ``state_timeout`` apart) and a trajectory are
there, and when the law fails or returns a non-finite effort. Otherwise the law's efforts are
saturated at the effort limits (never beyond the robot; the force integral holds while saturated), the status is
ERROR while the passive joints are not controllable (Aghili eq. (64)), else OK. :meth:`ControlLoop.reactions`
gives the generalized constraint force of the command actually sent (recomputed for a saturated one) and, per
joint, whether the reaction is unique (``core.reactions.held_uniqueness``, when the active constraints change).
Times [s] on the node clock passed in as ``now``.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, MutableMapping

import numpy as np

from vtm_dynamics.core.excerpt import clip
from vtm_dynamics.core.projection.constraint_wrench import constraint_force_of_wrench
from vtm_dynamics.core.projection.control import ProjectedControl
from vtm_dynamics.core.projection.desired_trajectory import PiecewiseTrajectory, TrajectoryError, check_start_segment
from vtm_dynamics.core.projection.simulation import constrained_dynamics
from vtm_dynamics.core.robot.constraints import LoopClosure
from vtm_dynamics.core.robot.model import ModelError
from vtm_dynamics.nodes import controller_io as io
from vtm_dynamics.nodes.bounded_worker import one_line
from vtm_dynamics.nodes.controller_setup import Configured, configure
from vtm_dynamics.nodes.conversions import (JointStateError, JointStateSnapshot, UnsupportedJointError,
                                            configuration_from_positions, stamp_to_seconds)
from vtm_dynamics.nodes.diagnostics import ERROR, OK, WARN
from vtm_dynamics.nodes.params import ParameterError
from vtm_dynamics.nodes.trajectory_intake import PreparedTrajectory, TrajectoryIntake
from vtm_dynamics.nodes.work_queue import WorkQueue

#: Unknown joint names remembered (each is reported once), at most.
UNKNOWN_NAMES = 1000
#: The counters of the loop (on /diagnostics).
STATS = ("cycles", "zero_cycles", "saturated_cycles", "joint_states_rejected", "trajectories_received",
         "trajectories", "trajectories_rejected", "trajectories_superseded", "lock_events", "lock_names_ignored")


@dataclass(frozen=True)
class ActiveTrajectory:
    """The trajectory being followed: sampled at (node time - ``start``) [s]; ``points`` as received."""

    trajectory: PiecewiseTrajectory
    start: float
    points: int
    task: bool = False


@dataclass(frozen=True, eq=False)
class Cycle:
    """What one update commands: ``efforts`` per commanded joint (None: the zero command), the status ``level``
    and ``reason``, and for a command of the law its ``output``, the measured ``state`` and its saturation."""

    efforts: np.ndarray | None
    level: int
    reason: str
    output: ProjectedControl | None = None
    state: JointStateSnapshot | None = None
    saturation: io.Saturation | None = None


class ControlLoop:
    """Configure, activate, update (module docstring); ``p`` the node's parameters (``params.values`` of
    ``controller_parameters.PARAMETERS``), ``stats`` its counters (``STATS``), ``log`` its log limiter; ``worker``
    prepares long trajectories for its :attr:`intake`."""

    def __init__(self, p: MutableMapping[str, Any], stats: MutableMapping[str, int], log: Callable[[str, str], Any],
                 worker: WorkQueue) -> None:
        self.p, self.stats, self.log = p, stats, log
        self.effort_overrides = io.parse_effort_overrides(p["effort_limit_overrides"])
        self.intake = TrajectoryIntake(self.limits, p, stats, log, worker)
        self.setup: Configured | None = None
        self.builds = 0
        self.model_error = "waiting for robot_description"
        self.model_rejected = False  # a description arrived and could not be used
        self.saturation: io.SaturationWindow | None = None
        self.active: ActiveTrajectory | None = None  # the control cycle's own
        self.last_state_time: float | None = None  # [s] node clock at receipt
        self.last_output: ProjectedControl | None = None
        self.last_cycle_time: float | None = None
        self.saturated_last = False  # the previous cycle's command was saturated (holds the force integral)
        self.uniqueness: tuple[tuple[str, ...], list[bool] | None] | None = None  # (constraint names, per joint)
        self.update_times: deque[float] = deque(maxlen=500)
        self.reported_unknown: set[str] = set()
        self.wrench_setpoints: dict[str, np.ndarray] = {}  # loop closure name -> [f; m] [N, N m], world axes
        self.wrench_measured: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------------------------------------ configure
    def configure(self, text: str, source: str, strict: bool = False) -> Configured | None:
        """Build the model and controller from ``text`` (module docstring); ``strict``: raise instead of logging."""
        if self.setup is not None:
            if text != self.setup.text:
                self.log("warning", f"{source}: a different robot description arrived; the running controller "
                                    f"keeps its model {self.setup.robot.name!r} (restart the node to change the robot)")
            return None
        try:
            setup = configure(text, self.p, self.effort_overrides)
        except (ModelError, UnsupportedJointError, ParameterError, ValueError) as err:
            if strict:
                raise
            self.model_error, self.model_rejected = f"{source}: {one_line(str(err))}", True
            self.log("error", f"{source}: robot model rejected, still waiting for a usable one ({one_line(str(err))})")
            return None
        self.setup, self.saturation = setup, io.SaturationWindow(setup.effort_limits)
        self.model_error, self.model_rejected = "", False
        self.builds += 1
        return setup

    def limits(self, task: bool) -> Any:
        """The trajectory limits of the joints or of the task coordinates (None: no model / no task)."""
        setup = self.setup
        return None if setup is None else (setup.task_limits if task else setup.trajectory_limits)

    # ------------------------------------------------------------------------------------------------ inputs
    def receive_state(self, msg: Any, now: float) -> None:
        """Merge one ``sensor_msgs/JointState`` received at ``now``; a bad one is counted, logged and dropped."""
        if self.setup is None:
            return
        ahead = stamp_to_seconds(msg.header.stamp) - now
        tolerance = self.p["future_stamp_tolerance"]
        if ahead > tolerance:
            self.stats["joint_states_rejected"] += 1
            self.log("warning", f"joint_states: message ignored (header.stamp: {ahead:.3f} s in the future, "
                                f"future_stamp_tolerance {tolerance:g} s)")
            return
        try:
            parsed = self.setup.tracker.update(msg)
        except JointStateError as err:
            self.stats["joint_states_rejected"] += 1
            self.log("warning", f"joint_states: message ignored ({one_line(str(err))})")
            return
        # remembered by a short excerpt: names of megabytes must not accumulate (a cut name collides at worst,
        # and is then not reported again)
        new_unknown = {clip(n) for n in parsed.unknown_names} - self.reported_unknown
        if new_unknown and len(self.reported_unknown) < UNKNOWN_NAMES:
            self.reported_unknown |= new_unknown
            self.log("warning", "joint_states: ignoring joints the model does not have: "
                                f"{io.shown(sorted(new_unknown))}")
        if parsed.positions:
            self.last_state_time = now

    def measured(self) -> JointStateSnapshot | None:
        """Snapshot of the measured state, or None while some joint was never reported."""
        if self.setup is None or self.setup.tracker.missing:
            return None
        return self.setup.tracker.snapshot()

    def lock(self, lock: bool, names: list[str]) -> tuple[list[str], list[str]]:
        """LOCK (one joint-lock row per joint, bound at the measured configuration) or UNLOCK ``names``; returns
        (the joints changed, the unknown names ignored)."""
        controller = self.setup.controller
        known = set(self.setup.robot.joint_names)
        unknown = [j for j in names if j not in known]
        state = self.measured()
        active = set(controller.constraints.names)
        changed = []
        for j in (j for j in names if j in known):
            name = f"lock({j})"
            if lock and name not in active:  # the angle only matters to simulations
                controller.lock_joints(j, None if state is None else state.q, name=name)
                changed.append(j)
            elif not lock and name in active:
                controller.remove_constraint(name)
                changed.append(j)
        return changed, unknown

    def wrench(self, field: str, name: str, w: np.ndarray) -> None:
        """A constraint-wrench set point (``field`` 'constraint_wrench_setpoint') or measurement of the loop
        closure ``name``: [f; m] [N, N m], world axes; logged and ignored when it cannot be used."""
        if self.setup is None:
            self.log("warning", f"{field}: no robot model yet; message ignored")
            return
        closures = {c.name: c for c in self.setup.controller.constraints.constraints if isinstance(c, LoopClosure)}
        if name not in closures:
            self.log("warning", f"{field}: header.frame_id: {clip(name)!r} is not a loop closure of the model "
                                f"({io.shown(sorted(closures))}); message ignored")
            return
        cap = self.p["max_constraint_wrench"]
        if not np.all(np.isfinite(w)) or np.max(np.abs(w)) > cap:
            self.log("warning", f"{field}: wrench: components must be finite and within +-{cap:g} N / N m; "
                                "message ignored")
            return
        if field != "constraint_wrench_setpoint":
            self.wrench_measured[name] = w
            return
        state = self.measured()
        q = state.q if state is not None else self.setup.robot.neutral()
        if not constraint_force_of_wrench(self.setup.robot, closures[name], q, w).exact:
            self.log("error", f"constraint_wrench_setpoint: {name!r}: this closure's rows are not a wrench of its "
                              "pair in this model (see docs/projection.md); set point ignored")
            return
        self.wrench_setpoints[name] = w

    def force_demand(self, q: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(F_d, F_measured) of Aghili eqs. (51)-(52) at q, or (None, None) while force control is off or waits for
        its first set point. Closures without a set point are driven to zero constraint force (F_d is the whole
        constraint force, eq. (52)); closures without a measurement count as meeting their set point."""
        if not self.p["force_control"] or not self.wrench_setpoints:
            return None, None
        robot = self.setup.robot
        F_d, F_m = np.zeros(robot.nv), np.zeros(robot.nv)
        for c in self.setup.controller.constraints.constraints:
            if not isinstance(c, LoopClosure):
                continue
            Fd_c = constraint_force_of_wrench(robot, c, q, self.wrench_setpoints.get(c.name, np.zeros(6))).force
            F_d += Fd_c
            w_m = self.wrench_measured.get(c.name)
            F_m += Fd_c if w_m is None else constraint_force_of_wrench(robot, c, q, w_m).force
        return F_d, (F_m if self.p["force_measurement"] == "topic" else None)

    # ------------------------------------------------------------------------------------------------ activate
    def activate(self, pending: PreparedTrajectory, state: JointStateSnapshot, now: float) -> None:
        """Start a prepared trajectory from the state measured now (O(points) copy at most)."""
        if not self.intake.claim(pending):
            return
        setup = self.setup
        positions, velocities = state.positions, state.v
        if pending.task:  # start from the measured task coordinates theta(q), theta' = J q'
            theta, J, _ = setup.task.evaluate(setup.robot, state.q, state.v)
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
                                        self.limits(pending.task))
                except TrajectoryError as err:
                    self.intake.reject(one_line(str(err), 400))
                    return
        self.active = ActiveTrajectory(traj, start, pending.points, pending.task)
        self.intake.started()
        self.log("info", f"trajectory {pending.seq} started: {pending.points} points, until {traj.duration:.3f} s "
                         f"after {'its stamp' if pending.stamp > 0 else 'now'}")

    # ------------------------------------------------------------------------------------------------ update
    def update(self, now: float) -> Cycle:
        """One control cycle at ``now`` (module docstring)."""
        setup = self.setup
        if setup is None:
            return Cycle(None, ERROR if self.model_rejected else WARN, f"no robot model ({self.model_error})")
        state = self.measured()
        if state is None:
            return Cycle(None, WARN, f"waiting for joint_states of {io.shown(setup.tracker.missing)}")
        timeout = self.p["state_timeout"]
        if self.last_state_time is None or now - self.last_state_time > timeout:
            return Cycle(None, WARN, f"joint_states older than state_timeout ({timeout} s)")
        if state.unavailable_velocity:
            return Cycle(None, WARN, f"joint velocities unknown for {io.shown(state.unavailable_velocity)} (no "
                                     f"velocity in joint_states and no earlier position within state_timeout)")
        pending = self.intake.pending  # one read: the worker may leave a newer one at any time
        if pending is not None:
            self.activate(pending, state, now)
        active = self.active
        if active is None:
            return Cycle(None, WARN, "waiting for a trajectory on ~/trajectory")
        t0 = time.perf_counter()
        try:
            out, finished = self._law(active, state, now)
        except ValueError as err:  # ProjectionInputError, ModelError, ConstraintError, TrajectoryError
            self.log("error", f"control cycle failed, zero effort ({one_line(str(err))})")
            return Cycle(None, ERROR, f"control law failed: {one_line(str(err))}")
        self.update_times.append(time.perf_counter() - t0)
        if not np.all(np.isfinite(out.tau)):
            return Cycle(None, ERROR, "control law returned non-finite effort")
        sat = io.saturate(out.tau[setup.command_index], setup.effort_limits)
        self.saturated_last = bool(sat.saturated)
        self.last_output = out
        self.saturation.add(sat)
        if sat.saturated:
            self.stats["saturated_cycles"] += 1
            saturated = [n for n, x in zip(setup.effort_limits.names, sat.excess) if x > 0.0]
            self.log("warning", f"effort saturated at the limits of {io.shown(saturated)} (amounts on /diagnostics)")
        c = out.controllability
        if c is not None and not c.controllable:
            unmet = io.passive_unmet_text(setup.robot.joint_names, c)
            return Cycle(sat.efforts, ERROR, "passive joints not controllable here (eq. (64) fails): the desired "
                                             "motion cannot be produced with zero passive torque; unmet passive demand "
                                             f"{unmet}", out, state, sat)
        unmet = io.demand_unmet(out, setup.robot.joint_names)
        if unmet is not None:
            return Cycle(sat.efforts, *unmet, out, state, sat)
        return Cycle(sat.efforts, OK, "holding the last trajectory point" if finished else "tracking", out, state, sat)

    def _law(self, active: ActiveTrajectory, state: JointStateSnapshot, now: float) -> tuple[ProjectedControl, bool]:
        setup = self.setup
        sample = active.trajectory.sample(now - active.start)
        F_d, F_m = self.force_demand(state.q)
        dt = 0.0 if self.last_cycle_time is None else min(max(now - self.last_cycle_time, 0.0), 2.0 / self.p["rate_hz"])
        self.last_cycle_time = now
        hold = self.saturated_last  # anti-windup: no integration while the command is saturated
        if active.task:
            out = setup.controller.update_task(state.q, state.v, sample.positions, sample.velocities,
                                               sample.accelerations, force_desired=F_d, force_measured=F_m, dt=dt,
                                               hold_integral=hold)
        else:
            q_d = configuration_from_positions(setup.robot, sample.positions)
            out = setup.controller.update(state.q, state.v, q_d, sample.velocities, sample.accelerations,
                                          force_desired=F_d, force_measured=F_m, dt=dt, hold_integral=hold)
        return out, sample.finished

    # ------------------------------------------------------------------------------------------------ outputs
    def reactions(self, cycle: Cycle) -> tuple[np.ndarray, bool | list[bool]]:
        """(F, unique) of a command of the law: the constraint force F = A^T lambda [N m, N] of the command sent,
        and per joint whether its reaction is unique (one flag for all when the analysis cannot run)."""
        out, state, sat, setup = cycle.output, cycle.state, cycle.saturation, self.setup
        force, unique = out.constraint_force, out.multipliers_unique
        if sat.saturated:  # the law's prediction is for the torque it asked for; the robot gets the saturated one
            applied = out.tau.copy()
            applied[setup.command_index] = sat.efforts
            dyn = constrained_dynamics(setup.robot, setup.controller.constraints, state.q, state.v, applied,
                                       tolerance=setup.controller.tolerance)
            force, unique = dyn.constraint_force, dyn.multipliers_unique
        per_joint = self._joint_uniqueness(state.q)
        return force, unique if per_joint is None else per_joint

    def _joint_uniqueness(self, q: np.ndarray) -> list[bool] | None:
        """Per-joint uniqueness of the reactions for the active constraint set, computed when the set changes, at
        the configuration of that cycle; None if the analysis cannot run (logged)."""
        setup = self.setup
        names = setup.controller.constraints.names
        if self.uniqueness is None or self.uniqueness[0] != names:
            try:
                flags = io.joint_uniqueness(setup.text, setup.robot.joint_names, self.locked_joints(), q)
            except ValueError as err:
                self.log("warning", f"joint_reactions: per-joint solvability unavailable, one flag for all joints "
                                    f"({one_line(str(err))})")
                flags = None
            self.uniqueness = (names, flags)
        return self.uniqueness[1]

    def locked_joints(self) -> list[str]:
        names = self.setup.controller.constraints.names if self.setup is not None else ()
        return [n[len("lock("):-1] for n in names if n.startswith("lock(")]

    def report(self, level: int, message: str) -> tuple[int, str, dict[str, Any]]:
        """(level, message, values) of /diagnostics from the last cycle's status: never OK while the command
        saturated since the previous report, nor while a refused trajectory is unreported; the model, the joints,
        the gains, the limits, the controller (its id and how many were built: 1), the law's last output
        (rank, degrees of freedom, controllability with its margin and the unmet passive demand), timings and the
        counters."""
        setup, parts = self.setup, [message]
        robot = setup.robot if setup is not None else None
        values: dict[str, Any] = {
            "model": robot.name if robot else "",
            "commanded_joints": ",".join(setup.command_joints if setup else self.p["joints"]),
            "passive_joints": ",".join(self.p["passive_joints"]),
            "controller_id": id(setup.controller) if setup is not None else "",
            "controller_builds": self.builds, "kp": self.p["kp"], "kd": self.p["kd"], "rate_hz": self.p["rate_hz"],
            "effort_limits": setup.effort_limits.text() if setup else "",
        }
        if self.saturation is not None:
            joints, excess, cycles = self.saturation.take()
            values["saturated_joints"] = ",".join(joints)
            values["saturation_excess"] = ",".join(f"{n}={x!r}" for n, x in excess.items())
            if joints:  # saturated at least once since the last report: never OK
                level = max(level, WARN)
                parts.append(f"{self.saturation.describe(excess)} in {cycles} cycles")
        if setup is not None:
            values["constraints"] = ",".join(setup.controller.constraints.names)
            values["locked_joints"] = ",".join(self.locked_joints())
            values["n"] = robot.nv
        out = self.last_output
        if out is not None:
            values.update(rank=out.rank, dof=out.dof, multipliers_unique=out.multipliers_unique)
            if out.force_error is not None:
                values["force_error_norm"] = float(np.linalg.norm(out.force_error))
            c = out.controllability
            if c is not None:
                values.update(controllable=c.controllable, controllability_margin=c.margin,
                              controllability_tolerance=c.tolerance, passive_residual=c.passive_residual,
                              passive_unmet=io.passive_unmet_text(robot.joint_names, c),
                              acceleration_error=c.acceleration_error)
            if out.task_conditioning is not None:
                values["task_conditioning"] = out.task_conditioning
        if self.update_times:
            values["update_time_mean_ms"] = 1e3 * float(np.mean(self.update_times))
            values["update_time_max_ms"] = 1e3 * float(np.max(self.update_times))
        values["trajectory_points"] = self.active.points if self.active is not None else 0
        values["preparing_trajectory"] = self.intake.worker.busy
        rejection = self.intake.take_unreported()
        with self.intake.lock:
            values["trajectory_preparation_ms"] = self.intake.preparation_ms
            values["last_rejection"] = self.intake.last_rejection
            values.update(self.stats)
        if rejection:
            level = max(level, WARN)
            parts.append(f"trajectory rejected ({rejection}); the previous goal continues")
        return level, "; ".join(parts), values
