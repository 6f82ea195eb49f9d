"""Event-driven forward dynamics of a variable topology mechanism (Müller 2026, Secs. 4.5 and 6).

Between events the topology is fixed and the constrained equations of motion are integrated; at an event the new
constraints are activated and the velocity jumps by a transition of ``switching`` (eq. (22), (32) or (37)).

Equations of motion between events (``constrained_acceleration``):

* ``"locked_aba"`` (pure joint locks; chosen automatically by ``simulate``): at the start of each segment the
  locked joints are welded at their lock angles into a Pinocchio reduced model (``buildReducedModel``), and the
  free joints are integrated with ABA on it. This is eq. (11)/(12) with F the selection of the free joints
  (Voronets with F' = 0), i.e. exactly what eq. (7) gives for unit-row J. The locked coordinates are not
  integrated at all, so they stay at the lock angle to the last bit (no drift, no stabilization needed).
* ``"locked_cholesky"``: the same equations on the full model, M_ff a_f = tau_f - h_f with a Cholesky factor of
  the free block of M, a_locked = 0.
* ``"projected"`` (any constraints, e.g. loop closures, knife edges): eq. (7),
  a = M^-1 N_{J,M}^T (tau - h) - J_M^+ (J' v + 2 alpha J v), with an optional velocity-level stabilization alpha
  [1/s] (0 = plain eq. (7)); holonomic closures then drift slowly at position level (``diagnostics.
  constraint_residuals`` measures it).

The three right-hand sides agree to 1e-10 (``test_integrator``); locked_aba is by far the cheapest (one ABA on the
reduced model instead of a factorization per evaluation; ``bench/bench_switching.py`` measures all three against
MuJoCo), so pure-lock segments use it.

Integrators: fixed-step classical RK4 (as in the paper, default 1e-4 s; steps are shortened to land exactly on
time events) and scipy ``solve_ivp`` (adaptive, any of its explicit methods) with event location. State events
are zero crossings of a user function g(t, q, v); with RK4 they are located by bisection on the step size to
``event_tol`` seconds. Configuration updates use q (+) dq (pinocchio.integrate); this is exact for revolute,
prismatic and continuous joints (commutative configuration spaces), which is what arms and the models shipped here
use; the adaptive path integrates tangent coordinates around the segment start and rejects spherical/free joints.

Units: t [s], q [rad, m], v [rad/s, m/s], tau [N m, N].

Size: about 500 lines because the segment integration, the event location and the transition call share one
segment state (topology, reduced model, step, records); splitting them would pass that state between modules
without making any part shorter to read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pinocchio as pin
import scipy.integrate
import scipy.linalg

from vtm_dynamics.core.robot.constraints import Constraint
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.switching.transitions import DEFAULT_RANK_TOL, TransitionResult, solve_activation
from vtm_dynamics.core.switching.topology import Topology

TorqueFunction = Callable[[float, np.ndarray, np.ndarray], np.ndarray]
EventCondition = Callable[[float, np.ndarray, np.ndarray], float]


class IntegrationError(ValueError):
    """Bad simulation input (negative horizon, unknown integrator, unsupported joint type...)."""


# ---------------------------------------------------------------------------------------------- events
@dataclass(frozen=True)
class TimeEvent:
    """Activate ``activate`` at time ``time`` [s] (a brake locking at a known instant, Müller 2026, eq. (38))."""

    time: float
    activate: tuple[Constraint, ...]
    name: str = ""

    def __init__(self, time: float, activate: Constraint | Sequence[Constraint], name: str = "") -> None:
        if not np.isfinite(time):
            raise IntegrationError("TimeEvent.time: must be finite")
        acts = tuple(activate) if isinstance(activate, (list, tuple)) else (activate,)
        object.__setattr__(self, "time", float(time))
        object.__setattr__(self, "activate", acts)
        object.__setattr__(self, "name", name or f"t={time:g}s")


@dataclass(frozen=True)
class StateEvent:
    """Activate ``activate`` when ``condition(t, q, v)`` crosses zero (``direction``: +1 rising, -1 falling, 0
    both). Fires once. Example: a joint locks when its rate reaches zero."""

    condition: EventCondition
    activate: tuple[Constraint, ...]
    name: str = ""
    direction: int = 0

    def __init__(self, condition: EventCondition, activate: Constraint | Sequence[Constraint], name: str = "",
                 direction: int = 0) -> None:
        if direction not in (-1, 0, 1):
            raise IntegrationError("StateEvent.direction: must be -1, 0 or +1")
        acts = tuple(activate) if isinstance(activate, (list, tuple)) else (activate,)
        object.__setattr__(self, "condition", condition)
        object.__setattr__(self, "activate", acts)
        object.__setattr__(self, "name", name or "state event")
        object.__setattr__(self, "direction", direction)


@dataclass(frozen=True)
class EventRecord:
    """What happened at one event: time [s], state just before, the transition and the topology after."""

    time: float
    name: str
    q: np.ndarray
    v_minus: np.ndarray
    transition: TransitionResult
    topology: Topology


@dataclass(frozen=True)
class Trajectory:
    """Sampled solution. At each event two samples share the event time: before and after the jump.

    ``t`` (N,), ``q`` (N, nq), ``v`` (N, nv); ``topologies[i]`` is active on samples with ``segment[i]``.
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    segment: np.ndarray
    topologies: tuple[Topology, ...]
    events: tuple[EventRecord, ...]
    integrator: str
    steps: int = 0
    rhs_evaluations: int = 0
    transition_method: str = "kkt"

    @property
    def final_topology(self) -> Topology:
        return self.topologies[-1]


