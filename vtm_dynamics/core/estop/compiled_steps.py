"""Compiled Dormand-Prince 5(4) steps with error control, continuous extension and event detection for the braking
engine (:mod:`.compiled_engine`); Pinocchio's M(q) and h(q, v) are computed between the stages by the caller.

Between events the state (q, v) and the brake work W = integral tau_b . v dt [J] are advanced by the 5th-order
solution of the Dormand-Prince 5(4) pair (J. R. Dormand and P. J. Prince 1980; first same as last: the seventh
stage is the derivative at the step end). The step size is controlled by the embedded error estimate
h (b - b*) . k of q and v, in the max norm scaled by atol + rtol |y| (E. Hairer, S. P. Norsett, G. Wanner,
Solving ODEs I, Sec. II.4): a step is accepted when the scaled error is at most 1 and the next one is
h 0.9 err^(-1/5), within [0.2 h, 5 h]. Smooth parts (free fall, the linear torque rise, the Stribeck curve above
and inside its steep region) take the steps their accuracy allows; only time events (engagement, the end of a
rise, locks) are step boundaries, and steps are aimed to end 10 % past the earliest zero crossing predicted at
constant deceleration (-v/a), so that a crossing falls into a short step. A step that such a limit cut short (or
that the Stribeck region below bounded) does not lower the next proposal below the one it was cut from: after an
event the steps resume at the size the error control had reached instead of growing again from the short step
(UR5 bench states: 272 -> 245 evaluations per stop, worst crossing time 1.7e-8 -> 2.8e-8 s against the tight
reference).

Events inside an accepted step (zero crossings, releases) are detected here and located on the step's continuous
extension by :mod:`.compiled_events`.

All engine state lives in one float table ``X`` (rows below, nv columns), scalars in ``Z`` and the recorded samples
in ``R`` (one row per sample: t, W, J, q, v, a, tau, locked), so that a call passes four arrays.
Units: SI (rad, rad/s, rad/s^2, N m, J, s).
"""

from __future__ import annotations

import math

import numpy as np

from vtm_dynamics.core.estop.compiled_decision import decide
from vtm_dynamics.core.estop.compiled_dynamics import (
    ARMATURE, BRAKE_ROWS, HOLD, INVERSE_STRIBECK_SPEED, RISE, SLIDING, STRIBECK_AMPLITUDE, VISCOUS, braked_dynamics,
    ENGAGE, capacity, jit, releasable, rise_fraction,
)

# --- rows of X (nv columns each)
Q0, V0 = 0, 1  # step start state
VS = 2  # 7 rows: stage velocities (VS + 0 = v0, VS + 6 = v at the step end)
KS = 9  # 7 rows: stage accelerations (KS + 0 = a at the step start, KS + 6 = a at the step end)
QS, VST = 16, 17  # state handed to Pinocchio for the next evaluation
TAU, LAM = 18, 19  # brake torques and holding torques of the latest evaluation
Q1, V1 = 20, 21  # 5th-order solution at the step end
QE, VE = 22, 23  # a state on the continuous extension (events)
TAU0, LAM0 = 24, 25  # brake and holding torques at the step start
TAU1, LAM1 = 26, 27  # brake and holding torques at the step end
ENGAGED, LOCKED, DIRECTION, CAP = 28, 29, 30, 31  # active set: 1.0 / 0.0 masks, slip directions, lock capacities
SCRATCH = 32  # accelerations not kept (release location)
BRAKES = 33  # BRAKE_ROWS rows: the brake table of compiled_dynamics
HC = BRAKES + BRAKE_ROWS  # h(q, v) of the current step-start state
MC = HC + 1  # nv rows: M(q) of the current step-start state
# after the nv rows of M: nv + 2 rows of scratch for the held-set solve (X has MC + 2 nv + 2 rows)
X_ROWS_BASE = MC + 2

# --- entries of Z
T0, H, T1, W0, W1, WE, J, HNEXT, RTOL, ATOL, NSAMP, ERR, MAXSTEP, KAPPA, ATOLV, KPOST = range(16)
P = 16  # 7 entries: stage brake powers tau_s . v_s
HPROP = P + 7  # the step-size proposal before this step's limits (time events, aims, the Stribeck region)
Z_SIZE = P + 8

# step outcomes (bit flags)
ACCEPTED, REJECTED, CROSSING, RELEASE = 0, 1, 2, 4

