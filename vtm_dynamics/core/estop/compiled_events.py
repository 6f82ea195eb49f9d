"""Events inside a step of the compiled braking engine (:mod:`.compiled_engine`), located on the step's continuous
extension: Shampine's quartic for Dormand-Prince 5(4) (L. F. Shampine, "Some practical Runge-Kutta formulas",
Math. Comp. 46 (1986)), y(t0 + theta h) = y0 + h sum_s k_s (D[s] . (theta, theta^2, theta^3, theta^4)) over the
seven stages of :mod:`.compiled_steps` (fourth order in theta; theta = 1 gives the step's 5th-order solution).

* Zero crossings of sliding joints' velocities (Müller 2026, Sec. 1: a joint comes to rest and its brake may
  hold it): the first root of the velocity polynomial by bracketing on a 16-point grid and safeguarded Newton; the
  step is then recomputed to that time (the event state with the step's own accuracy) and the time polished by
  one Newton correction -v_i / a_i applied by a second-order Taylor step.
* A held joint's needed torque lambda_i (eq. (3)) reaching its capacity: its margin |lambda_i| - capacity_i at
  states of the extension, for the caller's regula falsi.

Units: SI (rad, rad/s, rad/s^2, N m, J, s).
"""

from __future__ import annotations

import numpy as np

from vtm_dynamics.core.estop.compiled_dynamics import BRAKE_ROWS, capacity, jit, releasable
from vtm_dynamics.core.estop.compiled_steps import (
    BRAKES, CAP, DIRECTION, DP_A, ENGAGED, H, KS, LAM, LAM0, LOCKED, P, Q0, Q1, QE, QS, SCRATCH, T0, T1, TAU,
    TAU1, V0, V1, VE, VS, VST, W0, WE, watched_for_rest, evaluate,
)

