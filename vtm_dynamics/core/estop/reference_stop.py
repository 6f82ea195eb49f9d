"""An independent, tight reference of a category-0 stop: scipy's DOP853 with event functions, restarted at every
event, for checking the predictor's accuracy (benchmarks, accuracy tests).

Deliberately NOT the predictor's code: the brake law, the dynamics with held joints and the stick/slip rule are
written here again from the brake parameters alone, and the numerics are scipy's (J. R. Dormand and P. J. Prince's
8th-order pair with its dense output and event location, E. Hairer, S. P. Norsett, G. Wanner, Solving ODEs I,
Sec. II.10), at tolerances of 1e-12 by default. It models every term of :class:`~vtm_dynamics.core.estop.brakes.
BrakeSet` (a test checks that it reads every field the predictor reads):

* brake i, engaged from ``engage_delay``: while its joint slides, -r(t) [s (sliding + (breakaway - sliding)
  exp(-(v / stribeck_velocity)^2)) + viscous v] with s the sliding direction and r(t) = min(1, (t - engage_delay)
  / rise_time) (1 without a rise time); a joint at rest is held while |lambda| <= r(t) holding_torque;
* the reflected rotor inertias (``armature``) on the diagonal of M;
* pawls: at ``pawl_delay`` the joint locks with the momentum-consistent jump of Müller 2026, eq. (22) (the KKT
  form of :mod:`vtm_dynamics.core.switching.transitions`) and holds up to ``pawl_holding_torque``;
* dynamics: M(q) a + h(q, v) = tau + E_L lambda with a_L = 0 for the held set L (Müller 2026, eq. (3) with
  joint-lock rows), solved on the free rows with numpy;
* stick/slip at rest: the joints at rest with an engaged brake (or held) are decided together by trying the
  splits with the fewest slipping joints first (each slipping joint in both directions, meeting the breakaway
  torque), the consistent one (held within capacity, slipping joints accelerating the way they slide) with the
  least capacity usage; a joint whose release was located is not held again at that instant.

Revolute and prismatic joints only (q a vector). Units: SI (rad, rad/s, N m, s).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import scipy.integrate

from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.switching.transitions import transition


@dataclass(frozen=True)
class ReferenceStop:
    """Outcome: ``q_final`` [rad], ``joint_stop_times`` [s] (when each joint came to rest for good; nan if it
    did not), ``stopped`` (every joint held before the horizon), ``stop_time`` [s] (nan if not stopped),
    ``events`` ((time [s], kind, joint indices)), ``n_rhs`` (right-hand-side evaluations)."""

    q_final: np.ndarray
    joint_stop_times: np.ndarray
    stopped: bool
    stop_time: float
    events: tuple[tuple[float, str, tuple[int, ...]], ...]
    n_rhs: int


class _Plant:
    """The stop's state between events and its right-hand side (module docstring)."""

    def __init__(self, robot: RobotModel, brakes, q0, v0) -> None:
        n = robot.nv
        self.robot = robot
        self.braked = np.asarray(brakes.braked, dtype=bool)
        self.delay = np.where(self.braked, brakes.engage_delay, np.inf)
        self.sliding = np.where(self.braked, brakes.sliding_torque, 0.0)
        self.breakaway = np.where(self.braked, brakes.breakaway_torque, 0.0)
        self.v_s = np.where(self.braked, brakes.stribeck_velocity, 0.0)
        self.viscous = np.where(self.braked, brakes.viscous, 0.0)
        self.holding = np.where(self.braked, brakes.holding_torque, 0.0)
        self.rise = np.where(self.braked, brakes.rise_time, 0.0)
        self.rotor = np.diag(np.where(self.braked, brakes.armature, 0.0))
        self.pawl = np.where(self.braked, brakes.pawl_delay, np.inf)
        self.pawl_holding = np.asarray(brakes.pawl_holding_torque, dtype=float)
        self.q, self.v = np.array(q0, dtype=float), np.array(v0, dtype=float)
        self.held = np.zeros(n, dtype=bool)
        self.pawl_held = np.zeros(n, dtype=bool)
        self.direction = np.zeros(n)
        self.rest = np.full(n, np.nan)
        self.n_rhs = 0

    def engaged(self, t: float) -> np.ndarray:
        return t >= self.delay - 1e-12

    def fraction(self, t: float) -> np.ndarray:
        """The share of each brake's torque and capacity available at t [s]."""
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.clip((t - self.delay) / self.rise, 0.0, 1.0)
        return np.where(self.rise > 0.0, np.where(t >= self.delay, r, 0.0), 1.0)

    def capacity(self, t: float) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            brake = np.where(self.fraction(t) > 0.0, self.holding * self.fraction(t), 0.0)
        return np.where(self.pawl_held, self.pawl_holding, brake)

    def friction(self, v: np.ndarray, direction: np.ndarray, t: float) -> np.ndarray:
        level = self.sliding.copy()
        on = (self.v_s > 0.0) & (self.breakaway > self.sliding)
        level[on] += (self.breakaway[on] - self.sliding[on]) * np.exp(-(v[on] / self.v_s[on]) ** 2)
        return -self.fraction(t) * (direction * level + self.viscous * v)

    def solve(self, t, q, v, held, direction):
        """(a, lambda) with the joints ``held`` at rest and the engaged free joints sliding in ``direction``."""
        self.n_rhs += 1
        M = self.robot.mass_matrix(q) + self.rotor
        h = self.robot.bias_forces(q, v)
        tau = np.where(self.engaged(t) & ~held, self.friction(v, direction, t), 0.0)
        F = ~held
        a = np.zeros(len(v))
        if F.any():
            a[F] = np.linalg.solve(M[np.ix_(F, F)], (tau - h)[F])
        lam = (M @ a + h - tau)[held]
        return a, lam

    def rhs(self, t, y):
        n = len(self.v)
        a, _ = self.solve(t, y[:n], y[n:], self.held, self.direction)
        return np.concatenate([y[n:], a])

    def decide(self, t: float, released: frozenset = frozenset()) -> tuple[list[int], list[int]]:
        """Stick/slip over the joints at rest (module docstring); returns (newly held, slipping or released)."""
        C = [i for i in range(len(self.v)) if self.v[i] == 0.0 and (self.engaged(t)[i] or self.held[i])]
        if not C:
            return [], []
        cap = np.where(self.held, self.capacity(t), np.where(self.fraction(t) > 0, self.holding * self.fraction(t),
                                                                    0.0))
        for avoid in (released, frozenset()):  # a located release is not held again at that instant, if possible
            for n_slip in range(len(C) + 1):
                best = None
                for R in itertools.combinations(C, n_slip):
                    if not avoid <= set(R):
                        continue
                    for signs in itertools.product((1.0, -1.0), repeat=n_slip):
                        held = self.held.copy()
                        held[C] = True
                        held[list(R)] = False
                        d = self.direction.copy()
                        d[list(R)] = signs
                        a, lam = self.solve(t, self.q, self.v, held, d)
                        usage = np.abs(lam) / np.maximum(cap[np.flatnonzero(held)], 1e-300)
                        if np.any(usage > 1.0 + 1e-12) or any(d[i] * a[i] <= 0.0 for i in R):
                            continue
                        if best is None or usage.sum() < best[0]:
                            best = (float(usage.sum()), held, d)
                if best is not None:
                    _, held, d = best
                    newly = [i for i in C if held[i] and not self.held[i]]
                    moving = [i for i in C if not held[i]]
                    self.rest[newly] = t
                    self.rest[[i for i in moving if self.held[i]]] = np.nan
                    self.held, self.direction = held, d
                    return newly, moving
        raise RuntimeError(f"reference: no consistent stick/slip split at t={t:.6g} s")


