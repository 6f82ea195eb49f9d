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
(0 where none).
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
    rise = B[RISE, i]
    if rise <= 0.0:
        return 1.0
    r = (t - B[ENGAGE, i]) / rise
    if r < 0.0:
        return 0.0
    if r > 1.0:
        return 1.0
    return r


@jit
def brake_torques(B, engaged, locked, s, v, t, tau):
    """Brake torques [N m] into ``tau`` at velocities v [rad/s] and time t [s] (module docstring); zero on held
    joints and joints whose brake has not engaged."""
    for i in range(v.shape[0]):
        if engaged[i] > 0.5 and locked[i] < 0.5:
            mu = B[SLIDING, i]
            amp = B[STRIBECK_AMPLITUDE, i]
            if amp != 0.0:
                x = v[i] * B[INVERSE_STRIBECK_SPEED, i]
                mu += amp * math.exp(-x * x)
            tau[i] = -(s[i] * mu + B[VISCOUS, i] * v[i]) * rise_factor(B, i, t)
        else:
            tau[i] = 0.0


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
def held_set_solve(M, h, tau, locked, B, a, lam, work):
    """Accelerations ``a`` [rad/s^2] (zero on held rows) and holding torques ``lam`` [N m] (zero on free rows) of
    eq. (3) with the held set ``locked``: Cholesky of (M + A)_FF from the upper triangle of M. ``work``: an
    (nv + 2, nv) scratch array (the factor, the right-hand side, the free indices). Returns False if (M + A)_FF is
    not positive definite."""
    n = h.shape[0]
    rhs = work[n]
    free = work[n + 1]
    nf = 0
    for i in range(n):
        if locked[i] < 0.5:
            free[nf] = i
            nf += 1
    for x in range(nf):  # the free block (upper triangle) and its right-hand side
        i = int(free[x])
        for y in range(x, nf):
            j = int(free[y])
            work[x, y] = M[i, j] if i <= j else M[j, i]
        work[x, x] += B[ARMATURE, i]
        rhs[x] = tau[i] - h[i]
    for j in range(nf):  # U^T U = block, U in the upper triangle of work
        d = work[j, j]
        for k in range(j):
            d -= work[k, j] * work[k, j]
        if not d > 0.0:
            return False
        d = math.sqrt(d)
        work[j, j] = d
        inv = 1.0 / d
        for i in range(j + 1, nf):
            x = work[j, i]
            for k in range(j):
                x -= work[k, j] * work[k, i]
            work[j, i] = x * inv
    for i in range(nf):  # U^T y = r
        x = rhs[i]
        for k in range(i):
            x -= work[k, i] * rhs[k]
        rhs[i] = x / work[i, i]
    for i in range(nf - 1, -1, -1):  # U x = y
        x = rhs[i]
        for k in range(i + 1, nf):
            x -= work[i, k] * rhs[k]
        rhs[i] = x / work[i, i]
    for i in range(n):
        a[i] = 0.0
        lam[i] = 0.0
    for x in range(nf):
        a[int(free[x])] = rhs[x]
    if nf < n:
        for i in range(n):
            if locked[i] > 0.5:
                r = h[i] - tau[i]
                for x in range(nf):
                    j = int(free[x])
                    r += (M[i, j] if i <= j else M[j, i]) * a[j]
                lam[i] = r
    return True


@jit
def braked_dynamics(M, h, v, t, B, engaged, locked, s, a, lam, tau, work):
    """One evaluation of the right-hand side: brake torques at (v, t), then :func:`held_set_solve`."""
    brake_torques(B, engaged, locked, s, v, t, tau)
    return held_set_solve(M, h, tau, locked, B, a, lam, work)


def scratch(nv: int) -> np.ndarray:
    """A ``work`` array for :func:`held_set_solve`."""
    return np.zeros((nv + 2, nv))
