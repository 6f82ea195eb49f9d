"""The E-stop engine's event loop as one compiled call, for batches whose M(q) and h(q, v) are generated code
(Müller 2026, Secs. 6-7: eq. (3) with the held joints as unit constraint rows between events, the stick/slip
decision at each event).

This is the loop of :meth:`.compiled_engine.CompiledEngine.run` (its docstring gives the physics and the numerics)
written for Numba: the same steps, the same time and state events in the same order, the same decisions, the same
samples. With M and h from Pinocchio's calls the loop must stay in Python; with generated M and h (batches,
:mod:`.generated_dynamics`) nothing in it needs Python, and the loop's own Python (about 0.3 ms of the 0.55 ms a
UR5 stop took in a batch) goes. A test compares every field of many stops (payloads, brake factors, category 1,
releases) with the Python loop driving the same generated M and h, bit for bit.

What stays in Python: abrupt locks (pawls and lock events: the jump of eq. (22) is solved by
:mod:`vtm_dynamics.core.switching`; a stop with any runs the Python loop), and the event records
(:class:`.results.StopEvent`, with the joints' wrenches from Pinocchio's RNEA), made after the call from the log
this loop writes: one row of :func:`log_columns` per event (time, kind code, number of joints, the joints in the
order the Python loop names them, then q, v before, v after, the holding torques of the held joints (nan where
free) and the accelerations, nv each).

The functions below are compiled inside each robot's generated module, which defines ``stages`` (the six
Runge-Kutta stages of a step) and ``mh_at`` (M and h at the state in rows QS, VST) for that robot and includes this
file's text from :data:`MARKER` on: Numba caches a function on disk only when the functions it calls are globals of
a module, not arguments. Here they are never compiled. Units: SI (s, rad, rad/s, N m).
"""

from __future__ import annotations

import math

import numpy as np

from vtm_dynamics.core.estop import compiled_events as ce
from vtm_dynamics.core.estop import compiled_steps as cs
from vtm_dynamics.core.estop.compiled_decision import RELEASED, SLIPPING, STUCK
from vtm_dynamics.core.estop.compiled_dynamics import INVERSE_STRIBECK_SPEED, jit
from vtm_dynamics.core.estop.runge_kutta import illinois_step

# status of a drive call (the Python side raises the engine's errors)
DONE, UNDERFLOW, NOT_POSITIVE_DEFINITE, NO_SPLIT, NO_PROGRESS, TOO_MANY_EVENTS = range(6)
# time events handed in (sorted as the Python loop sorts them) and event kinds logged
ENGAGE_EVENT, RISE_END_EVENT = 0, 2
KINDS = ("engage", "stick", "slip", "release")


def failure(status: int, t: float = math.nan, max_events: int = 0) -> str:
    """The message of the engine's RuntimeError for a :mod:`.compiled_driver` status at time t [s]."""
    return {
        UNDERFLOW: f"step size underflow at t={t:.9g} s",
        NOT_POSITIVE_DEFINITE: "the mass matrix of the free joints is not positive definite",
        NO_SPLIT: "stick/slip decision: no consistent split found (check brake capacities)",
        NO_PROGRESS: f"no progress at t={t:.6g} s: an event at this instant changes nothing (stick/slip "
                     "threshold reached exactly; check holding vs breakaway torques)",
        TOO_MANY_EVENTS: f"more than {max_events} events (chattering?); raise StopSettings.max_events",
    }[status]


