"""Compiled checks of a prediction's start state and of its result, run once per prediction: numpy's general
routines cost more on six joints than the checks themselves (a batch predicts thousands of stops).

* :func:`positive_definite`: whether M(q) + diag(armature) [kg m^2, kg] is positive definite (Müller 2026, eq. (3)
  needs it to have accelerations and the jumps of eq. (22)): every pivot of its Cholesky factorisation positive.
* :func:`inside_limits`: whether every configuration of a series stays within the position limits widened by a
  tolerance (the screen before :func:`.limit_crossings.limit_crossings` names the joints that do not).
"""

from __future__ import annotations

import math

import numpy as np

from vtm_dynamics.core.estop.compiled_dynamics import jit


@jit
def positive_definite(M, armature):
    """Whether M + diag(armature) is positive definite (every pivot of its Cholesky factorisation positive), from
    the upper triangle of M (CRBA fills only that)."""
    n = M.shape[0]
    U = np.zeros((n, n))
    for j in range(n):
        d = M[j, j] + armature[j]
        for k in range(j):
            d -= U[k, j] * U[k, j]
        if not d > 0.0:
            return False
        d = math.sqrt(d)
        U[j, j] = d
        for i in range(j + 1, n):
            x = M[j, i]
            for k in range(j):
                x -= U[k, j] * U[k, i]
            U[j, i] = x / d
    return True


@jit
def inside_limits(Q, lower, upper, tolerance):
    """Whether no entry of the configurations Q (K x nq) [rad, m] is above ``upper`` + tolerance or below ``lower``
    - tolerance (infinite or nan limits and nan entries compare False, as in limit_crossings)."""
    for k in range(Q.shape[0]):
        for i in range(Q.shape[1]):
            x = Q[k, i]
            if x > upper[i] + tolerance or x < lower[i] - tolerance:
                return False
    return True