# Dormand-Prince 5(4): nodes, stage coefficients, 5th-order weights (row 6 of A = b: first same as last)
DP_C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0])
DP_A = np.array([
    [0, 0, 0, 0, 0, 0, 0],
    [1 / 5, 0, 0, 0, 0, 0, 0],
    [3 / 40, 9 / 40, 0, 0, 0, 0, 0],
    [44 / 45, -56 / 15, 32 / 9, 0, 0, 0, 0],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0, 0],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0, 0],
    [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0],
])
# b - b* over the seven stages (b*: the embedded 4th-order weights)
DP_E = np.array([35 / 384 - 5179 / 57600, 0.0, 500 / 1113 - 7571 / 16695, 125 / 192 - 393 / 640,
                 -2187 / 6784 + 92097 / 339200, 11 / 84 - 187 / 2100, -1 / 40])
AIM = 1.1  # steps end this factor past the earliest crossing predicted at constant deceleration
# Stribeck region |v| < 3 v_s: steps are proposed to change a joint's velocity by STRIBECK_STEP v_s there, and a
# step whose stages span more than STRIBECK_LIMIT v_s of it is rejected (its stages could straddle the steep rise
# of the friction, where the error estimate no longer sees it); measured on the bench states (UR5 defaults):
# 1 and 2 keep the crossing times within 2e-8 s of a 1e-13 tolerance run, 2 and 2 let them drift by 4e-7 s
STRIBECK_STEP, STRIBECK_LIMIT = 1.0, 2.0
SAFETY, GROW, SHRINK = 0.9, 5.0, 0.2
GRID = np.linspace(0.0, 1.0, 17)[1:]