def reference_stop(robot: RobotModel, brakes, q0, v0, *, t_max: float = 5.0, rtol: float = 1e-12,
                   atol: float = 1e-12) -> ReferenceStop:
    """The category-0 stop from (q0 [rad], v0 [rad/s]) with ``brakes`` (a BrakeSet), power cut at t = 0."""
    if robot.nq != robot.nv:
        raise ValueError("reference_stop: revolute and prismatic joints only")
    plant = _Plant(robot, brakes, q0, v0)
    n = robot.nv
    boundaries = sorted({float(x) for x in np.concatenate([plant.delay, plant.delay + plant.rise, plant.pawl])
                         if math.isfinite(x) and 0.0 <= x < t_max})
    events: list[tuple[float, str, tuple[int, ...]]] = []
    t = 0.0
    released: frozenset = frozenset()
    while True:
        while boundaries and boundaries[0] <= t + 1e-12:
            tb = boundaries.pop(0)
            newly_engaged = np.flatnonzero(np.abs(plant.delay - tb) <= 1e-12)
            for i in newly_engaged:
                if not plant.held[i] and plant.v[i] != 0.0:
                    plant.direction[i] = np.sign(plant.v[i])
            due = np.flatnonzero((np.abs(plant.pawl - tb) <= 1e-12) & ~plant.pawl_held)
            if due.size:
                M = robot.mass_matrix(plant.q) + plant.rotor
                eye = np.eye(n)
                before = plant.held & ~np.isin(np.arange(n), due)
                result = transition(M, eye[before] if before.any() else None, eye[due], plant.v, "kkt")
                plant.v = np.where(before | np.isin(np.arange(n), due), 0.0, result.v_plus)
                plant.held[due] = True
                plant.pawl_held[due] = True
                plant.rest[due] = tb
                events.append((tb, "pawl", tuple(int(i) for i in due)))
                moving = plant.engaged(tb) & ~plant.held & (plant.v != 0.0)
                plant.direction = np.where(moving, np.sign(plant.v), plant.direction)
            newly, moving = plant.decide(tb)
            if newly_engaged.size or newly or moving:
                events.append((tb, "engage", tuple(int(i) for i in newly_engaged) + tuple(newly)))
        if plant.held.all() or t >= t_max - 1e-12:
            break
        t_next = boundaries[0] if boundaries else t_max
        funcs, kinds = [], []
        engaged = plant.engaged(t)
        for i in range(n):
            if engaged[i] and not plant.held[i] and plant.direction[i] != 0.0:
                f = (lambda i, s: lambda _t, y: y[n + i] * s)(i, plant.direction[i])
                f.terminal, f.direction = True, -1
                funcs.append(f)
                kinds.append(("stick", i))
        for i in np.flatnonzero(plant.held):
            limit = plant.pawl_holding[i] if plant.pawl_held[i] else plant.holding[i]
            if not math.isfinite(limit):
                continue
            k = int(np.sum(plant.held[:i]))

            def g(tt, y, i=i, k=k):
                _, lam = plant.solve(tt, y[:n], y[n:], plant.held, plant.direction)
                return abs(lam[k]) - plant.capacity(tt)[i]
            g.terminal, g.direction = True, 1
            funcs.append(g)
            kinds.append(("release", int(i)))
        sol = scipy.integrate.solve_ivp(plant.rhs, (t, t_next), np.concatenate([plant.q, plant.v]),
                                        method="DOP853", rtol=rtol, atol=atol, events=funcs or None)
        hits = [(float(te[0]), k) for k, te in enumerate(sol.t_events or []) if te.size]
        if hits:
            te, k = min(hits)
            y = sol.y_events[k][0]
            t, plant.q, plant.v = te, y[:n].copy(), y[n:].copy()
            kind, i = kinds[k]
            for tt, kk in hits:  # crossings within 1e-9 s of the first are decided together
                if kinds[kk][0] == "stick" and tt <= te + 1e-9:
                    plant.v[kinds[kk][1]] = 0.0
            plant.v[plant.held] = 0.0
            released = frozenset([i]) if kind == "release" else frozenset()
            newly, moving = plant.decide(t, released)
            events.append((t, kind, tuple(newly) if kind == "stick" else (i,)))
        else:
            t = float(sol.t[-1])
            plant.q, plant.v = sol.y[:n, -1].copy(), sol.y[n:, -1].copy()
            plant.v[plant.held] = 0.0
    stopped = bool(plant.held.all())
    stops = np.where(plant.held, plant.rest, np.nan)
    return ReferenceStop(plant.q.copy(), stops, stopped, float(np.nanmax(stops)) if stopped else math.nan,
                         tuple(events), plant.n_rhs)
