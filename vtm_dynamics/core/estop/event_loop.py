"""The braking engine: event-driven integration of one stop from the power-off state (Müller 2026, Secs. 6-7).

Between events the braking dynamics with held joints (eq. (3), :mod:`.held_dynamics`) are integrated by explicit
Runge-Kutta steps (:mod:`.runge_kutta`) of at most ``StopSettings.step``. Time events (brake engagement, pawls,
lock events) are step boundaries; all events at one instant are handled together. State events:

* a sliding joint's velocity reaches zero: located on the step's continuous extension, then the time is polished
  by Newton on v_i = 0 (a Newton correction dt so short that the Taylor extrapolation q + v dt + a dt^2/2,
  v + a dt stays within the tolerance is applied by extrapolation, longer ones by re-integration) and the crossing
  velocity set to zero exactly; when the (short, aimed) step's embedded error estimate is below the velocity
  residual the Newton polish accepts, the state at the crossing is taken from the extension, else the step is
  recomputed to the located time;
* a held joint's needed torque reaches its capacity: located by regula falsi (Illinois) on re-computed steps.

Each event is followed by the stick/slip decision (:mod:`.stick_slip`); abrupt locks jump by eq. (22)
(:mod:`.abrupt_lock`).

Extended brake model (:mod:`.brakes`): Stribeck friction enters the sliding phase's right-hand side (slipping from
rest starts at the breakaway level, which the stick/slip decision uses as the torque at v = 0); a brake rise time
makes the brake torque and the holding capacity time-dependent (every evaluation is made at its own time, the
engine's ``_clock``) and the end of each rise is a time event, so that no step straddles the kink; armatures are
added to the diagonal of M on a copy of the Pinocchio model. Without these terms the engine runs exactly the
original code path. Units: SI (rad, rad/s, rad/s^2, N m, J, s).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.estop.abrupt_lock import AbruptLock
from vtm_dynamics.core.estop.held_dynamics import HeldSetDynamics
from vtm_dynamics.core.estop.inputs import StopSettings
from vtm_dynamics.core.estop.results import StopEvent
from vtm_dynamics.core.estop.runge_kutta import (
    AIM, DP5_ERROR, TABLEAUS, RungeKuttaSteps, first_root, hermite_root, illinois_step,
)
from vtm_dynamics.core.estop.stick_slip import StickSlipDecisions
from vtm_dynamics.core.estop.wrenches import joint_forces

_EMPTY = np.zeros(0)
_EMPTY_I = np.zeros(0, dtype=int)


class ScheduledLock(NamedTuple):
    """An abrupt lock of the velocity indices ``joints`` at ``time`` [s], holding up to ``capacity`` [N m] each."""

    time: float
    joints: np.ndarray
    capacity: np.ndarray


class TimeEvent(NamedTuple):
    """A step boundary known in advance: ``kind`` ``engage`` (the brake of velocity index ``joint``) or ``lock``
    (``lock``), at ``time`` [s]. (Immutable named tuples: several are built per prediction.)"""

    time: float
    kind: str
    joint: int = -1
    lock: ScheduledLock | None = None


class BrakingEngine(HeldSetDynamics, RungeKuttaSteps, StickSlipDecisions, AbruptLock):
    """State of one stop (active set, slip directions, capacities, events) and its event loop (module docstring).

    The parts are mixed in so that the inner loop calls bound methods directly: :class:`HeldSetDynamics` (the
    right-hand side), :class:`RungeKuttaSteps`, :class:`StickSlipDecisions`, :class:`AbruptLock`."""

    def __init__(self, robot: RobotModel, brakes: BrakeSet, settings: StopSettings) -> None:
        self.robot = robot
        self.m = robot.model
        self.d = robot.data
        self.general = brakes.extended  # Stribeck, rise time or armature present: the extended code path
        if np.any(brakes.armature > 0.0):
            self.m = robot.model.copy()
            self.m.armature = np.asarray(robot.model.armature, dtype=float) + brakes.armature
            self.d = self.m.createData()
        self.nv = robot.nv
        self.brakes = brakes
        self.st = settings
        self.vector_space = robot.nq == robot.nv and all(j.nq == j.nv for j in robot.joints)
        self.n_eval = 0
        self.n_steps = 0
        self.A, self.B = TABLEAUS[settings.method]
        self.ns = len(self.B)
        self.ts = brakes.sliding_torque
        self.c = brakes.viscous
        self.hold = brakes.holding_torque
        self.engaged = np.zeros(self.nv, dtype=bool)
        self.locked = np.zeros(self.nv, dtype=bool)
        self.cap = np.zeros(self.nv)  # holding capacity of locked joints [N m] at the end of every rise
        self.lock_cap = np.zeros(self.nv)  # capacity of the pawls / lock events holding joints [N m] (0: none)
        self.s = np.zeros(self.nv)  # slip direction of engaged free joints (frozen between events)
        self.events: list[StopEvent] = []
        self.rest_since = np.full(self.nv, np.nan)
        self.impulse_energy = 0.0
        self._brake_key = self.ts.tobytes() + self.c.tobytes() + (self.hold > 0.0).tobytes()  # see _phase
        stribeck = brakes.stribeck
        self.has_stribeck = bool(stribeck.any())
        self.dbr = np.where(stribeck, brakes.breakaway_torque - brakes.sliding_torque, 0.0)
        self.inv_vs = np.where(stribeck, 1.0 / np.where(stribeck, brakes.stribeck_velocity, 1.0), 0.0)
        self.rise = np.where(brakes.braked, brakes.rise_time, 0.0)
        self.has_rise = bool(np.any(self.rise > 0.0))
        self.rise_safe = np.where(self.rise > 0.0, self.rise, 1.0)
        self.engage_t = np.full(self.nv, np.inf)
        if self.general:
            self._brake_key += self.dbr.tobytes() + self.inv_vs.tobytes()
        self._clock = 0.0  # time [s] at which the extended brake model is evaluated
        self._t0 = 0.0  # start time [s] of the current Runge-Kutta step
        self._nodes = self.A.sum(axis=1)
        self.names = robot.joint_names
        self._tableau_h = None
        self._tableau_0 = None
        self._set_phase()

    # ---------------------------------------------------------------- event records
    def _holding(self, q, v) -> tuple[np.ndarray, np.ndarray]:
        a, lam, tau = self._f(q, v)
        hold = np.full(self.nv, np.nan)
        hold[self.L] = lam
        return a, hold

    def _wrenches(self, q, v, a) -> np.ndarray:
        pin.rnea(self.m, self.d, q, v, a)
        return joint_forces(self.d, self.m.njoints)

    def _record_event(self, t, kind, idx, q, v_minus, v_plus, dv=None, impulses=_EMPTY, imp_idx=(), loss=0.0,
                      imp_wrench=None, k=None) -> None:
        if k is None:
            a, hold = self._holding(q, v_plus)
        else:
            a = k[0]
            hold = np.full(self.nv, np.nan)
            hold[self.L] = k[1]
        names = self.names
        self.events.append(StopEvent(
            time=float(t), kind=kind, joints=tuple(names[i] for i in idx), q=q.copy(), v_minus=v_minus.copy(),
            v_plus=v_plus.copy(), dv=np.zeros(self.nv) if dv is None else dv, impulses=impulses,
            impulse_joints=tuple(names[i] for i in imp_idx), energy_loss=float(loss), holding_torques=hold,
            wrenches=self._wrenches(q, v_plus, a), impulse_wrenches=imp_wrench,
        ))
        if len(self.events) > self.st.max_events:
            raise RuntimeError(f"more than {self.st.max_events} events (chattering?); raise StopSettings.max_events")

    def _record_decision(self, t, newly, slipping, released, q, v_minus, v_plus, k) -> None:
        """One event per kind of a stick/slip decision at ``t``: joints that stick, joints that start slipping from
        rest, held joints released (a joint appears in exactly one of them), so the record says which joint did
        what when several change at the same instant."""
        for kind, idx in (("stick", newly), ("slip", slipping), ("release", released)):
            if idx:
                self._record_event(t, kind, idx, q, v_minus, v_plus, k=k)

    # ---------------------------------------------------------------- main loop
    def run(self, t0: float, q0: np.ndarray, v0: np.ndarray, engage_times: np.ndarray,
            locks: list[ScheduledLock], samples: dict) -> tuple[float, np.ndarray, np.ndarray, float]:
        """Integrate from (t0 [s], q0, v0) until every joint is held or t_max; brake i engages at
        ``engage_times[i]`` (inf: never). Appends samples; returns the final (t, q, v, W). Size: about 185 lines:
        the steps of one pass (time events, aimed step, crossing, stick/slip) share the state and active set."""
        st = self.st
        t, q, v, W = float(t0), q0.copy(), v0.copy(), 0.0
        W_base = samples["W"][-1] if samples["W"] else 0.0
        timed: list[TimeEvent] = []
        for i in np.flatnonzero(np.isfinite(engage_times)):
            timed.append(TimeEvent(float(engage_times[i]), "engage", joint=int(i)))
        for lock in locks:
            timed.append(TimeEvent(float(lock.time), "lock", lock=lock))
        self.engage_t = np.asarray(engage_times, dtype=float).copy()
        for i in np.flatnonzero(np.isfinite(self.engage_t) & (self.rise > 0.0)):
            timed.append(TimeEvent(float(self.engage_t[i] + self.rise[i]), "rise_end", joint=int(i)))
        timed.sort(key=lambda e: e.time)
        t_end = t0 + st.t_max
        dense = st.method == "dp5"
        aim = dense and self.vector_space and AIM > 0

        no_drive = np.zeros(self.nv)
        no_drive.flags.writeable = False

        def record(tq, qq, vv, a_hold=None):
            self._clock = tq
            a, lam, tau = self._f(qq, vv) if a_hold is None else a_hold
            if self.nL:
                tb = tau.copy()
                tb[self.L] = lam
            else:
                tb = tau  # the series are copied into arrays at the end
            samples["t"].append(tq)
            samples["q"].append(qq.copy())
            samples["v"].append(vv.copy())
            samples["a"].append(a.copy())
            samples["tau"].append(tb)
            samples["drive"].append(no_drive)
            samples["locked"].append(self.locked.copy())
            samples["W"].append(W_base + W)
            samples["J"].append(self.impulse_energy)
            return a, lam, tau

        k = record(t, q, v)
        stalled = 0  # consecutive events that neither advanced time nor changed the active set
        while True:
            self._clock = self._t0 = t
            # time events due now (all events at the same instant are handled together)
            due = []
            while timed and timed[0].time <= t + 1e-12:
                due.append(timed.pop(0))
            if due:
                eng = [e.joint for e in due if e.kind == "engage"]
                if eng:
                    for i in eng:
                        self.engaged[i] = True
                        if self.locked[i]:
                            self.cap[i] = max(self.cap[i], self.hold[i])
                        elif v[i] != 0.0:
                            self.s[i] = np.sign(v[i])
                    self._set_phase()
                    self._clock = t
                    newly, slip, rel = self._decide(t, q, v)
                    k = record(t, q, v, self._k_after)
                    self._record_event(t, "engage", eng + [i for i in newly if i not in eng], q, v, v, k=k)
                    self._record_decision(t, [], slip, rel, q, v, v, k)  # the engagement's load may free others
                for lock in (e.lock for e in due if e.kind == "lock"):
                    v = self._abrupt_lock(t, q, v, lock.joints, lock.capacity)
                    free_eng = self.engaged & ~self.locked
                    self.s = np.where(free_eng & (v != 0), np.sign(v), self.s)
                    self._set_phase()
                    self._clock = t
                    newly, slip, rel = self._decide(t, q, v)
                    k = record(t, q, v, self._k_after)
                    self._record_decision(t, newly, slip, rel, q, v, v, k)
            if self.nF == 0 or t >= t_end - 1e-12:
                break
            self._t0 = t
            t_next = timed[0].time if timed else math.inf
            h = min(st.step, t_next - t, t_end - t)
            if aim and self.slide_idx.size:
                vs_, as_ = v.take(self.slide_idx), k[0].take(self.slide_idx)
                dec = vs_ * as_ < 0.0
                if dec.any():
                    t_pred = AIM * float(np.min(-vs_[dec] / as_[dec]))
                    if t_pred < h:
                        h = t_pred
            if self.has_stribeck and self.slide_idx.size:
                h = self._stribeck_step(h, q, v, k[0])
            q1, v1, W1 = self._step(q, v, W, h, (k[0], k[2].dot(v)))
            self.n_steps += 1
            self._clock = t + h
            k1 = self._f(q1, v1)
            # zero crossings of sliding joints
            sl = self.slide_idx
            cross = sl[v1.take(sl) * self._slide_s <= 0.0] if sl.size else _EMPTY_I
            tau_c = math.inf
            taus = {}
            if cross.size:
                if dense:
                    C = self._dense_velocity_coefficients(h, k1, cross)
                    for j, i in enumerate(cross):
                        taus[i] = first_root((v[i], *C[j]), self.s[i]) * h
                else:
                    for i in cross:
                        taus[i] = hermite_root(v[i], v1[i], k[0][i], k1[0][i], h, self.s[i])
                tau_c = min(taus.values())
            K_step = self._K
            tau_r = math.inf
            ri = self.release_idx
            if ri.size:
                if (np.abs(k1[1].take(self._release_pos)) > self._capacity(ri, t + h)).any():
                    tau_r = self._locate_release(q, v, W, h, k, ri, min(tau_c, h))
            if tau_c == math.inf and tau_r == math.inf:
                t = t_next if h == t_next - t else t + h  # land exactly on time events
                q, v, W, k = q1, v1, W1, k1
                record(t, q, v, k)
                continue
            tau = max(min(tau_c, tau_r), 0.0)
            k0 = (k[0], k[2].dot(v))
            if dense and self.vector_space and tau_c <= tau_r and tau > 0:
                # the state at the crossing from the continuous extension when the step's embedded error estimate
                # (which bounds the extension's error) is below the velocity residual the Newton polish accepts
                self._K = K_step
                i0 = min(taus, key=taus.get)
                err = h * np.abs(DP5_ERROR[:6].dot(K_step) + DP5_ERROR[6] * k1[0]).max()
                if err <= st.event_tol * abs(k1[0][i0]):
                    qe, ve, We = self._dense_state(q, v, W, h, v1, k1, tau / h)
                else:
                    qe, ve, We = self._step(q, v, W, tau, k0)
            else:
                qe, ve, We = self._step(q, v, W, tau, k0) if tau > 0 else (q, v, W)
            self._clock = t + tau
            ke = self._f(qe, ve)
            if tau_c <= tau_r:
                # polish the crossing time on the integrator itself: Newton on v_i(tau) = 0 with a_i(tau)
                i0 = min(taus, key=taus.get)
                t_first = tau
                # Newton steps shorter than the tolerance allows for a second-order Taylor extrapolation (its
                # velocity error jerk dt^2 / 2, with the step's mean jerk and a safety factor 10, below the velocity
                # residual event_tol |a_i| that ends the iteration) extrapolate the state (1 evaluation); longer
                # ones re-integrate from the step start.
                jerk = None
                for _ in range(4):
                    vi, ai = ve[i0], ke[0][i0]
                    if ai == 0.0 or abs(vi) <= st.event_tol * abs(ai):
                        break
                    dt_ = -vi / ai
                    if not (0.0 < tau + dt_ <= h):
                        break
                    if jerk is None:
                        jerk = float(np.max(np.abs(k1[0] - k[0]))) / h
                    if 5.0 * jerk * dt_ * dt_ <= st.event_tol * abs(ai):
                        a_e = ke[0]
                        We = We + float(ke[2] @ ve) * dt_ \
                            + (0.5 * dt_ * dt_) * float(ke[2] @ a_e + self.cv @ (a_e * ve))
                        qe = self._advance(qe, dt_ * ve + (0.5 * dt_ * dt_) * a_e)
                        ve = ve + dt_ * a_e
                    else:
                        qe, ve, We = self._step(q, v, W, tau + dt_, k0)
                    tau = tau + dt_
                    self._clock = t + tau
                    ke = self._f(qe, ve)
                for i in taus:
                    taus[i] += tau - t_first
            q, v, W = qe, ve, We
            t = t + tau
            v_minus = v.copy()
            if tau_c <= tau_r:
                zero = [i for i, ti in taus.items() if ti <= tau + st.simultaneity_tol]
                v[zero] = 0.0
                v_minus[zero] = 0.0
            record(t, q, v_minus, ke)
            force = frozenset()
            if tau_r < tau_c:
                lf = np.zeros(self.nv)
                lf[self.L] = ke[1]
                cap_now = np.zeros(self.nv)
                cap_now[ri] = self._capacity(ri, t)
                force = frozenset(int(i) for i in ri if abs(lf[i]) >= cap_now[i] * (1 - 1e-9))
            self._clock = t
            newly, slip, rel = self._decide(t, q, v, force)
            if tau == 0.0 and not (newly or slip or rel):
                stalled += 1
                if stalled > 100:
                    raise RuntimeError(f"no progress at t={t:.6g} s: an event at this instant changes nothing "
                                       "(stick/slip threshold reached exactly; check holding vs breakaway torques)")
            else:
                stalled = 0
            k = record(t, q, v, self._k_after)
            self._record_decision(t, newly, slip, rel, q, v_minus, v, k)
        self.W = W
        return t, q, v, W

    def _stribeck_step(self, h: float, q: np.ndarray, v: np.ndarray, a: np.ndarray) -> float:
        """Step [s] limited so that decelerating sliding joints with Stribeck friction cross their Stribeck region
        (|v| < 3 v_s, where the friction rises steeply towards the breakaway level) in steps that change the
        velocity by at most v_s / 2 each, landing near the region's edge first: the Runge-Kutta step and its
        continuous extension then resolve the friction curve as they resolve smooth dynamics. While a brake's
        torque still rises, its deceleration grows within the step: it is bounded by |a| plus the full brake
        torque times (M^-1)_ii."""
        idx = self.slide_idx
        inv_vs = self.inv_vs.take(idx)
        vi, ai = v.take(idx), a.take(idx)
        rate = np.abs(ai)
        dec = vi * ai < 0.0
        if self.has_rise:
            rising = self._ramp(self._t0).take(idx) < 1.0
            if rising.any():
                minv = np.diag(pin.computeMinverse(self.m, self.d, q)).take(idx)
                full = (self.ts + self.dbr).take(idx) + self.c.take(idx) * np.abs(vi)
                rate = np.where(rising, rate + full * minv, rate)
                dec = dec | rising
        dec &= inv_vs > 0.0
        if not dec.any():
            return h
        vs = 1.0 / inv_vs[dec]
        speed, rate = np.abs(vi[dec]), rate[dec]
        small = 0.5 * vs / rate
        outside = np.maximum(speed - 3.0 * vs, 0.0) / rate
        return min(h, float(np.min(np.where(outside > small, outside, small))))

    def _locate_release(self, q, v, W, h, k, ri, h_max) -> float:
        """Earliest time in (0, h_max] [s] where a held joint's needed torque reaches its capacity (Illinois)."""
        t0 = self._t0

        def g(tau):
            qq, vv, _ = self._step(q, v, W, tau, (k[0], k[2] @ v))
            self._clock = t0 + tau
            _, lam, _ = self._f(qq, vv)
            lf = np.zeros(self.nv)
            lf[self.L] = lam
            return float(np.max(np.abs(lf[ri]) - self._capacity(ri, t0 + tau)))
        lf = np.zeros(self.nv)
        lf[self.L] = k[1]
        ga = float(np.max(np.abs(lf[ri]) - self._capacity(ri, t0)))
        return first_positive(g, h_max, ga, 1e-12)


def first_positive(g, b: float, ga: float, tol: float) -> float:
    """The first x in (0, b] where g(x) > 0 (g(0) = ga <= 0), by regula falsi with the Illinois modification to a
    bracket shorter than ``tol``; inf if g(b) <= 0."""
    a = 0.0
    gb = g(b)
    if gb <= 0:
        return math.inf
    side = 0
    for _ in range(60):
        c = (a * gb - b * ga) / (gb - ga)
        a, ga, b, gb, side = illinois_step(a, ga, b, gb, c, g(c), side)
        if b - a < tol:
            break
    return b
