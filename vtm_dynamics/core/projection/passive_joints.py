"""Passive joints of the projected inverse-dynamics law (Aghili, Sec. 7.4, eqs. (55)-(64)): the controllability
condition (64) with its margin, and the inversion of eq. (57) bounded at that margin.

A joint without actuator must receive zero torque: f = f_par + (I - P) eta with (I - B) f = 0 (eq. (57)). Where a
motion of the passive joints alone is admissible (condition (64) fails, or nearly fails) the exact pseudo-inverse
of eq. (59) answers with torques that grow like 1/margin. Here it is truncated at a tolerance on the margin: the
torque stays bounded and what cannot be met is reported instead of being hidden in a huge command.

Units: SI (N m, N); the margin is dimensionless.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vtm_dynamics.core.projection.projector import NullSpaceProjector, ProjectionInputError

#: Default controllability tolerance: a passive configuration whose margin (eq. (64)) is at or below 1e-2 is
#: treated as not controllable, and the passive-joint inversion amplifies the passive demand at most 100-fold.
#: Dimensionless (the sine of the angle between N(A) and the passive-only directions; 1e-2 is about 0.6 deg).
DEFAULT_CONTROLLABILITY_TOLERANCE = 1e-2


@dataclass(frozen=True)
class ControllabilityReport:
    """Passive-joint controllability (Aghili, Sec. 7.4.2, eq. (64)) and what the bounded inversion could not meet.

    Attributes:
        controllable: True iff ``margin > tolerance``: no admissible motion moves passive joints only (to within
            the tolerance), so eq. (57) is solved with a passive torque demand met exactly.
        margin: smallest singular value of the active rows of an orthonormal basis of N(A) (1 = well
            controllable, 0 = a passive-only motion exists); +inf when N(A) = {0}. Dimensionless (the sine of
            the angle between N(A) and the passive-only directions).
        passive_residual: ||(I - B) f|| of the torque before the passive entries were set to zero [N m, N]:
            the generalized force the motion law needs at the passive joints and did not get. Rounding level
            when controllable; the unmet demand otherwise.
        passive_indices: velocity indices of the passive joints.
        tolerance: the margin below which a direction of eq. (57) is not inverted (see
            :func:`projected_inverse_dynamics`); the added torque is then bounded by
            ||f_perp|| <= ||(I - B) f_par|| / tolerance.
        unmet_force: (I - B) f before zeroing, per velocity index (non-zero only at passive joints) [N m, N].
        acceleration_error: ||q''(tau) - u_p||, how far the plant's acceleration under the commanded torque is
            from the designed one [rad/s^2, m/s^2] (0 when the demand is met).
    """

    controllable: bool
    margin: float
    passive_residual: float
    passive_indices: tuple[int, ...]
    tolerance: float = 0.0
    unmet_force: np.ndarray | None = None
    acceleration_error: float = 0.0


def passive_mask(passive: Sequence[int], n: int) -> np.ndarray:
    """Boolean mask of the passive velocity indices ``passive`` among n (ProjectionInputError for a bad index)."""
    mask = np.zeros(n, dtype=bool)
    for i in passive:
        if not (isinstance(i, (int, np.integer)) and 0 <= int(i) < n):
            raise ProjectionInputError(f"passive: index {i!r} is not a velocity index in [0, {n})")
        mask[int(i)] = True
    return mask


def bounded_passive_inversion(Q: np.ndarray, demand: np.ndarray, tol: float) -> np.ndarray:
    """eta = -Q^+ demand of eq. (59) with the pseudo-inverse truncated at the singular value ``tol``.

    Q = (I - B)(I - P) has the passive rows of an orthonormal basis V1 of N(A)^perp as its non-zero block, and
    by the CS decomposition of [V1 V2] its smallest non-zero singular value equals the controllability margin of
    :func:`controllability` (the smallest singular value of the active rows of V2) whenever the passive joints
    number at most rank(A). Truncating at ``tol`` therefore inverts exactly the directions the controllability
    test calls controllable, and bounds the added torque: ||(I - P) eta|| <= ||eta|| <= ||demand|| / tol. The
    truncated directions are the passive demand that cannot be met; they stay in the residual (I - B) f.
    (Same rule as the paper's SVD cut-off of Sec. 8, eq. (70), applied to Q instead of A.)
    """
    U, s, Vt = np.linalg.svd(Q)
    keep = s > max(tol, 1e-15 * (float(s[0]) if s.size else 0.0))
    if not keep.any():
        return np.zeros(Q.shape[1])
    return -(Vt[keep].T / s[keep]) @ (U[:, keep].T @ demand)


def controllability(projector: NullSpaceProjector, passive: Sequence[int],
                    tol: float = DEFAULT_CONTROLLABILITY_TOLERANCE) -> tuple[bool, float]:
    """Controllability condition (64) for passive joints: N(A) cap R(B)^perp = {0} (Aghili, Sec. 7.4.2).

    With V2 an orthonormal basis of N(A), a motion V2 c moves passive joints only iff B V2 c = 0, so the condition
    holds iff the active rows of V2 have full column rank. Returns (holds, margin) with margin the smallest
    singular value of those rows (+inf when N(A) = {0}); ``holds`` is ``margin > tol``.
    """
    n = projector.n
    mask = passive_mask(passive, n)
    V2 = projector.null_basis
    if V2.shape[1] == 0:
        return True, float("inf")
    active_rows = V2[~mask]
    if active_rows.shape[0] < V2.shape[1]:
        return False, 0.0
    s = np.linalg.svd(active_rows, compute_uv=False)
    margin = float(s[-1])
    return margin > tol, margin


def achievable_force_projector(range_basis: np.ndarray, passive: Sequence[int]) -> np.ndarray:
    """Orthogonal projector onto the constraint forces reachable with zero passive torque: {F in R(A^T) :
    F_i = 0 at every passive joint i} (n x n). ``range_basis``: orthonormal basis V1 of R(A^T). With Z an
    orthonormal basis of the null space of V1's passive rows, V1 Z is an orthonormal basis of that set."""
    n = range_basis.shape[0]
    mask = passive_mask(passive, n)
    if range_basis.shape[1] == 0:
        return np.zeros((n, n))
    rows = range_basis[mask]
    if rows.shape[0] == 0:
        return range_basis @ range_basis.T
    _, s, Vt = np.linalg.svd(rows)
    r = int(np.count_nonzero(s > 1e-12 * max(1.0, float(s[0]) if s.size else 0.0)))
    Y = range_basis @ Vt[r:].T
    return Y @ Y.T