# Shampine's continuous extension: y(t0 + theta h) = y0 + h sum_s k_s (D[s] . (theta, theta^2, theta^3, theta^4))
DP_D = np.array([
    [1, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
    [0, 0, 0, 0],
    [0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799],
    [0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
    [0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632],
    [0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
    [0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423],
])
GRID = np.linspace(0.0, 1.0, 17)[1:]


@jit
def dense_state(X, Z, theta):
    """(q, v, W) at t0 + theta h on the continuous extension of the last step into rows QE, VE and Z[WE]."""
    n = X.shape[1]
    h = Z[H]
    w = np.empty(7)
    th2 = theta * theta
    for s in range(7):
        w[s] = h * (DP_D[s, 0] * theta + DP_D[s, 1] * th2 + DP_D[s, 2] * th2 * theta + DP_D[s, 3] * th2 * th2)
    W = Z[W0]
    for s in range(7):
        W += w[s] * Z[P + s]
    Z[WE] = W
    for i in range(n):
        q = X[Q0, i]
        v = X[V0, i]
        for s in range(7):
            q += w[s] * X[VS + s, i]
            v += w[s] * X[KS + s, i]
        X[QE, i] = q
        X[VE, i] = v


@jit
def dense_to_evaluate(X, Z, theta):
    """:func:`dense_state` at theta, also handed to Pinocchio (rows QS, VST)."""
    dense_state(X, Z, theta)
    extension_to_evaluate(X)


@jit
def extension_to_evaluate(X):
    """Hand the extension state (rows QE, VE) to Pinocchio (rows QS, VST)."""
    n = X.shape[1]
    for i in range(n):
        X[QS, i] = X[QE, i]
        X[VST, i] = X[VE, i]


@jit
def first_root(c0, c, s):
    """First theta in (0, 1] where c0 + sum_k c[k] theta^(k+1) reaches zero from the side of sign s: bracket on a
    16-point grid, then safeguarded Newton to 1e-13 (no sign change on the grid: the last cell)."""
    m = GRID.shape[0]
    vals = np.empty(m)
    for g in range(m):
        x = GRID[g]
        vals[g] = c0 + x * (c[0] + x * (c[1] + x * (c[2] + x * c[3])))
    k = m - 1
    for g in range(m):
        if vals[g] * s <= 0.0:
            k = g
            break
    hi = GRID[k]
    if k > 0:
        lo, f_lo = GRID[k - 1], vals[k - 1]
    else:
        lo, f_lo = 0.0, c0
    f_hi = vals[k]
    x = lo + (hi - lo) * f_lo / (f_lo - f_hi) if f_lo != f_hi else hi
    if not (lo < x <= hi):
        x = hi
    for _ in range(30):
        fx = c0 + x * (c[0] + x * (c[1] + x * (c[2] + x * c[3])))
        dfx = c[0] + x * (2.0 * c[1] + x * (3.0 * c[2] + x * 4.0 * c[3]))
        if fx * s > 0.0:
            lo = x
        else:
            hi = x
        xn = x - fx / dfx if dfx != 0.0 else 0.5 * (lo + hi)
        if not (lo < xn <= hi):
            xn = 0.5 * (lo + hi)
        if abs(xn - x) < 1e-13 or hi - lo < 1e-13:
            x = xn
            break
        x = xn
    return max(x, 1e-12)


@jit
def locate_crossing(X, Z, simultaneity, zero):
    """Earliest zero crossing of a sliding joint's velocity inside the last step, on its continuous extension:
    returns theta (fraction of the step); marks in ``zero`` the joints crossing within ``simultaneity`` [s] of it
    and leaves the state there, with their velocities set to zero exactly, in QE, VE and Z[WE]."""
    n = X.shape[1]
    h = Z[H]
    theta = np.full(n, np.inf)
    c = np.empty(4)
    best = np.inf
    for i in range(n):
        zero[i] = False
        if X[ENGAGED, i] > 0.5 and X[LOCKED, i] < 0.5 and watched_for_rest(X, i) and X[DIRECTION, i] != 0.0 \
                and X[V1, i] * X[DIRECTION, i] <= 0.0:
            for k in range(4):
                acc = 0.0
                for s in range(7):
                    acc += X[KS + s, i] * DP_D[s, k]
                c[k] = h * acc
            theta[i] = first_root(X[V0, i], c, X[DIRECTION, i])
            best = min(best, theta[i])
    for i in range(n):
        if theta[i] * h <= best * h + simultaneity:
            zero[i] = True
    dense_state(X, Z, best)
    for i in range(n):
        if zero[i]:
            X[VE, i] = 0.0
    return best


@jit
def release_margin(X, Z, M, h, t):
    """max over held joints with finite capacity of |lambda_i| - capacity_i at the state in QS, VST (Pinocchio's
    M and h there) and time t [s]; -inf if there is none."""
    evaluate(X, M, h, t, SCRATCH, TAU, LAM)
    return _margin(X, LAM, t)


@jit
def start_margin(X, Z):
    """:func:`release_margin` at the step start (from the holding torques kept there)."""
    return _margin(X, LAM0, Z[T0])


@jit
def _margin(X, row, t):
    n = X.shape[1]
    g = -np.inf
    B = X[BRAKES:BRAKES + BRAKE_ROWS]
    for i in range(n):
        if X[LOCKED, i] > 0.5 and releasable(B, X[CAP, i], X[ENGAGED, i], i):
            g = max(g, abs(X[row, i]) - capacity(B, X[CAP, i], X[ENGAGED, i], i, t))
    return g


@jit
def release_force(X, t, force):
    """Held joints whose needed torque (row LAM0) is at their capacity at time t [s] to rounding (1e-9)."""
    n = X.shape[1]
    B = X[BRAKES:BRAKES + BRAKE_ROWS]
    for i in range(n):
        force[i] = False
        if X[LOCKED, i] > 0.5 and releasable(B, X[CAP, i], X[ENGAGED, i], i):
            cap = capacity(B, X[CAP, i], X[ENGAGED, i], i, t)
            force[i] = abs(X[LAM0, i]) >= cap * (1.0 - 1e-9)


@jit
def polish_crossing(X, Z, zero):
    """After :func:`restart_step` to a located crossing: one Newton correction dt = -v_i / a_i of the crossing time
    on the earliest crossing joint i (marked in ``zero``), applied to the step end by a second-order Taylor step;
    the result (velocities of the ``zero`` joints exactly 0) goes to QE, VE, Z[WE]. Returns dt [s]."""
    n = X.shape[1]
    h = Z[H]
    W = Z[W0]
    for s in range(7):
        W += h * DP_A[6, s] * Z[P + s]
    dt = 0.0
    best = -1.0
    for i in range(n):
        if zero[i] and X[KS + 6, i] != 0.0:
            c = -X[V1, i] / X[KS + 6, i]
            if best < 0.0 or abs(c) > best:
                best = abs(c)
                dt = c
    if abs(dt) > 0.5 * h:
        dt = 0.0
    power = 0.0
    for i in range(n):
        a = X[KS + 6, i]
        v = X[V1, i]
        X[QE, i] = X[Q1, i] + dt * v + 0.5 * dt * dt * a
        X[VE, i] = 0.0 if zero[i] else v + dt * a
        power += X[TAU1, i] * v
    Z[WE] = W + dt * power
    Z[T1] = Z[T1] + dt
    return dt