# ---------------------------------------------------------------------------------------------- dynamics
FORMULATIONS = ("auto", "locked_aba", "locked_cholesky", "projected")


def constrained_acceleration(
    robot: RobotModel,
    topology: Topology,
    q: np.ndarray,
    v: np.ndarray,
    tau: np.ndarray | None = None,
    formulation: str = "auto",
    stabilization: float = 0.0,
) -> np.ndarray:
    """Acceleration a [rad/s^2] of the constrained system at (q, v) (Müller 2026, eq. (7)).

    ``locked_cholesky`` (pure joint locks): a_locked = 0, M_ff a_f = tau_f - h_f. ``projected``: eq. (7) for any
    constraints. ``auto`` picks the first for pure locks. (``locked_aba`` is a per-segment model reduction used by
    ``simulate``; here it is evaluated as ``locked_cholesky``, which is mathematically identical.)
    """
    if formulation not in FORMULATIONS:
        raise IntegrationError(f"formulation: must be one of {', '.join(FORMULATIONS)}, got {formulation!r}")
    if formulation in ("auto", "locked_aba"):
        formulation = "locked_cholesky" if topology.is_joint_locks_only else "projected"
    model, data = robot.model, robot.data
    h = pin.nonLinearEffects(model, data, q, v)
    rhs = -h if tau is None else tau - h
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    if formulation == "locked_cholesky":
        if not topology.is_joint_locks_only:
            raise IntegrationError("formulation: 'locked_cholesky' needs a topology of joint locks only")
        free = topology.free_v_indices(robot)
        a = np.zeros(robot.nv)
        if free.size:
            L = np.linalg.cholesky(M[np.ix_(free, free)])
            a[free] = scipy.linalg.solve_triangular(L.T, scipy.linalg.solve_triangular(L, rhs[free], lower=True,
                                                    check_finite=False), lower=False, check_finite=False)
        return a
    cho = scipy.linalg.cho_factor(M)
    a_free = scipy.linalg.cho_solve(cho, rhs)  # unconstrained acceleration (eq. (6): the vector a)
    if len(topology) == 0:
        return a_free
    J = topology.jacobian(robot, q)
    gamma = topology.drift(robot, q, v)
    if stabilization:
        gamma = gamma + 2.0 * stabilization * (J @ v)
    MinvJt = scipy.linalg.cho_solve(cho, J.T)
    A = J @ MinvJt
    # eq. (7) rewritten: a = a_free - J_M^+ (J a_free + J' v); the m x m inverse is a truncated pseudo-inverse
    lam = np.linalg.pinv(A, rcond=DEFAULT_RANK_TOL, hermitian=True) @ (J @ a_free + gamma)
    return a_free - MinvJt @ lam


class _FullDynamics:
    """Segment dynamics on the full state (any topology): x = (q, v) of the model."""

    def __init__(self, robot, topology, tau, formulation, stabilization, counter):
        self.robot, self.topology, self.tau = robot, topology, tau
        self.formulation, self.stabilization, self.counter = formulation, stabilization, counter

    def reduce(self, q, v):
        return q.copy(), v.copy()

    def expand(self, x, y):
        return x, y

    def accel(self, t, x, y):
        self.counter[0] += 1
        u = None if self.tau is None else np.asarray(self.tau(t, x, y), dtype=float)
        return constrained_acceleration(self.robot, self.topology, x, y, u, self.formulation, self.stabilization)

    def integrate(self, x, y, h):
        return pin.integrate(self.robot.model, x, y * h)


