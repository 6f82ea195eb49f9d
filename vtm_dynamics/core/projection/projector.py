"""Null-space projector dynamics of constrained multibody systems (Aghili, projection-matrix formulation).

A mechanism with generalized coordinates q (n velocities) and m velocity constraints A(q) q' = 0 (eq. (11)) has
the equations of motion M q'' + h = f - F with F = A^T lambda (eqs. (18)-(19)). The constraint rows need NOT be
independent: A may be rank deficient (redundant loop closures, singular configurations). Everything here is built
from the orthogonal projector onto the null space of A,

    P = I - A^+ A                           (Aghili, eq. (15); equal to V2 V2^T of the SVD, eq. (4)),

computed by one SVD with a documented rank tolerance (:class:`RankTolerance`). Singular values at or below the
tolerance are treated as zero: the corresponding constraint direction is "virtually removed" (Aghili, Sec. 8,
eq. (70)) and the formulas stay bounded through the singularity.

What this module computes (pure matrices; numpy only, SI units):

* :func:`null_space_projector` - P, A^+, rank, the SVD threshold (eqs. (4), (15)), optionally in the metric W
  (Sec. 2.1.1, 7.2, eqs. (8)-(10), (49)-(50)); :func:`unit_weighting` builds W for mixed revolute/prismatic joints.
* :func:`constraint_acceleration` - the normal acceleration C q' = -A^+ A' q' (eq. (16)).
* :func:`constraint_inertia_matrix` - Mc (eqs. (23)-(24)), Mc' (eq. (28)), Mc'' (eq. (29)) with their right-hand
  side matrices Cc, Cc', Cc''.
* :func:`constrained_accelerations` - direct dynamics q'' (eqs. (22), (25), (27)) and the constraint force F
  (eq. (32)) with the Lagrange multipliers lambda = A^{+T} F when they are unique (Remark 4).
* :func:`correct_positions` - pseudo-inverse Newton correction of position drift q <- q - A^+ Phi(q) (eq. (39)),
  and :func:`project_velocity` - the matching velocity correction onto N(A) (eq. (12)).

Sign conventions: f is the generalized input force (joint torques/forces), h(q, q') = C(q, q') q' + g(q) the bias
forces, F the generalized constraint force with M q'' + h = f - F (eq. (19)).

Size: about 500 lines, kept as one module in the paper's order (Secs. 2-4 and 8): the projector, the
constraint inertia matrices, the direct dynamics and the constraint forces cite each other's equations, and
reading them in one place in the paper's sequence is the point of this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

from vtm_dynamics.core.validation import finite_vector

Method = Literal["Mc", "Mc_prime", "Mc_dprime"]
METHODS: tuple[str, ...] = ("Mc", "Mc_prime", "Mc_dprime")


class ProjectionInputError(ValueError):
    """An input of the projection dynamics has the wrong shape, is not finite, or is out of its domain."""


# ---------------------------------------------------------------------------------------------------- validation
def checked_matrix(x: object, shape: tuple[int | None, int | None], field: str) -> np.ndarray:
    """``x`` as a finite 2-D float matrix of ``shape`` (None: any size), else ProjectionInputError naming ``field``."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ProjectionInputError(f"{field}: expected a numeric matrix") from None
    if arr.ndim != 2:
        raise ProjectionInputError(f"{field}: expected a 2-D matrix, got {arr.ndim} dimension(s)")
    for got, want in zip(arr.shape, shape):
        if want is not None and got != want:
            raise ProjectionInputError(f"{field}: expected shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ProjectionInputError(f"{field}: contains non-finite values")
    return arr


def checked_vector(x: object, n: int, field: str) -> np.ndarray:
    """``x`` as n finite floats (a scalar is repeated), else ProjectionInputError naming ``field``."""
    return finite_vector(x, n, field, ProjectionInputError, allow_scalar=True)


def checked_constraint_matrix(A: object, n: int, field: str = "A") -> np.ndarray:
    """The constraint matrix A (m x n, m >= 0; None or empty: no rows), checked like :func:`checked_matrix`."""
    arr = np.asarray(A, dtype=float) if A is not None else np.zeros((0, n))
    if arr.size == 0:
        return np.zeros((0, n))
    return checked_matrix(arr, (None, n), field)


def checked_mass_matrix(M: object) -> np.ndarray:
    """The inertia matrix M: non-empty, square, finite and symmetric (returned exactly symmetric)."""
    arr = checked_matrix(M, (None, None), "M")
    n = arr.shape[0]
    if arr.shape != (n, n) or n == 0:
        raise ProjectionInputError(f"M: expected a non-empty square matrix, got shape {arr.shape}")
    scale = max(1.0, float(np.max(np.abs(arr))))
    if np.max(np.abs(arr - arr.T)) > 1e-9 * scale:
        raise ProjectionInputError("M: the inertia matrix must be symmetric")
    return 0.5 * (arr + arr.T)


# ---------------------------------------------------------------------------------------------------- projector
@dataclass(frozen=True)
class RankTolerance:
    """Rank decision of the SVD of A (Aghili, Sec. 2 and Sec. 8: "the SVD treats all singular values below eps as
    zero").

    A singular value sigma_i of A counts (is "non-zero") iff ``sigma_i > max(absolute, relative * sigma_max)``.
    ``absolute`` has the units of the entries of A (m/rad for position rows of a loop closure, 1 for angular or
    joint-lock rows); ``relative`` is dimensionless. A constraint direction whose singular value falls at or below
    the threshold is dropped: near a singular configuration the constraint is virtually removed (eq. (70)) and
    A^+ stays bounded by 1/threshold. (The text of eq. (70) swaps its two cases: with A^+ = 0 below the threshold,
    P = I there, and P = I - [2 1]^T [2 1] / 5 elsewhere on the branch; derived from eq. (15).)

    Defaults: ``absolute = 1e-9`` and ``relative = 1e-10`` keep every constraint that is numerically present in a
    double-precision Jacobian of a robot of metre scale, and drop only rows that vanish to rounding level
    (redundant rows of a planar loop closed in 3-D, or the exact singular configuration).
    """

    absolute: float = 1e-9
    relative: float = 1e-10

    def __post_init__(self) -> None:
        for field in ("absolute", "relative"):
            value = getattr(self, field)
            if not (isinstance(value, (int, float)) and np.isfinite(value) and value >= 0.0):
                raise ProjectionInputError(f"{field}: the rank tolerance must be a finite number >= 0")

    def threshold(self, sigma_max: float) -> float:
        """The singular-value threshold for a matrix whose largest singular value is ``sigma_max``."""
        return max(self.absolute, self.relative * sigma_max)


DEFAULT_TOLERANCE = RankTolerance()


@dataclass(frozen=True)
class NullSpaceProjector:
    """Result of :func:`null_space_projector`: P = I - A^+ A and the SVD quantities it came from.

    Attributes:
        P: n x n orthogonal projector onto N(A) (eq. (15)); symmetric, idempotent, dimensionless.
        A_pinv: n x m pseudo-inverse A^+ computed with the rank tolerance.
        null_basis: n x (n - rank) orthonormal basis V2 of N(A) (eq. (4)), P = V2 V2^T.
        range_basis: n x rank orthonormal basis V1 of N(A)^perp = R(A^T).
        rank: numerical rank r of A.
        singular_values: all singular values of A, descending.
        threshold: the singular-value threshold that decided the rank (see :class:`RankTolerance`).
        m: number of constraint rows.

    When a metric W was given, every matrix here is the one of the weighted problem in the coordinates
    x_W = W^{1/2} x (eq. (8)), i.e. of A_W = A W^{-1/2} (Sec. 7.2).
    """

    P: np.ndarray
    A_pinv: np.ndarray
    null_basis: np.ndarray
    range_basis: np.ndarray
    rank: int
    singular_values: np.ndarray
    threshold: float
    m: int

    @property
    def n(self) -> int:
        return int(self.P.shape[0])

    @property
    def degrees_of_freedom(self) -> int:
        """k = n - rank(A): the instantaneous degrees of freedom (Sec. 7.1)."""
        return self.n - self.rank

    @property
    def redundancy(self) -> int:
        """m - rank(A): how many constraint rows are redundant (0 means the multipliers are unique, Remark 4)."""
        return self.m - self.rank

    @property
    def multipliers_unique(self) -> bool:
        """True iff A has full row rank, the only case where lambda is determined by F (Aghili, Remark 4)."""
        return self.rank == self.m

    @property
    def complement(self) -> np.ndarray:
        """I - P, the orthogonal projector onto N(A)^perp = R(A^T) (eq. (5))."""
        return np.eye(self.n) - self.P


def null_space_projector(A: object, n: int | None = None, tolerance: RankTolerance = DEFAULT_TOLERANCE) -> NullSpaceProjector:
    """Orthogonal projector onto the null space of the constraint Jacobian, by SVD (Aghili, eqs. (4), (15)).

    Args:
        A: m x n constraint Jacobian (m may be 0; rows may be dependent; units per row).
        n: number of generalized velocities; required when A has no rows.
        tolerance: the rank decision (see :class:`RankTolerance`).

    Returns:
        :class:`NullSpaceProjector` with P = I - A^+ A = V2 V2^T, A^+ = V1 Sigma^-1 U1^T.
    """
    if not isinstance(tolerance, RankTolerance):
        raise ProjectionInputError("tolerance: expected a RankTolerance")
    if n is None:
        arr = np.asarray(A, dtype=float)
        if arr.ndim != 2 or arr.shape[1] == 0:
            raise ProjectionInputError("n: give the number of velocities when A is empty or not a matrix")
        n = int(arr.shape[1])
    A = checked_constraint_matrix(A, n)
    m = A.shape[0]
    if m == 0:
        eye = np.eye(n)
        return NullSpaceProjector(eye, np.zeros((n, 0)), eye, np.zeros((n, 0)), 0, np.zeros(0), tolerance.absolute, 0)
    U, s, Vt = np.linalg.svd(A, full_matrices=True)
    thr = tolerance.threshold(float(s[0]) if s.size else 0.0)
    r = int(np.count_nonzero(s > thr))
    V1 = Vt[:r].T
    V2 = Vt[r:].T
    A_pinv = (V1 / s[:r]) @ U[:, :r].T
    P = V2 @ V2.T
    P = 0.5 * (P + P.T)
    return NullSpaceProjector(P, A_pinv, V2, V1, r, s, thr, m)


def unit_weighting(is_prismatic: object, characteristic_length: float) -> np.ndarray:
    """Metric W for coordinates that mix revolute [rad] and prismatic [m] joints (Aghili, Sec. 7.2, eq. (50)).

    W = diag(kappa^-2 for prismatic coordinates, 1 for revolute ones), where kappa [m] is a characteristic length.
    The weighted velocity W^{1/2} q' then has units rad/s throughout and the weighted force W^{-1/2} f units N m,
    so the minimized norm ||f||_W = (f^T W^-1 f)^{1/2} = (kappa^2 ||f_force||^2 + ||f_torque||^2)^{1/2} (eq. (49))
    is independent of the length unit chosen.

    Args:
        is_prismatic: one boolean per generalized velocity.
        characteristic_length: kappa [m] > 0.
    """
    flags = np.asarray(is_prismatic)
    if flags.ndim != 1 or flags.size == 0 or flags.dtype.kind not in "bi":
        raise ProjectionInputError("is_prismatic: expected one boolean per generalized velocity")
    if not (np.isfinite(characteristic_length) and characteristic_length > 0):
        raise ProjectionInputError("characteristic_length: expected a length > 0 [m]")
    w = np.where(flags.astype(bool), characteristic_length**-2, 1.0)
    return np.diag(w)


def metric_sqrt(W: object, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(W^{1/2}, W^{-1/2}) of a symmetric positive definite metric (Aghili, eq. (8))."""
    Wm = checked_matrix(W, (n, n), "W")
    if np.max(np.abs(Wm - Wm.T)) > 1e-12 * max(1.0, float(np.max(np.abs(Wm)))):
        raise ProjectionInputError("W: the metric must be symmetric")
    if np.count_nonzero(Wm - np.diag(np.diag(Wm))) == 0:
        d = np.diag(Wm)
        if np.any(d <= 0):
            raise ProjectionInputError("W: the metric must be positive definite")
        return np.diag(np.sqrt(d)), np.diag(1.0 / np.sqrt(d))
    w, V = np.linalg.eigh(0.5 * (Wm + Wm.T))
    if np.any(w <= 0):
        raise ProjectionInputError("W: the metric must be positive definite")
    return (V * np.sqrt(w)) @ V.T, (V / np.sqrt(w)) @ V.T


def constraint_acceleration(projector: NullSpaceProjector, Adot_qdot: object) -> np.ndarray:
    """Normal acceleration imposed by the constraints, C q' = -A^+ A' q' [rad/s^2, m/s^2] (Aghili, eq. (16)).

    ``Adot_qdot`` is the drift A'(q, q') q' (m entries). This is the component (I - P) q'' of every admissible
    acceleration (eq. (13)); for the particle on a circle it is the centripetal acceleration (eqs. (36)-(37)).
    """
    return -projector.A_pinv @ checked_vector(Adot_qdot, projector.m, "Adot_qdot")


# ---------------------------------------------------------------------------------------------------- inertia
@dataclass(frozen=True)
class ConstraintInertia:
    """A constraint inertia matrix and the matrix multiplying the normal acceleration on the right-hand side.

    The direct dynamics reads ``matrix @ q'' = P (f - h) + rhs_matrix @ (C q')`` (Aghili, eqs. (22), (27), (29)).
    """

    method: str
    matrix: np.ndarray
    rhs_matrix: np.ndarray
    gamma: float | None = None


def constraint_inertia_matrix(M: object, P: object, method: Method = "Mc", gamma: float | None = None) -> ConstraintInertia:
    """One of Aghili's three constraint inertia matrices (always invertible for M positive definite).

    * ``"Mc"``: Mc = M + PM - (PM)^T = PM + M(I - P), rhs Cc = M (eqs. (22)-(24); positive definite, Theorem 2,
      not symmetric).
    * ``"Mc_prime"``: Mc' = PMP + (I-P)M(I-P), rhs Cc' = (I - 2P) M (eqs. (26)-(28); symmetric positive definite,
      Proposition 1).
    * ``"Mc_dprime"``: Mc'' = PM + gamma (I - P), rhs Cc'' = gamma I (eq. (29); invertible, Proposition 2).
      ``gamma`` [kg m^2 for revolute coordinates] defaults to ||M||_2, the paper's "logical choice".

    Here the right-hand-side matrices multiply C q' (so Cc = M C in the paper's notation becomes ``M`` here).
    """
    Mm = checked_mass_matrix(M)
    n = Mm.shape[0]
    Pm = checked_matrix(P, (n, n), "P")
    eye = np.eye(n)
    if method == "Mc":
        PM = Pm @ Mm
        return ConstraintInertia("Mc", PM + Mm - Mm @ Pm, Mm)
    if method == "Mc_prime":
        Q = eye - Pm
        return ConstraintInertia("Mc_prime", Pm @ Mm @ Pm + Q @ Mm @ Q, (eye - 2.0 * Pm) @ Mm)
    if method == "Mc_dprime":
        g = float(np.linalg.norm(Mm, 2)) if gamma is None else float(gamma)
        if not (np.isfinite(g) and g > 0):
            raise ProjectionInputError("gamma: expected a positive finite scalar (units of M)")
        return ConstraintInertia("Mc_dprime", Pm @ Mm + g * (eye - Pm), g * eye, g)
    raise ProjectionInputError(f"method: must be one of {', '.join(METHODS)}, got {method!r}")


# ---------------------------------------------------------------------------------------------------- direct dynamics
@dataclass(frozen=True)
class ConstrainedAccelerations:
    """Result of :func:`constrained_accelerations` (Aghili, Sec. 5).

    Attributes:
        qdd: generalized accelerations q'' [rad/s^2, m/s^2] (eq. (25)).
        constraint_force: generalized constraint force F in N(A)^perp [N m, N], M q'' + h = f - F (eq. (32)).
        multipliers: lambda = A^{+T} F (m entries; the minimum-norm multipliers, Remark 4).
        multipliers_unique: True iff A has full row rank, i.e. lambda is the only multiplier vector giving F.
        normal_acceleration: C q' = -A^+ A' q' (eq. (16)).
        f_parallel, f_perp: potent and impotent components P f, (I - P) f of the input force (Sec. 5).
        projector: the :class:`NullSpaceProjector` used (in W coordinates when a metric was given).
        method: the constraint inertia matrix used.
    """

    qdd: np.ndarray
    constraint_force: np.ndarray
    multipliers: np.ndarray
    multipliers_unique: bool
    normal_acceleration: np.ndarray
    f_parallel: np.ndarray
    f_perp: np.ndarray
    projector: NullSpaceProjector
    method: str

    @property
    def rank(self) -> int:
        return self.projector.rank


def constrained_accelerations(
    M: object,
    h: object,
    tau: object,
    A: object,
    Adot_qdot: object,
    method: Method = "Mc",
    gamma: float | None = None,
    tolerance: RankTolerance = DEFAULT_TOLERANCE,
    W: object | None = None,
) -> ConstrainedAccelerations:
    """Direct dynamics of a constrained multibody system through redundant constraints and singular configurations.

    Solves ``Mc q'' = P (f - h) + Cc C q'`` (Aghili, eqs. (22), (25); or (27), (29) by ``method``) with
    C q' = -A^+ A' q' (eq. (16)), then retrieves the constraint force (eq. (32))

        F = (f_perp - h_perp) - mu (f_par - h_par) - mu Cc C q',  mu = (I - P) M Mc^-1,

    evaluated in the equivalent form F = (I - P)(f - h - M q'') (the (I - P) projection of eq. (19), from which the
    paper derives eq. (32)), and lambda = A^{+T} F (Sec. 5.2).

    Args:
        M: n x n symmetric positive definite inertia matrix [kg, kg m, kg m^2].
        h: bias forces C(q, q') q' + g(q) (n) [N m, N].
        tau: generalized input force f (n) [N m, N].
        A: m x n constraint Jacobian (m may be 0, rows may be dependent).
        Adot_qdot: drift A'(q, q') q' (m).
        method: ``"Mc"``, ``"Mc_prime"`` or ``"Mc_dprime"`` (eqs. (23), (28), (29)); all give the same q''.
        gamma: scalar of Mc'' (defaults to ||M||_2).
        tolerance: SVD rank decision.
        W: optional metric (Sec. 2.1.1): the projector is then built for A W^{-1/2}. The accelerations of a
            constraint set of full rank do not depend on W; the rank decision near singularities does.
    """
    Mm = checked_mass_matrix(M)
    n = Mm.shape[0]
    hv = checked_vector(h, n, "h")
    fv = checked_vector(tau, n, "tau")
    Am = checked_constraint_matrix(A, n)
    drift = checked_vector(Adot_qdot, Am.shape[0], "Adot_qdot")
    if W is not None:
        S, S_inv = metric_sqrt(W, n)
        res = constrained_accelerations(
            S_inv @ Mm @ S_inv, S_inv @ hv, S_inv @ fv, Am @ S_inv, drift, method, gamma, tolerance, None
        )
        return ConstrainedAccelerations(
            qdd=S_inv @ res.qdd,
            constraint_force=S @ res.constraint_force,
            multipliers=res.multipliers,
            multipliers_unique=res.multipliers_unique,
            normal_acceleration=S_inv @ res.normal_acceleration,
            f_parallel=S @ res.f_parallel,
            f_perp=S @ res.f_perp,
            projector=res.projector,
            method=res.method,
        )
    proj = null_space_projector(Am, n, tolerance)
    P = proj.P
    Cqd = constraint_acceleration(proj, drift)
    inertia = constraint_inertia_matrix(Mm, P, method, gamma)
    f_par = P @ fv
    rhs = P @ (fv - hv) + inertia.rhs_matrix @ Cqd
    if method == "Mc_prime":
        try:
            L = np.linalg.cholesky(inertia.matrix)
            qdd = np.linalg.solve(L.T, np.linalg.solve(L, rhs))
        except np.linalg.LinAlgError:
            raise ProjectionInputError("M: the inertia matrix is not positive definite") from None
    else:
        try:
            qdd = np.linalg.solve(inertia.matrix, rhs)
        except np.linalg.LinAlgError:
            raise ProjectionInputError("M: the inertia matrix is singular") from None
    F = proj.complement @ (fv - hv - Mm @ qdd)
    lam = proj.A_pinv.T @ F
    return ConstrainedAccelerations(
        qdd=qdd,
        constraint_force=F,
        multipliers=lam,
        multipliers_unique=proj.multipliers_unique,
        normal_acceleration=Cqd,
        f_parallel=f_par,
        f_perp=fv - f_par,
        projector=proj,
        method=method,
    )


def cross_coupling(M: object, P: object, method: Method = "Mc", gamma: float | None = None) -> np.ndarray:
    """The cross-coupling channel mu = (I - P) alpha, alpha = M Mc^-1 (Aghili, eq. (32), Fig. 1).

    mu maps the potent force f_par - h_par into the constraint force; by Proposition 3 it vanishes on N(A)
    (mu P = 0) when N(A) is invariant under M.
    """
    Mm = checked_mass_matrix(M)
    n = Mm.shape[0]
    Pm = checked_matrix(P, (n, n), "P")
    Mc = constraint_inertia_matrix(Mm, Pm, method, gamma).matrix
    alpha = np.linalg.solve(Mc.T, Mm.T).T  # M Mc^-1
    return (np.eye(n) - Pm) @ alpha


# ---------------------------------------------------------------------------------------------------- drift
@dataclass(frozen=True)
class PositionCorrection:
    """Result of :func:`correct_positions` (Aghili, eq. (39)).

    Attributes:
        q: corrected configuration.
        residual_norm: ||Phi(q)|| after the correction (units of Phi: m and rad).
        initial_residual_norm: ||Phi|| before.
        iterations: Newton steps taken.
        converged: True iff ``residual_norm <= tol``.
    """

    q: np.ndarray
    residual_norm: float
    initial_residual_norm: float
    iterations: int
    converged: bool


def correct_positions(
    q: object,
    residual: Callable[[np.ndarray], np.ndarray],
    jacobian: Callable[[np.ndarray], np.ndarray],
    integrate: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    tol: float = 1e-12,
    max_iterations: int = 10,
    tolerance: RankTolerance = DEFAULT_TOLERANCE,
) -> PositionCorrection:
    """Pseudo-inverse Newton correction of constraint drift, q_{k+1} = q_k - A^+ Phi(q_k) (Aghili, eq. (39)).

    Each step is the minimum-norm solution of the linearized constraint A dq = -Phi (Sec. 6). It works with
    redundant constraint rows (A^+ ignores directions below the rank tolerance); near a singular configuration
    the dropped direction is simply not corrected, which keeps the step bounded.

    Args:
        q: configuration to correct (nq entries).
        residual: Phi(q), the constraint violation (m entries, consistent with the rows of ``jacobian``).
        jacobian: A(q) = dPhi/dq expressed on velocities (m x nv).
        integrate: q (+) dq on the configuration manifold (defaults to q + dq, for nq == nv).
        tol: stop when ||Phi|| <= tol.
        max_iterations: at most this many Newton steps.
    """
    qk = np.array(q, dtype=float)
    if qk.ndim != 1 or not np.all(np.isfinite(qk)):
        raise ProjectionInputError("q: expected a finite 1-D configuration vector")
    if not (tol >= 0 and max_iterations >= 0):
        raise ProjectionInputError("tol: expected tol >= 0 and max_iterations >= 0")
    step = integrate if integrate is not None else (lambda x, d: x + d)
    phi = np.asarray(residual(qk), dtype=float)
    initial = float(np.linalg.norm(phi))
    norm = initial
    it = 0
    while norm > tol and it < max_iterations:
        Ak = np.asarray(jacobian(qk), dtype=float)
        proj = null_space_projector(Ak, Ak.shape[1], tolerance)
        dq = -proj.A_pinv @ phi
        if not np.any(dq):
            break
        q_new = np.asarray(step(qk, dq), dtype=float)
        phi_new = np.asarray(residual(q_new), dtype=float)
        it += 1
        new_norm = float(np.linalg.norm(phi_new))
        if not np.isfinite(new_norm) or new_norm >= norm:
            # Newton is no longer contracting (far from the manifold or at a singularity): keep the best point.
            if new_norm < norm:
                qk, phi, norm = q_new, phi_new, new_norm
            break
        qk, phi, norm = q_new, phi_new, new_norm
    return PositionCorrection(qk, norm, initial, it, norm <= tol)


def project_velocity(v: object, A: object, W: object | None = None, tolerance: RankTolerance = DEFAULT_TOLERANCE) -> np.ndarray:
    """Velocity drift correction: the admissible velocity closest to ``v`` (Aghili, eq. (12): (I - P) q' = 0).

    Without a metric this is P v (Euclidean closest point in N(A)). With ``W`` (e.g. the inertia matrix M) the
    closest point in the norm ||x||_W = (x^T W x)^{1/2} (eq. (10)) is returned, W^{-1/2} P_W W^{1/2} v with
    P_W the projector of A W^{-1/2}; with W = M this removes the least kinetic energy.
    """
    vv = np.asarray(v, dtype=float)
    if vv.ndim != 1:
        raise ProjectionInputError("v: expected a 1-D velocity vector")
    n = vv.size
    vv = checked_vector(vv, n, "v")
    Am = checked_constraint_matrix(A, n)
    if W is None:
        return null_space_projector(Am, n, tolerance).P @ vv
    S, S_inv = metric_sqrt(W, n)
    PW = null_space_projector(Am @ S_inv, n, tolerance).P
    return S_inv @ (PW @ (S @ vv))
