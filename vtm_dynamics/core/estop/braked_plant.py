"""A plant for the ``robot_sim`` node: a demo motion, then a braked category-0 stop on a fixed time step.

This is deliberately NOT the predictor's algorithm. The predictor (``vtm_dynamics.core.estop``) locates every
stick/slip event and integrates between events; this plant uses a plain fixed-step time-stepping scheme so that
its rest pose is an independent check of the prediction:

* semi-implicit (symplectic) Euler, step ``dt`` (default 1e-4 s): v+ = v + dt a(q, v), q+ = q (+) dt v+;
* dynamics M(q) a = tau_brake - h(q, v) from the core model (Müller 2026, eq. (3) without constraints), with the
  joints of the stuck set S held (a_S = 0): M_FF a_F = tau_F - h_F, and the holding torque the brake must supply
  lambda_S = M_SF a_F + h_S (the constraint torque of Müller 2026, eq. (3) with unit rows J = e_S^T);
* brake torques from the core brake model (``vtm_dynamics.core.estop.brakes``): nothing before ``engage_delay``, then
  -sign(v) * sliding - viscous * v while sliding;
* stick rule: a sliding braked joint whose velocity changes sign within a step is set to v = 0 and joins S;
* slip rule: while some |lambda_j| exceeds the holding capacity, the joint with the largest ratio
  |lambda_j| / capacity leaves S (one at a time, then lambda is recomputed); it starts sliding with the sliding
  torque opposing the held tendency, sign(lambda_j) * sliding_j;
* pawls (``pawl_delay``): at that time the joint locks abruptly with the momentum-consistent jump of the core
  switching module (Müller 2026, eq. (22), joint-lock rows) and holds up to ``pawl_holding_torque``;
* the extended brake terms, written here from the brake parameters alone (not with the predictor's code): the
  friction level of a sliding joint is mu(v) = sliding + (breakaway - sliding) exp(-(v/v_s)^2) (mu(0) = breakaway
  for a joint slipping from rest); a brake with a rise time delivers the fraction
  clip((t - engage_delay) / rise_time, 0, 1) of its torque and of its holding capacity; armatures are added to the
  diagonal of the mass matrix.

Zero crossings are resolved only to the step, so the rest pose carries an O(dt) error (about v dt/2 per joint).
State: one position per joint (``q``, size nv: revolute and continuous [rad], prismatic [m]), so a continuous
joint's angle is integrated as a plain number (unwrapped, continuous with the start) and given to Pinocchio as
(cos, sin) (``RobotModel.configuration_from_angles``). Before, a model with a continuous joint was refused and
the ``robot_sim`` node never stopped. Units: s, rad, rad/s, N m; m, m/s, N for prismatic joints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.switching.transitions import transition


class PlantError(ValueError):
    """Bad plant input (shape mismatch, non-finite motion parameters)."""


@dataclass(frozen=True)
class DemoMotion:
    """Sinusoidal joint motion q_i(t) = home_i + amplitude_i sin(2 pi f t + phase_i) [rad], played back exactly.

    Velocities and accelerations are its exact derivatives, so the state at the E-stop instant is known without
    integration error (a kinematic playback, as a position-controlled robot would follow it).
    """

    home: np.ndarray
    amplitude: np.ndarray
    frequency: float
    phase: np.ndarray

    def state(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        w = 2.0 * math.pi * self.frequency
        arg = w * t + self.phase
        return (self.home + self.amplitude * np.sin(arg), self.amplitude * w * np.cos(arg),
                -self.amplitude * w * w * np.sin(arg))


def demo_motion(nv: int, home: list[float], amplitude: list[float], frequency: float, phase: list[float]) -> DemoMotion:
    """Build a :class:`DemoMotion`; empty lists mean zeros; each non-empty list must have ``nv`` entries."""

    def vec(x: list[float], name: str) -> np.ndarray:
        a = np.zeros(nv) if len(x) == 0 else np.asarray(x, dtype=float)
        if a.shape != (nv,) or not np.all(np.isfinite(a)):
            raise PlantError(f"{name}: expected {nv} finite numbers, got {len(x)}")
        return a

    if not (math.isfinite(frequency) and frequency >= 0):
        raise PlantError(f"motion_frequency: must be finite and >= 0, got {frequency}")
    return DemoMotion(vec(home, "motion_home"), vec(amplitude, "motion_amplitude"), float(frequency),
                      vec(phase, "motion_phase"))


@dataclass(frozen=True)
class PlantEvent:
    """Something that happened in the plant: ``kind`` in {engage, stick, slip, pawl, rest}, time after the E-stop
    [s], joint names."""

    kind: str
    time: float
    joints: tuple[str, ...]


@dataclass
class PlantRecord:
    """Time series of the stop as simulated: time after the E-stop [s], q one position per joint [rad, m],
    v [rad/s, m/s]."""

    t: list[float] = field(default_factory=list)
    q: list[np.ndarray] = field(default_factory=list)
    v: list[np.ndarray] = field(default_factory=list)


class BrakedPlant:
    """Fixed-step category-0 stop of ``robot`` with ``brakes`` (see the module docstring).

    Call :meth:`start` with the state at the E-stop, then :meth:`advance` to later times. ``rest_time`` is set
    (time after the E-stop [s]) once every joint is held; then the state no longer changes.
    """

    def __init__(self, robot: RobotModel, brakes: BrakeSet, dt: float = 1e-4, record_every: int = 10) -> None:
        if not (math.isfinite(dt) and dt > 0):
            raise PlantError(f"dt: must be > 0, got {dt}")
        for j in robot.joints:
            if j.nv != 1:
                raise PlantError(f"joint {j.name!r}: the plant supports revolute, continuous and prismatic joints "
                                 "only")
        self.robot = robot
        self.brakes = brakes
        self.dt = float(dt)
        self.record_every = max(1, int(record_every))
        self.names = robot.joint_names
        self.q = np.zeros(robot.nv)  # one position per joint [rad, m] (module docstring)
        self.v = np.zeros(robot.nv)
        self.t = 0.0  # time after the E-stop [s]
        self.stuck = np.zeros(robot.nv, dtype=bool)
        self.capacity = np.where(brakes.braked, brakes.holding_torque, 0.0)
        self.pawl_held = np.zeros(robot.nv, dtype=bool)  # capacities set by a pawl do not rise with the brake
        self.rotor = np.where(brakes.braked, brakes.armature, 0.0)
        self.slip_sign = np.zeros(robot.nv)
        self.pawl_done = np.zeros(robot.nv, dtype=bool)
        self.events: list[PlantEvent] = []
        self.rest_time: float | None = None
        self.record = PlantRecord()
        self._steps = 0
        self._engaged_reported = np.zeros(robot.nv, dtype=bool)
        self.started = False

    # ------------------------------------------------------------------ public
    def start(self, q: np.ndarray, v: np.ndarray) -> None:
        """The state at the E-stop: ``q`` one position per joint [rad, m] (velocity order), ``v`` [rad/s, m/s]."""
        self.q = self.robot.check_v(q, "q (one position per joint)").copy()
        self.v = self.robot.check_v(v).copy()
        self.t = 0.0
        self.started = True
        self._record()

    def tcp_travel(self, frame: str) -> tuple[float, float]:
        """(path length, straight-line distance) [m] of ``frame`` from the E-stop to the current state: the sum of
        chords between the recorded states (every ``record_every`` steps, 1 ms by default) and the current one."""
        pts = np.array([self.robot.frame_placement(self.configuration(q), frame).translation
                        for q in self.record.q + [self.q]])
        return float(np.sum(np.linalg.norm(np.diff(pts, axis=0), axis=1))), float(np.linalg.norm(pts[-1] - pts[0]))

    def advance(self, t_target: float) -> None:
        """Integrate until ``t_target`` [s after the E-stop] (to the step grid) or until rest."""
        while self.rest_time is None and self.t + 0.5 * self.dt <= t_target:
            self._step()

    def configuration(self, positions: np.ndarray | None = None) -> np.ndarray:
        """Pinocchio's configuration (size nq) of ``positions`` (default: the current ``q``)."""
        x = self.q if positions is None else positions
        return x if self.robot.nq == self.robot.nv else self.robot.configuration_from_angles(x)

    @property
    def at_rest(self) -> bool:
        return self.rest_time is not None

    # ------------------------------------------------------------------ one step
    def _engaged(self, t: float) -> np.ndarray:
        return self.brakes.braked & (t >= self.brakes.engage_delay - 1e-12)

    def _rise_fraction(self) -> np.ndarray:
        """Fraction of each brake's torque and capacity available at the current time (1 without a rise time)."""
        b = self.brakes
        out = np.ones(self.robot.nv)
        for i in range(self.robot.nv):
            if b.braked[i] and b.rise_time[i] > 0.0:
                out[i] = min(1.0, max(0.0, (self.t - b.engage_delay[i]) / b.rise_time[i]))
        return out

    def _friction_level(self) -> np.ndarray:
        """Coulomb level mu(v) [N m] of each brake at the current velocities (Stribeck where configured)."""
        b = self.brakes
        level = b.sliding_torque.copy()
        for i in range(self.robot.nv):
            if b.braked[i] and b.stribeck_velocity[i] > 0.0 and b.breakaway_torque[i] > b.sliding_torque[i]:
                ratio = self.v[i] / b.stribeck_velocity[i]
                level[i] = b.sliding_torque[i] + (b.breakaway_torque[i] - b.sliding_torque[i]) * math.exp(-ratio * ratio)
        return level

    def _accelerations(self, engaged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Accelerations with S held and the holding torques lambda (zero outside S), after slip decisions."""
        q = self.configuration()
        M = self.robot.mass_matrix(q) + np.diag(self.rotor)
        fraction = self._rise_fraction()
        capacity = np.where(self.pawl_held, self.capacity, self.capacity * fraction)
        h = self.robot.bias_forces(q, self.v)
        while True:
            tau = self._brake_torque(engaged)
            F = ~self.stuck
            a = np.zeros(self.robot.nv)
            if F.any():
                a[F] = np.linalg.solve(M[np.ix_(F, F)], tau[F] - h[F])
            lam = np.zeros(self.robot.nv)
            S = self.stuck
            if S.any():
                lam[S] = M[np.ix_(S, F)] @ a[F] + h[S]
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(S, np.abs(lam) / np.maximum(capacity, 1e-300), 0.0)
            worst = int(np.argmax(ratio)) if S.any() else -1
            if worst < 0 or ratio[worst] <= 1.0 + 1e-9:
                return a, lam
            self.stuck[worst] = False
            self.slip_sign[worst] = math.copysign(1.0, lam[worst])
            self.events.append(PlantEvent("slip", self.t, (self.names[worst],)))

    def _brake_torque(self, engaged: np.ndarray) -> np.ndarray:
        b = self.brakes
        direction = np.where(self.v != 0.0, -np.sign(self.v), self.slip_sign)
        tau = (direction * self._friction_level() - b.viscous * self.v) * self._rise_fraction()
        return np.where(engaged & ~self.stuck, tau, 0.0)

    def _apply_pawls(self) -> None:
        due = np.isfinite(self.brakes.pawl_delay) & ~self.pawl_done & (self.t >= self.brakes.pawl_delay - 1e-12)
        if not due.any():
            return
        M = self.robot.mass_matrix(self.configuration()) + np.diag(self.rotor)
        eye = np.eye(self.robot.nv)
        held = self.stuck & ~due
        J1 = eye[held] if held.any() else None
        result = transition(M, J1, eye[due], self.v, "kkt")
        self.v = np.where(self.stuck | due, 0.0, result.v_plus)
        self.pawl_done |= due
        self.stuck |= due
        self.capacity = np.where(due, self.brakes.pawl_holding_torque, self.capacity)
        self.pawl_held |= due
        self.events.append(PlantEvent("pawl", self.t, tuple(n for n, d in zip(self.names, due) if d)))

    def _step(self) -> None:
        dt = self.dt
        engaged = self._engaged(self.t)
        newly = engaged & ~self._engaged_reported
        if newly.any():
            self._engaged_reported |= newly
            self.events.append(PlantEvent("engage", self.t, tuple(n for n, e in zip(self.names, newly) if e)))
            # a braked joint already at rest when its brake engages is held (if it can be)
            still = newly & (self.v == 0.0)
            self.stuck |= still
        self._apply_pawls()
        a, _ = self._accelerations(engaged)
        v_new = np.where(self.stuck, 0.0, self.v + dt * a)
        sliding = engaged & ~self.stuck
        moving = self.v != 0.0
        # sliding joint: its velocity changes sign (or reaches 0) within the step; slipping from rest: it does not
        # move in the slip direction (-slip_sign) at all
        crossed = sliding & np.where(moving, np.sign(v_new) != np.sign(self.v),
                                     (self.slip_sign != 0.0) & (np.sign(v_new) != -self.slip_sign))
        if crossed.any():
            v_new[crossed] = 0.0
            self.stuck |= crossed
            self.slip_sign[crossed] = 0.0
            self.events.append(PlantEvent("stick", self.t + dt, tuple(n for n, c in zip(self.names, crossed) if c)))
        self.slip_sign = np.where(v_new != 0.0, 0.0, self.slip_sign)
        self.q = self.q + dt * v_new  # one position per joint: q (+) dv = q + dv
        self.v = v_new
        self.t += dt
        self._steps += 1
        if self._steps % self.record_every == 0:
            self._record()
        if self.stuck.all():
            # all held: confirm that the brakes can hold the final configuration
            self._accelerations(self._engaged(self.t))
            if self.stuck.all():
                self.rest_time = self.t
                self.events.append(PlantEvent("rest", self.t, self.names))
                self._record()

    def _record(self) -> None:
        self.record.t.append(self.t)
        self.record.q.append(self.q.copy())
        self.record.v.append(self.v.copy())