class _LockedABADynamics:
    """Segment dynamics of a pure-lock topology: Pinocchio's reduced model (locked joints welded at their lock
    angles, bodies merged) and ABA on the free joints; x = (q_free, v_free). The locked coordinates are not
    integrated at all, so they stay at the lock angle exactly."""

    def __init__(self, robot, topology, q_lock, tau, counter):
        self.robot, self.tau, self.counter = robot, tau, counter
        locked_ids = sorted({robot.joint(n).joint_id for n in topology.locked_joints})
        self.model = pin.buildReducedModel(robot.model, locked_ids, q_lock) if locked_ids else robot.model.copy()
        self.data = self.model.createData()
        free_joints = [j for j in robot.joints if j.joint_id not in set(locked_ids)]
        self.qi = np.array([i for j in free_joints for i in range(j.idx_q, j.idx_q + j.nq)], dtype=int)
        self.vi = np.array([i for j in free_joints for i in range(j.idx_v, j.idx_v + j.nv)], dtype=int)
        self.q_template = np.array(q_lock, dtype=float)
        self.vector_space = all(j.nq == j.nv for j in free_joints)
        self.zero_tau = np.zeros(len(self.vi))

    def reduce(self, q, v):
        return q[self.qi].copy(), v[self.vi].copy()

    def expand(self, x, y):
        q = self.q_template.copy()
        q[self.qi] = x
        v = np.zeros(self.robot.nv)
        v[self.vi] = y
        return q, v

    def accel(self, t, x, y):
        self.counter[0] += 1
        if self.tau is None:
            u = self.zero_tau
        else:
            q, v = self.expand(x, y)
            u = np.asarray(self.tau(t, q, v), dtype=float)[self.vi]
        return pin.aba(self.model, self.data, x, y, u)

    def integrate(self, x, y, h):
        if self.vector_space:
            return x + h * y
        return pin.integrate(self.model, x, y * h)


def _segment_dynamics(robot, topology, q, tau, formulation, stabilization, counter):
    if formulation not in FORMULATIONS:
        raise IntegrationError(f"formulation: must be one of {', '.join(FORMULATIONS)}, got {formulation!r}")
    if formulation in ("auto", "locked_aba") and topology.is_joint_locks_only:
        return _LockedABADynamics(robot, topology, q, tau, counter)
    if formulation == "locked_aba":
        raise IntegrationError("formulation: 'locked_aba' needs a topology of joint locks only")
    return _FullDynamics(robot, topology, tau, formulation, stabilization, counter)


# ---------------------------------------------------------------------------------------------- simulation
@dataclass
class _Recorder:
    t: list = field(default_factory=list)
    q: list = field(default_factory=list)
    v: list = field(default_factory=list)
    seg: list = field(default_factory=list)

    def add(self, t, q, v, seg):
        if self.t and self.t[-1] == t and self.seg[-1] == seg and np.array_equal(self.v[-1], v):
            return  # already the last sample
        self.t.append(t)
        self.q.append(np.array(q, copy=True))
        self.v.append(np.array(v, copy=True))
        self.seg.append(seg)


def _check_commutative(robot: RobotModel) -> None:
    for j in robot.joints:
        if j.nv > 1 and j.kind != "JointModelTranslation":
            raise IntegrationError(f"joint {j.name!r} ({j.kind}): the integrators support 1-DOF and translation joints")


