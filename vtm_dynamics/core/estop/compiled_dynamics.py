"""Compiled right-hand side of the braking dynamics from Pinocchio's M(q) and h(q, v): the brake law and eq. (3)
with joint-lock rows (Müller 2026, eq. (3) with the unit rows of eq. (39)), solved on the free rows.

Pinocchio computes the joint-space inertia M(q) (CRBA) and the bias forces h(q, v) (``nonLinearEffects``); these
kernels (Numba, compiled once and cached on disk) do everything else an evaluation needs, so one evaluation costs
two Pinocchio calls and one compiled call instead of dozens of numpy operations:

* the brake torque of each engaged free joint (the law of :mod:`vtm_dynamics.core.estop.brakes`)

      tau_i = -r_i(t) [s_i (sliding_i + (breakaway_i - sliding_i) exp(-(v_i / v_s,i)^2)) + viscous_i v_i],
      r_i(t) = clip((t - engage_i) / rise_i, 0, 1)  (1 without a rise time),

  with the slip direction s_i frozen between events;
* with the held set L and the free set F (a_L = 0): (M_FF + A_F) a_F = (tau - h)_F by a Cholesky factorisation
  (A: the brakes' reflected rotor inertias, added to the diagonal of M), and the torque each held brake must
  supply lambda_L = (M + A)_LF a_F - (tau - h)_L (eq. (3): M a + h = tau + E_L lambda).

The brake table ``B`` (rows below, one column per velocity index) is fixed for a prediction; the active set is
described by ``engaged`` / ``locked`` masks (1.0 / 0.0), the slip directions ``s`` and the lock capacities ``cap``
(0 where none). The right-hand side reads and writes rows of one table (the engine's state table, or the
decision's own) named by their indices: handing row views to a compiled function cost more than the
evaluation itself (0.55 against 0.26 us per UR5 evaluation).
Units: SI (rad/s, rad/s^2, N m, N m s/rad, kg m^2, s).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

# rows of the brake table B (nv columns; joint-side values of :class:`vtm_dynamics.core.estop.brakes.BrakeSet`)
SLIDING, VISCOUS, STRIBECK_AMPLITUDE, INVERSE_STRIBECK_SPEED, RISE, ENGAGE, HOLD, ARMATURE = range(8)
BRAKE_ROWS = 8

jit = nb.njit(cache=True, nogil=True, error_model="numpy")


def brake_table(brakes, engage_times: np.ndarray) -> np.ndarray:
    """The (8, nv) table ``B`` of a :class:`~vtm_dynamics.core.estop.brakes.BrakeSet` with the brakes' engage times
    [s] (inf: never): sliding [N m], viscous [N m s/rad], Stribeck amplitude breakaway - sliding [N m] (0 where the
    term is off), 1 / v_s [s/rad] (0: off), rise time [s] (0: a step), engage time [s], holding torque [N m],
    armature [kg m^2]."""
    stribeck = brakes.stribeck
    B = np.zeros((BRAKE_ROWS, len(brakes.sliding_torque)))
    B[SLIDING] = brakes.sliding_torque
    B[VISCOUS] = brakes.viscous
    B[STRIBECK_AMPLITUDE] = np.where(stribeck, brakes.breakaway_torque - brakes.sliding_torque, 0.0)
    B[INVERSE_STRIBECK_SPEED] = np.where(stribeck, 1.0 / np.where(stribeck, brakes.stribeck_velocity, 1.0), 0.0)
    B[RISE] = np.where(brakes.braked, brakes.rise_time, 0.0)
    B[ENGAGE] = engage_times
    B[HOLD] = brakes.holding_torque
    B[ARMATURE] = np.where(brakes.braked, brakes.armature, 0.0)
    return B


@jit
def rise_factor(B, i, t):
    """r_i(t) in [0, 1]: the fraction of brake i's torque and holding capacity available at time t [s]."""
    return rise_fraction(B[RISE, i], B[ENGAGE, i], t)


@jit
def rise_fraction(rise, engage, t):
    """r(t) of a brake with the rise time ``rise`` [s] (0: a step) engaging at ``engage`` [s]."""
    if rise <= 0.0:
        return 1.0
    r = (t - engage) / rise
    if r < 0.0:
        return 0.0
    if r > 1.0:
        return 1.0
    return r