def new_tables(nv: int, sample_capacity: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Zeroed (X, Z, R) for a robot with nv velocities; R holds ``sample_capacity`` samples."""
    return np.zeros((X_ROWS_BASE + 2 * nv, nv)), np.zeros(Z_SIZE), np.zeros((sample_capacity, 3 + 5 * nv))


@jit
def evaluate(X, M, h, t, a_row, tau_row, lam_row):
    """Right-hand side at the state handed to Pinocchio (rows QS, VST) with the current active set at time t [s]:
    accelerations into row ``a_row``, brake and holding torques into ``tau_row`` / ``lam_row``."""
    return braked_dynamics(X, M, h, t, BRAKES, VST, ENGAGED, LOCKED, DIRECTION, a_row, lam_row, tau_row,
                           MC + X.shape[1])


@jit
def begin_step(X, Z, limit, t_limit):
    """Choose the step h = min(proposal, ``limit``, aimed crossing) [s] and set up its second stage; the step ends at
    ``t_limit`` exactly when the limit is taken (time events). Returns h."""
    n = X.shape[1]
    Z[HPROP] = Z[HNEXT]
    h = min(Z[HNEXT], limit)
    kappa = Z[KAPPA]
    for i in range(n):
        if X[ENGAGED, i] > 0.5 and X[LOCKED, i] < 0.5 and X[DIRECTION, i] != 0.0:
            v, a = X[V0, i], X[KS, i]
            decelerating = v * a < 0.0
            if decelerating:  # aim just past the earliest predicted crossing of a decelerating sliding joint
                t_pred = AIM * (-v / a)
                if t_pred < h:
                    h = t_pred
            inv_vs = X[BRAKES + INVERSE_STRIBECK_SPEED, i]
            if inv_vs > 0.0 and kappa > 0.0:
                # the Stribeck region |v| < 3 v_s: reach its edge, then cross it in steps that change the
                # velocity by kappa v_s each; while the brake torque still rises, the rate is bounded by |a| plus
                # the rest of the full torque over the joint's diagonal inertia (the quadratic bound of a linear
                # rise, |a| h + c h^2, took fewer steps but let the crossing times of the bench's UR5 states drift
                # by 1.5e-7 s)
                rate = abs(a)
                c = 0.0
                r0 = rise_fraction(X[BRAKES + RISE, i], X[BRAKES + ENGAGE, i], Z[T0])
                if r0 < 1.0:
                    full = X[BRAKES + SLIDING, i] + X[BRAKES + STRIBECK_AMPLITUDE, i] + X[BRAKES + VISCOUS, i] * abs(v)
                    rate += (1.0 - r0) * full / (X[MC + i, i] + X[BRAKES + ARMATURE, i])
                    decelerating = True
                if decelerating and (rate > 0.0 or c > 0.0):
                    vs = 1.0 / inv_vs
                    outside = _time_for(max(abs(v) - 3.0 * vs, 0.0), rate, c)
                    small = _time_for(kappa * vs, rate, c)
                    cap = outside if outside > small else small
                    if cap < h:
                        h = cap
    Z[H] = h
    Z[T1] = t_limit if h == limit else Z[T0] + h
    _stage_state(X, Z, 1)
    return h


@jit
def _time_for(dv, rate, c):
    """The time [s] in which a velocity changing by rate t + c t^2 changes by dv."""
    if c <= 0.0:
        return dv / rate
    return 2.0 * dv / (rate + math.sqrt(rate * rate + 4.0 * c * dv))


@jit
def _stage_state(X, Z, s):
    """The state of stage s (rows QS, VST) from the stages before it."""
    n = X.shape[1]
    h = Z[H]
    for i in range(n):
        dq = 0.0
        dv = 0.0
        for j in range(s):
            c = DP_A[s, j]
            if c != 0.0:
                dq += c * X[VS + j, i]
                dv += c * X[KS + j, i]
        X[QS, i] = X[Q0, i] + h * dq
        X[VST, i] = X[V0, i] + h * dv


@jit
def stage(X, Z, M, h, s):
    """Evaluate stage s (1..6) at the state in rows QS, VST with Pinocchio's M and h there, and set up stage s + 1;
    stage 6 is the step end (its M and h are kept for the events at that state). Returns False if the free block
    of M is not positive definite."""
    n = X.shape[1]
    t_s = Z[T1] if s == 6 else Z[T0] + DP_C[s] * Z[H]
    ok = evaluate(X, M, h, t_s, KS + s, TAU, LAM)
    power = 0.0
    for i in range(n):
        X[VS + s, i] = X[VST, i]
        power += X[TAU, i] * X[VST, i]
    Z[P + s] = power
    if s < 6:
        _stage_state(X, Z, s + 1)
        if s == 5:  # the next stage's state is the 5th-order solution
            for i in range(n):
                X[Q1, i] = X[QS, i]
                X[V1, i] = X[VST, i]
    else:
        for i in range(n):
            X[TAU1, i] = X[TAU, i]
            X[LAM1, i] = X[LAM, i]
        _keep_mh(X, M, h)
    return ok


@jit
def _keep_mh(X, M, h):
    n = X.shape[1]
    for i in range(n):
        X[HC, i] = h[i]
        for j in range(n):
            X[MC + i, j] = M[i, j]


@jit
def end_step(X, Z, R):
    """Error test and event detection of the step just computed. A rejected step proposes a shorter one; an
    accepted step without events is committed (the end becomes the new start, a sample is written to R at row
    Z[NSAMP]). Returns REJECTED, ACCEPTED, or CROSSING | RELEASE flags (state not committed)."""
    n = X.shape[1]
    h = Z[H]
    rtol, atol, atolv = Z[RTOL], Z[ATOL], Z[ATOLV]
    err = 0.0
    for i in range(n):
        eq = 0.0
        ev = 0.0
        for s in range(7):
            eq += DP_E[s] * X[VS + s, i]
            ev += DP_E[s] * X[KS + s, i]
        sq = atol + rtol * max(abs(X[Q0, i]), abs(X[Q1, i]))
        sv = atolv + rtol * max(abs(X[V0, i]), abs(X[V1, i]))
        err = max(err, abs(h * eq) / sq, abs(h * ev) / sv)
    Z[ERR] = err
    kpost = Z[KPOST]
    if kpost > 0.0:
        for i in range(n):  # a step may not cross more than kpost v_s of a Stribeck region (its stages could
            inv_vs = X[BRAKES + INVERSE_STRIBECK_SPEED, i]  # straddle the steep friction rise)
            s_i = X[DIRECTION, i]
            if inv_vs > 0.0 and s_i != 0.0 and X[ENGAGED, i] > 0.5 and X[LOCKED, i] < 0.5:
                lo, hi = np.inf, -np.inf
                for s in range(7):
                    u = X[VS + s, i] * s_i * inv_vs  # speed in units of v_s on the sliding side
                    lo = min(lo, u)
                    hi = max(hi, u)
                overlap = min(hi, 3.0) - max(lo, 0.0)
                if overlap > kpost:
                    err = max(err, (overlap / kpost) ** 5 * 1.0000001)
    if not err <= 1.0:  # also NaN
        Z[HNEXT] = h * max(SHRINK, SAFETY * err ** -0.25) if err == err else 0.25 * h
        return REJECTED
    grown = h * GROW if err == 0.0 else h * min(GROW, max(SHRINK, SAFETY * err ** -0.2))
    if h < Z[HPROP] and grown < Z[HPROP]:
        grown = Z[HPROP]
    Z[HNEXT] = min(grown, Z[MAXSTEP])
    W1_ = Z[W0]
    for s in range(7):
        W1_ += h * DP_A[6, s] * Z[P + s]
    Z[W1] = W1_
    flags = ACCEPTED
    B = X[BRAKES:BRAKES + BRAKE_ROWS]  # one view for the loop (each view handed to a kernel has a cost)
    for i in range(n):
        if X[ENGAGED, i] > 0.5 and X[LOCKED, i] < 0.5 and watched_for_rest(X, i) and X[DIRECTION, i] != 0.0:
            if X[V1, i] * X[DIRECTION, i] <= 0.0:
                flags |= CROSSING
        elif X[LOCKED, i] > 0.5 and releasable(B, X[CAP, i], X[ENGAGED, i], i):
            if abs(X[LAM1, i]) > capacity(B, X[CAP, i], X[ENGAGED, i], i, Z[T1]):
                flags |= RELEASE
    if flags == ACCEPTED:
        commit_end(X, Z, R)
    return flags


@jit
def watched_for_rest(X, i):
    """Whether the zero crossings of sliding joint i's velocity are events: its brake exerts a torque while it slides
    (sliding, Stribeck or viscous part) or can hold it at rest (holding torque > 0; a brake without sliding torque
    still catches its joint where it comes to rest)."""
    return X[BRAKES + SLIDING, i] > 0.0 or X[BRAKES + VISCOUS, i] > 0.0 or X[BRAKES + STRIBECK_AMPLITUDE, i] > 0.0 \
        or X[BRAKES + HOLD, i] > 0.0


@jit
def commit_end(X, Z, R):
    """The step end becomes the start of the next step (first same as last) and is recorded."""
    n = X.shape[1]
    for i in range(n):
        X[Q0, i] = X[Q1, i]
        X[V0, i] = X[V1, i]
        X[VS, i] = X[VS + 6, i]
        X[KS, i] = X[KS + 6, i]
        X[TAU0, i] = X[TAU1, i]
        X[LAM0, i] = X[LAM1, i]
    Z[P] = Z[P + 6]
    Z[W0] = Z[W1]
    Z[T0] = Z[T1]
    record(X, Z, R)


@jit
def record(X, Z, R):
    """Write the step-start state (t, W, J, q, v, a, tau with the holding torques on held rows, locked) as the
    next sample row of R."""
    n = X.shape[1]
    k = int(Z[NSAMP])
    R[k, 0] = Z[T0]
    R[k, 1] = Z[W0]
    R[k, 2] = Z[J]
    for i in range(n):
        R[k, 3 + i] = X[Q0, i]
        R[k, 3 + n + i] = X[V0, i]
        R[k, 3 + 2 * n + i] = X[KS, i]
        R[k, 3 + 3 * n + i] = X[LAM0, i] if X[LOCKED, i] > 0.5 else X[TAU0, i]
        R[k, 3 + 4 * n + i] = X[LOCKED, i]
    Z[NSAMP] = k + 1


@jit
def set_state(X, Z, t, W, M, h):
    """Make (rows QS, VST; time t, work W) the step-start state with Pinocchio's M and h there, its dynamics under
    the current active set in the step-start rows (KS, TAU0, LAM0, P[0])."""
    n = X.shape[1]
    for i in range(n):
        X[Q0, i] = X[QS, i]
        X[V0, i] = X[VST, i]
    Z[T0] = t
    Z[W0] = W
    _keep_mh(X, M, h)
    return refresh(X, Z)


@jit
def refresh(X, Z):
    """Recompute the step-start dynamics (KS, TAU0, LAM0, P[0], VS) after the active set changed, from the M and h
    kept for that state."""
    n = X.shape[1]
    for i in range(n):
        X[VST, i] = X[V0, i]
    ok = evaluate(X, X[MC:MC + n], X[HC], Z[T0], KS, TAU0, LAM0)
    _start_power(X, Z)
    return ok


@jit
def _start_power(X, Z):
    """The first stage of the next step: velocity v0 and brake power tau_b . v0."""
    power = 0.0
    for i in range(X.shape[1]):
        X[VS, i] = X[V0, i]
        power += X[TAU0, i] * X[V0, i]
    Z[P] = power


@jit
def decide_at_start(X, Z, force, outcome):
    """The stick/slip decision (:func:`.compiled_decision.decide`) at the step-start state with the M and h kept
    there; the committed active set's dynamics become the step-start dynamics. Returns the number of candidates,
    or -1 when no split is consistent."""
    n = X.shape[1]
    count = decide(X[MC:MC + n], X[HC], X[V0], Z[T0], X[BRAKES:BRAKES + BRAKE_ROWS], X[ENGAGED], X[LOCKED],
                   X[DIRECTION], X[CAP], force, outcome, X[KS], X[LAM0], X[TAU0])
    if count == 0:
        if not refresh(X, Z):
            return -1
        return 0
    if count > 0:
        _start_power(X, Z)
    return count


@jit
def restart_step(X, Z, h):
    """Recompute the last step with the length h [s] from its start (stages 2.. follow): for an event state with
    the step's own 5th-order accuracy instead of the extension's."""
    Z[H] = h
    Z[T1] = Z[T0] + h
    _stage_state(X, Z, 1)