def simulate(
    robot: RobotModel,
    q0: np.ndarray,
    v0: np.ndarray,
    t_end: float,
    events: Sequence[TimeEvent | StateEvent] = (),
    topology: Topology | Sequence[Constraint] | None = None,
    integrator: str = "rk4",
    dt: float = 1e-4,
    transition: str = "kkt",
    tau: TorqueFunction | None = None,
    formulation: str = "auto",
    stabilization: float = 0.0,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    record_every: int = 1,
    event_tol: float = 1e-12,
    t0: float = 0.0,
    scipy_method: str = "DOP853",
) -> Trajectory:
    """Integrate from (q0, v0) at t0 to t_end [s] through the given events.

    ``integrator``: ``"rk4"`` (fixed step ``dt``) or ``"adaptive"`` (scipy ``solve_ivp`` with ``scipy_method``,
    ``rtol``/``atol``, events located to solver precision). ``transition``: the method of
    ``switching.solve_activation`` used at every event (``"naive"`` for the non-physical comparison).
    ``tau(t, q, v)``: applied generalized forces [N m] (default none). ``topology``: constraints active at t0
    (bound at q0). Samples are stored every ``record_every`` steps (RK4), at every solver step (adaptive), and
    always just before and after each event and at t_end.
    """
    q = robot.check_q(q0, "q0").copy()
    v = robot.check_v(v0, "v0").copy()
    if not np.isfinite(t_end) or t_end < t0:
        raise IntegrationError("t_end: must be finite and >= t0")
    if integrator not in ("rk4", "adaptive"):
        raise IntegrationError(f"integrator: must be rk4 or adaptive, got {integrator!r}")
    if integrator == "rk4" and not (dt > 0 and np.isfinite(dt)):
        raise IntegrationError("dt: must be positive")
    if record_every < 1:
        raise IntegrationError("record_every: must be >= 1")
    _check_commutative(robot)
    topo = Topology.of(topology)
    topo = Topology(tuple(c.bind(robot, q) for c in topo.constraints))
    if len(topo):
        violation = float(np.max(np.abs(topo.velocity_residual(robot, q, v))))
        if violation > 1e-9 * (1.0 + float(np.max(np.abs(v)))):
            raise IntegrationError(
                f"v0: violates the initial topology's velocity constraints (max |J v0| = {violation:.3g}); "
                "apply switching.solve_activation to v0 first"
            )
    time_events = sorted((e for e in events if isinstance(e, TimeEvent)), key=lambda e: e.time)
    state_events = [e for e in events if isinstance(e, StateEvent)]
    for e in events:
        if not isinstance(e, (TimeEvent, StateEvent)):
            raise IntegrationError(f"events: expected TimeEvent or StateEvent, got {type(e).__name__}")

    counter = [0]
    rec = _Recorder()
    topologies = [topo]
    records: list[EventRecord] = []
    rec.add(t0, q, v, 0)
    t = t0
    pending_state = list(state_events)
    steps = 0
    te_idx = 0

    def fire(t_ev: float, evts: list, qq: np.ndarray, vv: np.ndarray) -> np.ndarray:
        nonlocal topo
        for ev in evts:
            res, topo_new = solve_activation(robot, qq, vv, topo, list(ev.activate), method=transition)
            records.append(EventRecord(t_ev, ev.name, qq.copy(), vv.copy(), res, topo_new))
            topo = topo_new
            vv = res.v_plus
        topologies.append(topo)
        rec.add(t_ev, qq, vv, len(topologies) - 1)
        return vv

    while True:
        due = []
        while te_idx < len(time_events) and time_events[te_idx].time <= t + 1e-12:
            due.append(time_events[te_idx])
            te_idx += 1
        if due:
            rec.add(t, q, v, len(topologies) - 1)  # sample just before the jump
            v = fire(t, due, q, v)
        if t >= t_end - 1e-12:
            break
        t_stop = min(t_end, time_events[te_idx].time if te_idx < len(time_events) else t_end)
        dyn = _segment_dynamics(robot, topo, q, tau, formulation, stabilization, counter)
        seg = len(topologies) - 1
        if integrator == "rk4":
            t, q, v, hit, n = _rk4_segment(dyn, t, t_stop, q, v, dt, pending_state, event_tol, rec, seg,
                                           record_every)
        else:
            t, q, v, hit, n = _adaptive_segment(dyn, t, t_stop, q, v, pending_state, rtol, atol, rec, seg,
                                                scipy_method)
        steps += n
        if hit is not None:
            pending_state.remove(hit)
            rec.add(t, q, v, seg)
            v = fire(t, [hit], q, v)
        elif t >= t_end - 1e-12:
            t = t_end
    rec.add(t, q, v, len(topologies) - 1)
    return Trajectory(
        t=np.array(rec.t), q=np.array(rec.q), v=np.array(rec.v), segment=np.array(rec.seg, dtype=int),
        topologies=tuple(topologies), events=tuple(records), integrator=integrator, steps=steps,
        rhs_evaluations=counter[0], transition_method=transition,
    )


def _rk4_step(dyn, t, x, y, h):
    """One classical RK4 step of x' = y, y' = a(t, x, y) on the segment's (possibly reduced) state."""
    k1 = dyn.accel(t, x, y)
    y2 = y + 0.5 * h * k1
    k2 = dyn.accel(t + 0.5 * h, dyn.integrate(x, y, 0.5 * h), y2)
    y3 = y + 0.5 * h * k2
    k3 = dyn.accel(t + 0.5 * h, dyn.integrate(x, y2, 0.5 * h), y3)
    y4 = y + h * k3
    k4 = dyn.accel(t + h, dyn.integrate(x, y3, h), y4)
    return dyn.integrate(x, (y + 2.0 * y2 + 2.0 * y3 + y4) / 6.0, h), y + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def _crossed(ev: StateEvent, g0: float, g1: float) -> bool:
    if ev.direction >= 0 and g0 < 0.0 <= g1:
        return True
    if ev.direction <= 0 and g0 > 0.0 >= g1:
        return True
    return False


