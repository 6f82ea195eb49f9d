"""Momentum-consistent velocity jump at constraint activation (Müller 2026, Secs. 4-5).

When constraints h_2 are activated at q_0 while h_1 stay active, the velocity jumps from v_- to v_+ = v_- + dv.
Three equivalent transition conditions of the paper are implemented, plus a non-physical reference:

``"kkt"``        eqs. (22)/(24): [[M, J_+^T], [J_+, 0]] (dv; Lambda) = (U; -J_+ v_-) with the WHOLE active set
                 after the event stacked, J_+ = (J_1; J_2). Using only the new rows J_2 would let the jump violate
                 the persistent constraints (a joint locked earlier would start moving again).
``"redundant"``  eq. (32): [[M, N^T J_2^T], [J_2 N, 0]] (dv; Lambda_2) = (N^T U; -J_2 v_-) with the M-weighted
                 null-space projector N = N_{J_1,M} = I - J_1M^+ J_1 of the persistent constraints (eq. (7)).
``"minimal"``    eq. (37): [[F_1^T M F_1, F_1^T J_2^T], [J_2 F_1, 0]] (ds; Lambda_2) = (F_1^T U; -J_2 F_1 s_-),
                 dv = F_1 ds, with the orthogonal complement F_1 of J_1 built from eq. (10) (independent
                 coordinates chosen by column-pivoted QR).
``"naive"``      NON-PHYSICAL: v_+ = (I - J_+^+ J_+) v_-, the Euclidean projection onto the admissible velocities;
                 for joint locks this just zeroes the locked rates (the paper's Sec. 6 comparison). It ignores
                 inertia and breaks the momentum balance (21); use it only to show what goes wrong.

Joint locks (unit rows J) have a closed form of eq. (22), :func:`joint_lock_jump`: the emergency-stop engine's
abrupt locks call it, and the tests check it against the three general methods above.

Note on the right-hand sides: the paper prints U in the first block row of (32) and (37); its own derivations
(eqs. (28) and (35)) give N^T U and F_1^T U. We use the derived forms; with no impulsive control force (U = 0,
the default) both readings coincide.

Sign convention (Müller 2026, eq. (21)): M dv + J_+^T Lambda = U, i.e. Lambda is the constraint impulse with the
sign of the Lagrange multipliers in eq. (3); the generalized impulse acting on the system is -J_+^T Lambda
[N m s for revolute joints]. Λ_2 (of the activated rows) is the same in all three methods.

Redundant activation and singular configurations: when the stacked J_+ (or J_2 N, J_2 F_1) loses rank, the
impulses are not unique but the post-event velocity still is (it is the M-orthogonal projection of v_- onto
ker J_+). Each method then solves its block system in the least-squares sense with singular values below
``rank_tol * sigma_max`` discarded (minimum-norm impulses), and reports the rank and the redundancy. A constraint
already implied by the active set gives dv = 0 (within rounding) and ``implied = True``.

Units: v [rad/s, m/s], Lambda [N m s, N s], M [kg m^2, kg].
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Sequence

import numpy as np
import scipy.linalg

from vtm_dynamics.core.robot.constraints import Constraint
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.numerics import numerical_rank
from vtm_dynamics.core.switching.topology import Topology
from vtm_dynamics.core.validation import finite_vector

METHODS = ("kkt", "redundant", "minimal", "naive")
DEFAULT_RANK_TOL = 1e-9


class SwitchingError(ValueError):
    """Bad input to a transition solve (unknown method, shape mismatch, non-finite values)."""


@dataclass(frozen=True)
class TransitionResult:
    """Outcome of one constraint activation (Müller 2026, eqs. (22), (32), (37)).

    ``v_minus``/``v_plus``/``dv`` [rad/s]; ``impulses`` Lambda_2 of the activated rows (Lambda of the whole stack
    for ``kkt``: then ``persistent_impulses`` are the first m_1 entries split off); ``method``; ``physical`` is False
    only for the naive update; ``rank``/``rows`` of the stacked J_+; ``rank_before`` of J_1; ``redundant`` when
    J_+ is rank deficient (redundant rows or a singular configuration); ``implied`` when the activation adds no
    restriction (rank unchanged); ``constraint_violation`` = max |J_+ v_+|; kinetic energies before/after [J].
    """

    method: str
    v_minus: np.ndarray
    v_plus: np.ndarray
    dv: np.ndarray
    impulses: np.ndarray
    persistent_impulses: np.ndarray | None
    physical: bool
    rows: int
    rank: int
    rank_before: int
    redundant: bool
    implied: bool
    rank_tol: float
    constraint_violation: float
    kinetic_energy_before: float
    kinetic_energy_after: float

    @property
    def energy_loss(self) -> float:
        """Kinetic energy dissipated by the event [J] (>= 0 for the momentum-consistent methods)."""
        return self.kinetic_energy_before - self.kinetic_energy_after


def _as_matrix(J: np.ndarray | None, nv: int, field: str) -> np.ndarray:
    if J is None:
        return np.zeros((0, nv))
    J = np.asarray(J, dtype=float)
    if J.ndim != 2 or J.shape[1] != nv:
        raise SwitchingError(f"{field}: expected shape (m, {nv}), got {J.shape}")
    if not np.all(np.isfinite(J)):
        raise SwitchingError(f"{field}: contains non-finite values")
    return J


def _as_vector(x: np.ndarray | None, n: int, field: str) -> np.ndarray:
    return np.zeros(n) if x is None else finite_vector(x, n, field, SwitchingError)


def _solve_saddle(K: np.ndarray, rhs: np.ndarray, full_rank: bool, rank_tol: float) -> np.ndarray:
    """Solve a symmetric saddle-point system; least squares with truncated SVD when rank deficient."""
    if full_rank:
        try:
            return np.linalg.solve(K, rhs)
        except np.linalg.LinAlgError:
            pass
    sol, *_ = scipy.linalg.lstsq(K, rhs, cond=rank_tol, lapack_driver="gelsd")
    return sol


def weighted_pseudoinverse(M: np.ndarray, J: np.ndarray, rank_tol: float = DEFAULT_RANK_TOL) -> np.ndarray:
    """J_M^+ = M^-1 J^T (J M^-1 J^T)^+ (Müller 2026, after eq. (7)); the inner inverse is a truncated
    pseudo-inverse so redundant rows are allowed."""
    nv = M.shape[0]
    if J.shape[0] == 0:
        return np.zeros((nv, 0))
    cho = scipy.linalg.cho_factor(M)
    MinvJt = scipy.linalg.cho_solve(cho, J.T)
    A = J @ MinvJt
    return MinvJt @ np.linalg.pinv(A, rcond=rank_tol, hermitian=True)


def weighted_nullspace_projector(M: np.ndarray, J: np.ndarray, rank_tol: float = DEFAULT_RANK_TOL) -> np.ndarray:
    """N_{J,M} = I - J_M^+ J, the M-weighted projector onto ker J (Müller 2026, eq. (7))."""
    nv = M.shape[0]
    if J.shape[0] == 0:
        return np.eye(nv)
    return np.eye(nv) - weighted_pseudoinverse(M, J, rank_tol) @ J


def orthogonal_complement(J: np.ndarray, rank_tol: float = DEFAULT_RANK_TOL) -> tuple[np.ndarray, np.ndarray]:
    """(F, s_idx): F with J F = 0 built as in Müller 2026, eq. (10), and the independent velocity indices s_idx.

    Rows of J are first reduced to r = rank(J) independent ones and r dependent coordinates p are chosen by
    column-pivoted QR (largest pivots: J_p well conditioned); the remaining coordinates are the minimal ones s,
    F = (-J_p^-1 J_s; I) in the original ordering, so that v = F v[s_idx] for admissible v.
    """
    m, nv = J.shape
    if m == 0:
        return np.eye(nv), np.arange(nv)
    r = numerical_rank(J, rtol=rank_tol)
    if r == 0:
        return np.eye(nv), np.arange(nv)
    # independent rows: pivoted QR of J^T
    _, _, row_perm = scipy.linalg.qr(J.T, pivoting=True, mode="economic")
    Jr = J[np.sort(row_perm[:r])]
    _, _, col_perm = scipy.linalg.qr(Jr, pivoting=True, mode="economic")
    p_idx = np.sort(col_perm[:r])
    s_idx = np.array([i for i in range(nv) if i not in set(p_idx.tolist())], dtype=int)
    F = np.zeros((nv, nv - r))
    F[s_idx, np.arange(nv - r)] = 1.0
    F[p_idx, :] = -np.linalg.solve(Jr[:, p_idx], Jr[:, s_idx])
    return F, s_idx


def _finish(
    method: str, M: np.ndarray, J1: np.ndarray, J2: np.ndarray, v_minus: np.ndarray, dv: np.ndarray,
    impulses: np.ndarray, persistent: np.ndarray | None, physical: bool, rank_tol: float,
) -> TransitionResult:
    Jp = np.vstack([J1, J2])
    v_plus = v_minus + dv
    rank = numerical_rank(Jp, rtol=rank_tol)
    rank_before = numerical_rank(J1, rtol=rank_tol)
    return TransitionResult(
        method=method,
        v_minus=v_minus.copy(),
        v_plus=v_plus,
        dv=dv,
        impulses=impulses,
        persistent_impulses=persistent,
        physical=physical,
        rows=Jp.shape[0],
        rank=rank,
        rank_before=rank_before,
        redundant=rank < Jp.shape[0],
        implied=rank == rank_before,
        rank_tol=rank_tol,
        constraint_violation=float(np.max(np.abs(Jp @ v_plus))) if Jp.shape[0] else 0.0,
        kinetic_energy_before=float(0.5 * v_minus @ M @ v_minus),
        kinetic_energy_after=float(0.5 * v_plus @ M @ v_plus),
    )


def kkt_transition(
    M: np.ndarray, J1: np.ndarray | None, J2: np.ndarray, v_minus: np.ndarray, U: np.ndarray | None = None,
    rank_tol: float = DEFAULT_RANK_TOL,
) -> TransitionResult:
    """Müller 2026, eqs. (22)/(24): the KKT system of the whole active set after the event, J_+ = (J_1; J_2).

    Impulses: all m_1 + m_2 entries of Lambda; ``persistent_impulses`` = Lambda_1, ``impulses`` = Lambda_2.
    """
    M, J1, J2, v_minus, U = _checked(M, J1, J2, v_minus, U)
    Jp = np.vstack([J1, J2])
    nv, m = M.shape[0], Jp.shape[0]
    K = np.block([[M, Jp.T], [Jp, np.zeros((m, m))]])
    rhs = np.concatenate([U, -Jp @ v_minus])
    full = numerical_rank(Jp, rtol=rank_tol) == m
    sol = _solve_saddle(K, rhs, full, rank_tol)
    lam = sol[nv:]
    m1 = J1.shape[0]
    return _finish("kkt", M, J1, J2, v_minus, sol[:nv], lam[m1:], lam[:m1], True, rank_tol)


def redundant_transition(
    M: np.ndarray, J1: np.ndarray | None, J2: np.ndarray, v_minus: np.ndarray, U: np.ndarray | None = None,
    rank_tol: float = DEFAULT_RANK_TOL,
) -> TransitionResult:
    """Müller 2026, eq. (32): redundant coordinates with the M-weighted projector N = N_{J_1,M} (eq. (7)).

    [[M, N^T J_2^T], [J_2 N, 0]] (dv; Lambda_2) = (N^T U; -J_2 v_-)  (first right-hand side from eq. (28)).
    """
    M, J1, J2, v_minus, U = _checked(M, J1, J2, v_minus, U)
    nv, m2 = M.shape[0], J2.shape[0]
    N = weighted_nullspace_projector(M, J1, rank_tol)
    B = J2 @ N
    K = np.block([[M, B.T], [B, np.zeros((m2, m2))]])
    rhs = np.concatenate([N.T @ U, -J2 @ v_minus])
    full = numerical_rank(B, rtol=rank_tol) == m2
    sol = _solve_saddle(K, rhs, full, rank_tol)
    return _finish("redundant", M, J1, J2, v_minus, sol[:nv], sol[nv:], None, True, rank_tol)


def minimal_transition(
    M: np.ndarray, J1: np.ndarray | None, J2: np.ndarray, v_minus: np.ndarray, U: np.ndarray | None = None,
    rank_tol: float = DEFAULT_RANK_TOL, F1: np.ndarray | None = None,
) -> TransitionResult:
    """Müller 2026, eq. (37): minimal coordinates s (Voronets) with the orthogonal complement F_1 of J_1.

    [[F_1^T M F_1, F_1^T J_2^T], [J_2 F_1, 0]] (ds; Lambda_2) = (F_1^T U; -J_2 F_1 s_-), dv = F_1 ds
    (first right-hand side from eq. (35)). F_1 defaults to eq. (10) (``orthogonal_complement``); s_- = v_-[s_idx].
    """
    M, J1, J2, v_minus, U = _checked(M, J1, J2, v_minus, U)
    if F1 is None:
        F1, s_idx = orthogonal_complement(J1, rank_tol)
        s_minus = v_minus[s_idx]
    else:
        F1 = np.asarray(F1, dtype=float)
        if F1.ndim != 2 or F1.shape[0] != M.shape[0]:
            raise SwitchingError(f"F1: expected shape ({M.shape[0]}, k), got {F1.shape}")
        s_minus = np.linalg.lstsq(F1, v_minus, rcond=None)[0]
    k, m2 = F1.shape[1], J2.shape[0]
    Mbar = F1.T @ M @ F1
    B = J2 @ F1
    K = np.block([[Mbar, B.T], [B, np.zeros((m2, m2))]])
    rhs = np.concatenate([F1.T @ U, -B @ s_minus])
    full = numerical_rank(B, rtol=rank_tol) == m2
    sol = _solve_saddle(K, rhs, full, rank_tol)
    return _finish("minimal", M, J1, J2, v_minus, F1 @ sol[:k], sol[k:], None, True, rank_tol)


def naive_transition(
    M: np.ndarray, J1: np.ndarray | None, J2: np.ndarray, v_minus: np.ndarray, U: np.ndarray | None = None,
    rank_tol: float = DEFAULT_RANK_TOL,
) -> TransitionResult:
    """NON-PHYSICAL reference: v_+ = (I - J_+^+ J_+) v_- (Euclidean projection; zeroes locked rates for locks).

    It satisfies the velocity constraints but not the momentum balance (Müller 2026, eq. (21)); ``physical`` is
    False and ``impulses`` is empty. Only for comparisons (the paper's Figs. 2 and 6).
    """
    M, J1, J2, v_minus, U = _checked(M, J1, J2, v_minus, U)
    Jp = np.vstack([J1, J2])
    dv = -np.linalg.pinv(Jp, rcond=rank_tol) @ (Jp @ v_minus) if Jp.shape[0] else np.zeros_like(v_minus)
    return _finish("naive", M, J1, J2, v_minus, dv, np.zeros(0), None, False, rank_tol)


_SOLVERS = {
    "kkt": kkt_transition,
    "redundant": redundant_transition,
    "minimal": minimal_transition,
    "naive": naive_transition,
}


def _checked(M, J1, J2, v_minus, U):
    M = np.asarray(M, dtype=float)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or not np.all(np.isfinite(M)):
        raise SwitchingError(f"M: expected a finite square matrix, got shape {M.shape}")
    nv = M.shape[0]
    return (
        M,
        _as_matrix(J1, nv, "J1"),
        _as_matrix(J2, nv, "J2"),
        _as_vector(v_minus, nv, "v_minus"),
        _as_vector(U, nv, "U"),
    )


def transition(
    M: np.ndarray, J1: np.ndarray | None, J2: np.ndarray, v_minus: np.ndarray, method: str = "kkt",
    U: np.ndarray | None = None, rank_tol: float = DEFAULT_RANK_TOL,
) -> TransitionResult:
    """Matrix-level entry point: dispatch to one of ``METHODS`` with persistent rows J1 and activated rows J2."""
    try:
        solver = _SOLVERS[method]
    except (KeyError, TypeError):
        raise SwitchingError(f"method: must be one of {', '.join(METHODS)}, got {method!r}") from None
    return solver(M, J1, J2, v_minus, U, rank_tol)


def solve_activation(
    robot: RobotModel,
    q: np.ndarray,
    v_minus: np.ndarray,
    active_before: Topology | Iterable[Constraint] | None,
    activated: Constraint | Sequence[Constraint],
    method: str = "kkt",
    U: np.ndarray | None = None,
    rank_tol: float = DEFAULT_RANK_TOL,
) -> tuple[TransitionResult, Topology]:
    """Velocity jump when ``activated`` constraints switch on at q while ``active_before`` stay active.

    Several constraints in ``activated`` are activated simultaneously; successive activation is repeated calls
    with the returned topology. Returns (result, topology after the event, with the new constraints bound at q).
    ``U`` is an impulsive generalized control force [N m s] (default 0; Müller 2026, eq. (20)).
    """
    q = robot.check_q(q)
    v_minus = robot.check_v(v_minus, "v_minus")
    before = Topology.of(active_before)
    new = (activated,) if not isinstance(activated, (list, tuple)) else tuple(activated)
    after = before.activate(robot, q, new)
    M = robot.mass_matrix(q)
    J1 = before.jacobian(robot, q)
    J2 = Topology(after.constraints[len(before):]).jacobian(robot, q)
    result = transition(M, J1, J2, v_minus, method, U, rank_tol)
    locked = after.locked_v_indices(robot)
    if locked.size:
        # Joint-lock rows are unit rows: the solve leaves locked rates at rounding level (~1e-16); set them to
        # exact zeros so that integrating v = 0 keeps the lock angle exactly.
        v_plus = result.v_plus.copy()
        v_plus[locked] = 0.0
        Jp = np.vstack([J1, J2])
        result = replace(result, v_plus=v_plus, dv=v_plus - v_minus,
                         constraint_violation=float(np.max(np.abs(Jp @ v_plus))) if Jp.shape[0] else 0.0)
    return result, after


@dataclass(frozen=True)
class JointLockJump:
    """Velocity jump when joints lock (Müller 2026, eq. (22) with unit rows J, see :func:`joint_lock_jump`).

    ``v_plus``/``dv`` [rad/s] (exact zeros in the locked rows); ``locked`` the velocity indices L' held after the
    event (sorted); ``impulses`` Lambda_L' [N m s] of those rows with the sign of eq. (21), M dv + J^T Lambda = 0;
    ``energy_loss`` [J] the kinetic energy the jump dissipates (>= 0).
    """

    v_plus: np.ndarray
    dv: np.ndarray
    locked: np.ndarray
    impulses: np.ndarray
    energy_loss: float


def joint_lock_jump(
    M: np.ndarray, held: np.ndarray, locking: np.ndarray, v_minus: np.ndarray, method: str = "closed_form",
) -> JointLockJump:
    """Momentum-consistent jump when the joints ``locking`` lock while ``held`` stay locked (Müller 2026, eq. (22)).

    Joint locks are unit rows of J, so the KKT system (22) has a closed form: with L' = held u locking and F' its
    complement, the rows F' of the momentum M v are conserved (eq. (21) with U = 0, the rows of M dv outside the
    span of J^T vanish), and

        v+_F' = v-_F' + M_F'F'^-1 M_F'N v-_N,     v+_L' = 0,     Lambda_L' = -(M (v+ - v-))_L'

    (N = ``locking``; the held rows must already have v-_L = 0, else :class:`SwitchingError`).
    ``method`` ``"closed_form"`` uses this formula (one solve with M_F'F'); ``"kkt"``, ``"redundant"`` or
    ``"minimal"`` call :func:`transition` (eqs. (22)/(24), (32),
    (37)) with J_1 = E_held, J_2 = E_locking, then set v+_L' to exact zeros (the solvers leave rounding-level
    residuals). M is the symmetric positive definite mass matrix [kg m^2] (nv x nv), v_minus [rad/s]; the index
    arrays are velocity indices, ``held`` sorted; an index named twice in ``locking`` is one lock (summing
    M_F'N v-_N over a repeated column would count that joint's momentum twice).
    """
    nv = M.shape[0]
    locking = np.unique(np.asarray(locking, dtype=int))
    if M.shape != (nv, nv) or np.shape(v_minus) != (nv,):
        raise SwitchingError(f"v_minus: expected shape ({nv},) to match M {M.shape}, got {np.shape(v_minus)}")
    if len(held) and np.any(v_minus[held] != 0.0):
        raise SwitchingError("v_minus: the rows of joints already held must be zero")
    Lp = np.union1d(held, locking)
    Fp = np.setdiff1d(np.arange(nv), Lp)
    v = v_minus
    if method == "closed_form":
        v_plus = v.copy()
        v_plus[Lp] = 0.0
        if Fp.size:
            v_plus[Fp] = v[Fp] + np.linalg.solve(M[np.ix_(Fp, Fp)], M[np.ix_(Fp, locking)] @ v[locking])
    else:
        eye = np.eye(nv)
        v_plus = transition(M, eye[held], eye[locking], v, method=method).v_plus
        v_plus[Lp] = 0.0  # exact zero (the solvers leave rounding-level residuals)
    dv = v_plus - v
    impulses = -(M @ dv)[Lp]
    loss = 0.5 * v @ M @ v - 0.5 * v_plus @ M @ v_plus
    return JointLockJump(v_plus=v_plus, dv=dv, locked=Lp, impulses=impulses, energy_loss=loss)