@jit
def brake_torques(T, b, t, v_r, engaged_r, locked_r, s_r, tau_r):
    """Brake torques [N m] into row ``tau_r`` of the table T at the velocities in row ``v_r`` [rad/s] and time t [s]
    (module docstring), with the brake table in rows b .. b + BRAKE_ROWS - 1 and the active set in rows
    ``engaged_r``, ``locked_r`` and the slip directions ``s_r``; zero on held joints and joints whose brake has not
    engaged. (Rows of one table, not arrays: a slice handed to a compiled function costs more than the brake law.)"""
    for i in range(T.shape[1]):
        if T[engaged_r, i] > 0.5 and T[locked_r, i] < 0.5:
            v = T[v_r, i]
            mu = T[b + SLIDING, i]
            amp = T[b + STRIBECK_AMPLITUDE, i]
            if amp != 0.0:
                x = v * T[b + INVERSE_STRIBECK_SPEED, i]
                mu += amp * math.exp(-x * x)
            r = rise_fraction(T[b + RISE, i], T[b + ENGAGE, i], t)
            T[tau_r, i] = -(T[s_r, i] * mu + T[b + VISCOUS, i] * v) * r
        else:
            T[tau_r, i] = 0.0


@jit
def capacity(B, lock, engaged, i, t):
    """Holding capacity [N m] at time t [s] of joint i with the lock capacity ``lock`` (pawls, lock events; 0 where
    none) and its brake ``engaged`` (1.0 / 0.0): max(lock, r_i(t) holding_i if engaged else 0). A lock's capacity is
    not scaled; the brake's rises with its torque (zero before its rise begins, whatever its size)."""
    c = lock
    if engaged > 0.5:
        r = rise_factor(B, i, t)
        if r > 0.0:
            b = B[HOLD, i] * r
            if b > c:
                c = b
    return c


@jit
def releasable(B, lock, engaged, i):
    """Whether a held joint i can be released: its capacity (:func:`capacity`) is finite at the end of a rise."""
    return lock < math.inf and not (engaged > 0.5 and B[HOLD, i] == math.inf)


@jit
def held_set_solve(T, M, h, b, tau_r, locked_r, a_r, lam_r, work_r):
    """Accelerations into row ``a_r`` [rad/s^2] (zero on held joints) and holding torques into row ``lam_r`` [N m]
    (zero on free joints) of eq. (3) with the held set in row ``locked_r`` and the brake torques in row ``tau_r``
    of the table T (brake table at rows b ..): Cholesky of (M + A)_FF from the upper triangle of M. Rows
    ``work_r`` .. ``work_r + nv + 1`` of T are scratch (the factor, the right-hand side, the free indices).
    Returns False if (M + A)_FF is not positive definite."""
    n = h.shape[0]
    rhs = work_r + n
    free = work_r + n + 1
    nf = 0
    for i in range(n):
        if T[locked_r, i] < 0.5:
            T[free, nf] = i
            nf += 1
    for x in range(nf):  # the free block (upper triangle) and its right-hand side
        i = int(T[free, x])
        for y in range(x, nf):
            j = int(T[free, y])
            T[work_r + x, y] = M[i, j] if i <= j else M[j, i]
        T[work_r + x, x] += T[b + ARMATURE, i]
        T[rhs, x] = T[tau_r, i] - h[i]
    for j in range(nf):  # U^T U = block, U in the upper triangle of the work rows
        d = T[work_r + j, j]
        for k in range(j):
            d -= T[work_r + k, j] * T[work_r + k, j]
        if not d > 0.0:
            return False
        d = math.sqrt(d)
        T[work_r + j, j] = d
        inv = 1.0 / d
        for i in range(j + 1, nf):
            x = T[work_r + j, i]
            for k in range(j):
                x -= T[work_r + k, j] * T[work_r + k, i]
            T[work_r + j, i] = x * inv
    for i in range(nf):  # U^T y = r
        x = T[rhs, i]
        for k in range(i):
            x -= T[work_r + k, i] * T[rhs, k]
        T[rhs, i] = x / T[work_r + i, i]
    for i in range(nf - 1, -1, -1):  # U x = y
        x = T[rhs, i]
        for k in range(i + 1, nf):
            x -= T[work_r + i, k] * T[rhs, k]
        T[rhs, i] = x / T[work_r + i, i]
    for i in range(n):
        T[a_r, i] = 0.0
        T[lam_r, i] = 0.0
    for x in range(nf):
        T[a_r, int(T[free, x])] = T[rhs, x]
    if nf < n:
        for i in range(n):
            if T[locked_r, i] > 0.5:
                r = h[i] - T[tau_r, i]
                for x in range(nf):
                    j = int(T[free, x])
                    r += (M[i, j] if i <= j else M[j, i]) * T[a_r, j]
                T[lam_r, i] = r
    return True


@jit
def braked_dynamics(T, M, h, t, b, v_r, engaged_r, locked_r, s_r, a_r, lam_r, tau_r, work_r):
    """One evaluation of the right-hand side on rows of the table T (the rows of :func:`brake_torques` and
    :func:`held_set_solve`): brake torques at (v, t), then the held-set solve."""
    brake_torques(T, b, t, v_r, engaged_r, locked_r, s_r, tau_r)
    return held_set_solve(T, M, h, b, tau_r, locked_r, a_r, lam_r, work_r)