def time_events(engage_times: np.ndarray, rise: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The brakes' time events sorted by (time [s], code) with ties in joint order: each engagement at
    ``engage_times`` [s] (ENGAGE_EVENT; inf: never) and, for a ``rise`` time [s] > 0, the end of its torque rise
    (RISE_END_EVENT); (times, codes, joints)."""
    braked = np.flatnonzero(np.isfinite(engage_times))
    rising = braked[rise[braked] > 0.0]
    times = np.concatenate([engage_times[braked], engage_times[rising] + rise[rising]])
    codes = np.concatenate([np.full(braked.size, ENGAGE_EVENT, dtype=np.int64),
                            np.full(rising.size, RISE_END_EVENT, dtype=np.int64)])
    joints = np.concatenate([braked, rising])
    order = np.lexsort((codes, times))  # stable: equal (time, code) stay in joint order
    return times[order], codes[order], joints[order]


# drive's argument types: tables X, Z, R, E; time events (times, kinds, joints); inertias, armature, M, h; rest
# times, counters; step, end time, simultaneity, event limit
DRIVE_SIGNATURE = ("(float64[:, ::1], float64[::1], float64[:, ::1], float64[:, ::1], float64[::1], int64[::1], "
                   "int64[::1], float64[::1], float64[::1], float64[:, ::1], float64[::1], float64[::1], int64[::1], "
                   "float64, float64, float64, int64)")


def log_columns(nv: int) -> int:
    """Columns of the event log for nv velocities (module docstring)."""
    return 3 + 6 * nv


def module_text() -> str:
    """What a generated module includes of this file: its imports, the status and event constants, and the
    functions from :data:`MARKER` on."""
    with open(__file__, encoding="utf-8") as fh:
        head, body = fh.read().split("\n" + MARKER + "\n", 1)
    imports = [line for line in head.splitlines() if line.startswith(("import ", "from vtm_dynamics"))]
    imports.append("from vtm_dynamics.core.estop.compiled_driver import (DONE, ENGAGE_EVENT, NO_PROGRESS, NO_SPLIT, "
                   "NOT_POSITIVE_DEFINITE, TOO_MANY_EVENTS, UNDERFLOW)")
    return "\n".join(imports) + "\n\n\n" + body


stages = mh_at = None  # each generated module defines its robot's own (module docstring)
MARKER = "# ---- compiled inside each generated module ----"
# ---- compiled inside each generated module ----


_illinois_step = jit(illinois_step)


@jit
def _room(R, Z, rows):
    """R, or R grown so that ``rows`` more samples fit (as CompiledEngine._ensure_room)."""
    if Z[cs.NSAMP] + rows > R.shape[0]:
        grown = np.zeros((2 * R.shape[0] + rows, R.shape[1]))
        grown[:R.shape[0]] = R
        return grown
    return R


@jit
def _log(E, S, t, kind, joints, count, q, v_minus, v_plus, X):
    """Append one event to the log E (grown when full); S[2] counts the rows."""
    n = X.shape[1]
    k = S[2]
    if k >= E.shape[0]:
        grown = np.zeros((2 * E.shape[0] + 4, E.shape[1]))
        grown[:E.shape[0]] = E
        E = grown
    E[k, 0] = t
    E[k, 1] = kind
    E[k, 2] = count
    for j in range(count):
        E[k, 3 + j] = joints[j]
    base = 3 + n
    for i in range(n):
        E[k, base + i] = q[i]
        E[k, base + n + i] = v_minus[i]
        E[k, base + 2 * n + i] = v_plus[i]
        E[k, base + 3 * n + i] = X[cs.LAM0, i] if X[cs.LOCKED, i] > 0.5 else np.nan
        E[k, base + 4 * n + i] = X[cs.KS, i]
    S[2] = k + 1
    return E


@jit
def _log_outcome(E, S, t, outcome, code, kind, q, v, X, joints):
    """Log the joints whose decision outcome is ``code`` as one event of ``kind`` (none: nothing logged)."""
    count = 0
    for i in range(outcome.shape[0]):
        if outcome[i] == code:
            joints[count] = i
            count += 1
    if count:
        E = _log(E, S, t, kind, joints, count, q, v, v, X)
    return E


@jit
def _decide(X, Z, force, outcome, rest):
    """The stick/slip decision at the step start; the rest times of joints that stick or are released."""
    if cs.decide_at_start(X, Z, force, outcome) < 0:
        return False
    t = Z[cs.T0]
    for i in range(X.shape[1]):
        if outcome[i] == STUCK:
            rest[i] = t
        elif outcome[i] == RELEASED:
            rest[i] = np.nan
    return True


@jit
def _margin_at(X, Z, S, p, armature, M, h, t0, step, theta):
    """The release margin at theta of the last step's continuous extension (one evaluation)."""
    ce.dense_to_evaluate(X, Z, theta)
    mh_at(X, p, armature, M, h)
    S[1] += 1
    return ce.release_margin(X, Z, M, h, t0 + theta * step)


@jit
def _release_theta(X, Z, S, p, armature, M, h, step, theta_max):
    """The first theta in (0, theta_max] where a held joint's torque reaches its capacity (regula falsi with the
    Illinois modification, :func:`.runge_kutta.illinois_step`, as :func:`.event_loop.first_positive`); inf if none."""
    t0 = Z[cs.T0]
    ga = ce.start_margin(X, Z)
    tol = 1e-12 / step
    a = 0.0
    b = theta_max
    gb = _margin_at(X, Z, S, p, armature, M, h, t0, step, b)
    if gb <= 0:
        return math.inf
    side = 0
    for _ in range(60):
        c = (a * gb - b * ga) / (gb - ga)
        a, ga, b, gb, side = _illinois_step(a, ga, b, gb, c, _margin_at(X, Z, S, p, armature, M, h, t0, step, c), side)
        if b - a < tol:
            break
    return b


@jit
def _state_event(X, Z, R, E, S, flags, force, outcome, rest, joints, p, armature, M, h, simultaneity):
    """Locate the first state event of the last step, move there, decide, log (CompiledEngine._state_event).
    Returns (status, t, whether the event changed nothing, R, E)."""
    n = X.shape[1]
    step = Z[cs.H]
    t0 = Z[cs.T0]
    zero = np.zeros(n, dtype=np.bool_)
    theta_c = ce.locate_crossing(X, Z, simultaneity, zero) if flags & cs.CROSSING else math.inf
    theta_r = _release_theta(X, Z, S, p, armature, M, h, step, min(theta_c, 1.0)) if flags & cs.RELEASE \
        else math.inf
    crossing = theta_c <= theta_r
    theta = theta_c if crossing else theta_r
    t = t0 + theta * step
    if crossing:
        ce.locate_crossing(X, Z, simultaneity, zero)
        stribeck = False
        for i in range(n):
            if zero[i] and X[cs.BRAKES + INVERSE_STRIBECK_SPEED, i] > 0.0:
                stribeck = True
        if stribeck:
            cs.restart_step(X, Z, theta * step)
            if not stages(X, Z, p, armature, M, h):
                return NOT_POSITIVE_DEFINITE, t, False, R, E
            S[1] += 6
            t += ce.polish_crossing(X, Z, zero)
        ce.extension_to_evaluate(X)
    else:
        ce.dense_to_evaluate(X, Z, theta)
    mh_at(X, p, armature, M, h)
    S[1] += 1
    if not cs.set_state(X, Z, t, Z[cs.WE], M, h):
        return NOT_POSITIVE_DEFINITE, t, False, R, E
    R = _room(R, Z, 2)
    cs.record(X, Z, R)
    if crossing:
        force[:] = False
    else:
        ce.release_force(X, t, force)
    q, v = X[cs.Q0].copy(), X[cs.V0].copy()
    if not _decide(X, Z, force, outcome, rest):
        return NO_SPLIT, t, False, R, E
    changed = False
    for i in range(n):
        if outcome[i] != 0:
            changed = True
    cs.record(X, Z, R)
    for code in (STUCK, SLIPPING, RELEASED):
        E = _log_outcome(E, S, t, outcome, code, code, q, v, X, joints)
    return DONE, t, theta == 0.0 and not changed, R, E


@jit
def _engage(X, Z, R, E, S, t, engaging, count, outcome, rest, joints):
    """Brakes ``engaging[:count]`` engage at t: the decision at once, then the engage event (those joints and any
    other that sticks) and the slip and release events of the decision. Returns (status, R, E)."""
    n = X.shape[1]
    for k in range(count):
        i = engaging[k]
        X[cs.ENGAGED, i] = 1.0  # a held joint's capacity gains the brake's (rising) capacity
        if X[cs.LOCKED, i] < 0.5 and X[cs.V0, i] != 0.0:
            X[cs.DIRECTION, i] = np.sign(X[cs.V0, i])
    q, v = X[cs.Q0].copy(), X[cs.V0].copy()
    if not _decide(X, Z, np.zeros(n, dtype=np.bool_), outcome, rest):
        return NO_SPLIT, R, E
    R = _room(R, Z, 2)
    cs.record(X, Z, R)
    named = count
    for k in range(count):
        joints[k] = engaging[k]
    for i in range(n):
        if outcome[i] == STUCK:
            listed = False
            for k in range(count):
                if engaging[k] == i:
                    listed = True
            if not listed:
                joints[named] = i
                named += 1
    E = _log(E, S, t, 0, joints, named, q, v, v, X)
    for code in (SLIPPING, RELEASED):
        E = _log_outcome(E, S, t, outcome, code, code, q, v, X, joints)
    return DONE, R, E


@jit
def drive(X, Z, R, E, event_t, event_kind, event_joint, p, armature, M, h, rest, S, max_step, t_end,
          simultaneity, max_events):
    """Integrate the stop set up in X, Z (its first sample recorded) until every joint is held or t_end [s]
    (CompiledEngine.run without abrupt locks). Time events: ``event_t`` [s] sorted, with kinds (ENGAGE_EVENT,
    RISE_END_EVENT) and joints. Writes the rest times ``rest`` [s], S = (steps, evaluations, logged events).
    Returns (status, t [s], R, E) with R and E possibly grown."""
    n = X.shape[1]
    t = Z[cs.T0]
    k, m = 0, event_t.shape[0]
    stalled = 0
    force = np.zeros(n, dtype=np.bool_)
    outcome = np.zeros(n, dtype=np.int64)
    engaging = np.zeros(n, dtype=np.int64)
    joints = np.zeros(n, dtype=np.int64)
    while True:
        count = 0
        while k < m and event_t[k] <= t + 1e-12:
            if event_kind[k] == ENGAGE_EVENT:
                engaging[count] = event_joint[k]
                count += 1
            k += 1
        if count:
            status, R, E = _engage(X, Z, R, E, S, t, engaging, count, outcome, rest, joints)
            if status != DONE:
                return status, t, R, E
            if S[2] > max_events:
                return TOO_MANY_EVENTS, t, R, E
        free = False
        for i in range(n):
            if X[cs.LOCKED, i] < 0.5:
                free = True
        if not free or t >= t_end - 1e-12:
            return DONE, t, R, E
        t_next = event_t[k] if k < m else math.inf
        while True:  # steps until a time event or a state event
            if t_next - t <= max_step or t_end - t <= max_step:
                t_limit = min(t_next, t_end)
                limit = t_limit - t
            else:
                limit = max_step
                t_limit = t + limit
            R = _room(R, Z, 4)
            step = cs.begin_step(X, Z, limit, t_limit)
            if not step > 1e-15 * max(1.0, abs(t)):
                return UNDERFLOW, t, R, E
            if not stages(X, Z, p, armature, M, h):
                return NOT_POSITIVE_DEFINITE, t, R, E
            S[1] += 6
            flags = cs.end_step(X, Z, R)
            if flags == cs.REJECTED:
                continue
            S[0] += 1
            if flags == cs.ACCEPTED:
                t = Z[cs.T0]
                if t >= t_next - 1e-12 or t >= t_end - 1e-12:
                    break
                continue
            status, t, idle, R, E = _state_event(X, Z, R, E, S, flags, force, outcome, rest, joints, p, armature,
                                                 M, h, simultaneity)
            if status != DONE:
                return status, t, R, E
            if S[2] > max_events:
                return TOO_MANY_EVENTS, t, R, E
            stalled = stalled + 1 if idle else 0
            if stalled > 100:
                return NO_PROGRESS, t, R, E
            free = False
            for i in range(n):
                if X[cs.LOCKED, i] < 0.5:
                    free = True
            if not free:
                return DONE, t, R, E