def _rk4_segment(dyn, t, t_stop, q, v, dt, state_events, event_tol, rec, seg, record_every):
    x, y = dyn.reduce(q, v)
    n = 0
    t_start = t
    g_prev = [float(e.condition(t, q, v)) for e in state_events]
    while t < t_stop - 1e-12:
        # the grid is t_start + k dt (no accumulated round-off); the last step lands exactly on t_stop
        t_next = t_start + (n + 1) * dt
        if t_next > t_stop - 1e-12:
            t_next = t_stop
        h = t_next - t
        x1, y1 = _rk4_step(dyn, t, x, y, h)
        n += 1
        if state_events:
            q1, v1 = dyn.expand(x1, y1)
            g_new = [float(e.condition(t_next, q1, v1)) for e in state_events]
            hits = [i for i, e in enumerate(state_events) if _crossed(e, g_prev[i], g_new[i])]
            if hits:
                lo, hi, first = 0.0, h, hits[0]
                while hi - lo > event_tol and hi - lo > 1e-15 * max(1.0, abs(t)):
                    mid = 0.5 * (lo + hi)
                    qm, vm = dyn.expand(*_rk4_step(dyn, t, x, y, mid))
                    crossed = [i for i in hits
                               if _crossed(state_events[i], g_prev[i], float(state_events[i].condition(t + mid, qm, vm)))]
                    if crossed:
                        hi, first = mid, crossed[0]
                    else:
                        lo = mid
                qh, vh = dyn.expand(*_rk4_step(dyn, t, x, y, hi))
                return t + hi, qh, vh, state_events[first], n
            g_prev = g_new
        t, x, y = t_next, x1, y1
        if n % record_every == 0:
            rec.add(t, *dyn.expand(x, y), seg)
    q, v = dyn.expand(x, y)
    return t, q, v, None, n


def _adaptive_segment(dyn, t, t_stop, q, v, state_events, rtol, atol, rec, seg, method, skip_zero=True):
    # A condition that is exactly zero at the segment start (e.g. a joint rate of a system released from rest)
    # is not a crossing; as with RK4, it is ignored until it has left zero: such events are watched only after
    # a first sub-interval of at most 1 microsecond.
    at_zero = [e for e in state_events if float(e.condition(t, q, v)) == 0.0] if skip_zero else []
    if at_zero and t_stop > t:
        t_mid = min(t + 1e-6, t_stop)
        others = [e for e in state_events if e not in at_zero]
        t1, q1, v1, hit, n1 = _adaptive_segment(dyn, t, t_mid, q, v, others, rtol, atol, rec, seg, method, False)
        if hit is not None or t1 >= t_stop:
            return t1, q1, v1, hit, n1
        rec.add(t1, q1, v1, seg)
        t2, q2, v2, hit2, n2 = _adaptive_segment(dyn, t1, t_stop, q1, v1, state_events, rtol, atol, rec, seg, method,
                                                False)
        return t2, q2, v2, hit2, n1 + n2
    x_ref, y0 = dyn.reduce(q, v)
    k = len(y0)

    def unpack(z):
        return dyn.integrate(x_ref, z[:k], 1.0), z[k:]

    def rhs(tt, z):
        x, y = unpack(z)
        return np.concatenate([y, dyn.accel(tt, x, y)])

    ev_funcs = []
    for e in state_events:
        def f(tt, z, e=e):
            return float(e.condition(tt, *dyn.expand(*unpack(z))))
        f.terminal = True
        f.direction = e.direction
        ev_funcs.append(f)
    z0 = np.concatenate([np.zeros(k), y0])
    sol = scipy.integrate.solve_ivp(rhs, (t, t_stop), z0, method=method, rtol=rtol, atol=atol,
                                    events=ev_funcs or None)
    if sol.status < 0:
        raise IntegrationError(f"adaptive integration failed at t={sol.t[-1]:.6g}s: {sol.message}")
    for tt, z in zip(sol.t[1:-1], sol.y.T[1:-1]):
        rec.add(float(tt), *dyn.expand(*unpack(z)), seg)
    n = len(sol.t) - 1
    if sol.status == 1:
        times = [(te[0], i) for i, te in enumerate(sol.t_events) if len(te)]
        t_hit, i_hit = min(times)
        qq, vv = dyn.expand(*unpack(sol.y_events[i_hit][0]))
        return float(t_hit), qq, vv, state_events[i_hit], n
    qq, vv = dyn.expand(*unpack(sol.y[:, -1]))
    return float(t_stop), qq, vv, None, n
