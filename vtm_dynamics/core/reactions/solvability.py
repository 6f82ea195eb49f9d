"""Which constraint reactions of an overconstrained model are uniquely determined (Wojtyra & Frączek 2013).

Notation (Wojtyra & Frączek, Multibody Syst Dyn 30:153-171, 2013): C is the m×n constraint matrix in absolute
coordinates (eq. (5), built by :mod:`vtm_dynamics.core.reactions.absolute_coordinates`), r = rank(C), p = m − r the degree of
redundancy (eq. (7)). For a kinematic pair X with rows C_X and the remaining rows C_Y, X = span(C_X^T),
Y = span(C_Y^T), Z = span(C^T). The pair's generalized reaction f_X = C_X^T λ_X (eq. (16)) is unique iff
Z = X ⊕ Y (Sect. 3.2).

Two independent tests of Z = X ⊕ Y are computed for every pair:

1. the paper's QR test (Sect. 3.3, eqs. (21)-(27)): the column-pivoted QR ``C E = Q R`` of C (eq. (21)); the last p columns Q̄ of Q span the left null space of C; ``B_X = C_X^T Q̄_X`` (eq. (27))
   must vanish. Reported: ``qr_residual = ‖B_X‖_F / σ_max(C)``.
2. the direct-sum rank criterion (Sect. 3.2, dimension count of the direct sum; the "rank method" of the paper's
   ref. [34]): ``dim(X ∩ Y) = rank(C_X) + rank(C_Y) − rank(C)`` must be 0. Ranks by SVD.

Rank tolerance: a singular value counts when it exceeds ``rank_rtol · σ_max(C)`` (default rtol 1e-9, i.e. scaled
to the matrix); the same relative tolerance decides ``B_X = 0``. The report states the tolerance, σ_max, and the
rank gap (smallest kept / largest dropped singular value) so the user sees how clear the decision was.

Beyond the paper — solvable directions of a pair that is not solvable as a whole. Let N (m×p) be a basis of the left
null space of C (C^T N = 0). All multiplier vectors that give the same total reaction C^T λ differ by N ξ, so the
set of possible λ_X is λ_X* + range(N_X) (N_X: the pair's rows of N). The pair's rows are C_X = W^T J (W: the
pair's orthonormal constraint-wrench basis, pair frame), so λ_X are the components of the reaction wrench
w = W λ_X. A linear measurement e^T λ_X (a wrench component, e.g. the axial force of a bearing) is unique iff
e ⟂ range(N_X), i.e. e ∈ null(N_X^T). We report a basis of null(N_X^T) ("determined directions") and of
range(N_X) ("indeterminate directions"), both mapped to 6-vectors [Fx Fy Fz Mx My Mz] in the pair frame by W.
When C_X has full row rank, rank(N_X) = dim(X ∩ Y), which cross-checks the rank criterion once more.

Release candidates. A row i can be deleted without changing the motion iff N_i ≠ 0 (it is in the support of the left
null space). One admissible release set of exactly p rows (those left out of the independent rows that a
column-pivoted QR of C^T picks) is reported too; deleting it leaves a non-redundant model with the same kinematics.
The paper (Sect. 3.1, 4.4) warns that such a deletion sets those reactions to zero and is not physics.

Reactions for a state. With M ν̇ = F − h + C^T λ (eq. (10); λ_X = reaction wrench components on the child) and
C ν̇ = −Ċ ν (eq. (8), drives with zero prescribed acceleration), ν̇ is unique (eq. (13)); any λ solving the
consistent KKT system gives the unique parts: full λ_X for solvable pairs, e^T λ_X for determined directions of the
others. Indeterminate components are reported as ``None``, never as numbers.
"""

from __future__ import annotations

import logging

import numpy as np
import pinocchio as pin
import scipy.linalg

from vtm_dynamics.core.excerpt import excerpt
from vtm_dynamics.core.numerics import numerical_rank
from vtm_dynamics.core.reactions.absolute_coordinates import (
    AbsoluteConstraintMatrix,
    AbsoluteModel,
    absolute_dynamics,
    assemble_loops,
    body_twists,
    constraint_matrix,
    loops_closed,
)
from vtm_dynamics.core.reactions import sparse_solvability as sparse
from vtm_dynamics.core.reactions.row_basis import SPARSE_QR_HINT, SparseQRUnavailable
from vtm_dynamics.core.reactions.analysis_settings import (  # noqa: F401 - part of this module's interface
    DEFAULT_MAX_REACTION_BODIES,
    DEFAULT_MAX_SOLVABILITY_BODIES,
    DEFAULT_RANK_RTOL,
    METHODS,
)
from vtm_dynamics.core.reactions.model_limits import (  # noqa: F401 - part of this module's interface
    MAX_TREE_DEPTH,
    URDF_BYTES_PER_BODY,
    load_for_analysis,
)
from vtm_dynamics.core.reactions.solvability_report import (  # noqa: F401 - the report types: this module's interface
    PairReaction,
    PairSolvability,
    ReactionReport,
    SolvabilityError,
    SolvabilityReport,
    rounded_components,
    split_directions,
)


CROSS_CHECK_MAX_ROWS = 400  # the rank criterion costs one SVD per pair: O(pairs m n^2)
_LOG = logging.getLogger(__name__)
DENSE_MAX_ROWS = 400  # method "auto": the dense SVD path (with the rank cross-check) up to here, sparse above
DENSE_FALLBACK_ROWS = 3000  # ... and the dense path up to here if the sparse one needs the missing SuiteSparseQR


def qr_left_null_space(C: np.ndarray, r: int) -> tuple[np.ndarray, float]:
    """Q̄: last p = m − r columns of Q in the pivoted QR ``C E = Q R`` (paper eq. (21)), and max |R[r:, :]|."""
    Q, R, _ = scipy.linalg.qr(C, pivoting=True)
    tail = float(np.max(np.abs(R[r:]), initial=0.0))
    return Q[:, r:], tail


def analyze_constraint_matrix(
    C: AbsoluteConstraintMatrix, rank_rtol: float = DEFAULT_RANK_RTOL, cross_check: bool | None = None,
    model_name: str = "",
) -> SolvabilityReport:
    """Rank, redundancy, per-pair B_X test and rank criterion, solvable directions and a release set for C."""
    if not 0.0 < rank_rtol < 1.0:
        raise SolvabilityError(f"rank_rtol: must be in (0, 1), got {rank_rtol}")
    A = C.matrix
    m, n = A.shape
    if m == 0:
        s = np.zeros(0)
        U = np.zeros((0, 0))
    else:
        U, s, _ = np.linalg.svd(A, full_matrices=True)
    smax = float(s[0]) if s.size else 0.0
    tol = rank_rtol * smax
    r = int(np.sum(s > tol))
    p = m - r
    N = U[:, r:] if m else np.zeros((0, 0))
    Qbar, tail = qr_left_null_space(A, r) if m else (np.zeros((0, 0)), 0.0)
    if tail > 1e3 * max(tol, np.finfo(float).eps * smax):
        raise SolvabilityError(f"rank decision unclear: pivoted QR leaves |R[r:]| = {tail:.3g} above tolerance {tol:.3g}")
    if cross_check is None:
        cross_check = m <= CROSS_CHECK_MAX_ROWS
    hol = [i for pr in C.pairs if pr.holonomic for i in pr.rows]
    non = [i for pr in C.pairs if not pr.holonomic for i in pr.rows]
    releasable = np.linalg.norm(N, axis=1) > 1e-8 if p else np.zeros(m, dtype=bool)
    pairs = []
    for pr in C.pairs:
        rows = list(pr.rows)
        CX = A[rows]
        support = np.flatnonzero(np.any(CX != 0.0, axis=0))  # a pair touches at most two bodies
        B = CX[:, support].T @ Qbar[rows]  # the nonzero rows of B_X (eq. (27))
        qr_res = float(np.linalg.norm(B) / smax) if smax > 0 else 0.0
        qr_ok = qr_res <= rank_rtol * 10.0
        rank_x = numerical_rank(CX, atol=tol)
        NX = N[rows]
        indet, det = split_directions(NX)
        if cross_check:
            others = np.setdiff1d(np.arange(m), rows)
            dim_int: int | None = rank_x + numerical_rank(A[others], atol=tol) - r
        else:
            dim_int = None
        # the QR test, the rank criterion and rank(N_X) (= dim(X∩Y) when C_X has full row rank) must agree
        agree = dim_int is None or (
            (dim_int == 0) == qr_ok and (rank_x < len(rows) or indet.shape[1] == dim_int))
        W = pr.wrench_basis
        det_labels = tuple(pr.labels[int(np.argmax(np.abs(e)))] for e in det.T if np.sum(np.abs(e) > 1e-9) == 1)
        pairs.append(PairSolvability(
            name=pr.name, kind=pr.kind, type=pr.type, parent=pr.parent, child=pr.child, rows=pr.rows,
            labels=pr.labels, holonomic=pr.holonomic,
            solvable=bool(qr_ok and (dim_int is None or dim_int == 0)),
            qr_residual=qr_res, qr_solvable=bool(qr_ok), indeterminate_dimension=int(indet.shape[1]),
            rank_criterion_dimension=dim_int, criteria_agree=bool(agree), pair_rank=rank_x,
            determined_directions=tuple(rounded_components(W @ e) for e in det.T),
            indeterminate_directions=tuple(rounded_components(W @ e) for e in indet.T),
            determined_labels=det_labels,
            releasable_rows=tuple(pr.labels[i - pr.rows[0]] for i in rows if releasable[i]),
        ))
    release: list[tuple[str, str]] = []
    if p and m:
        _, piv = scipy.linalg.qr(A.T, pivoting=True, mode="r")
        owner = {i: (pr.name, pr.labels[i - pr.rows[0]]) for pr in C.pairs for i in pr.rows}
        release = [owner[int(i)] for i in sorted(piv[r:])]
    return SolvabilityReport(
        model=model_name, planar=C.planar, n_bodies=len(C.bodies), n_coordinates=n,
        m_holonomic=len(hol), h_nonholonomic=len(non),
        rank_holonomic=numerical_rank(A[hol], atol=tol) if non else r, rank_nonholonomic=numerical_rank(A[non], atol=tol),
        rank=r, redundancy=p, rank_rtol=rank_rtol, rank_tolerance=tol, sigma_max=smax,
        smallest_kept_singular_value=float(s[r - 1]) if r else 0.0,
        largest_dropped_singular_value=float(s[r]) if r < s.size else 0.0,
        closure_residual=C.closure_residual, cross_checked=bool(cross_check), pairs=tuple(pairs),
        free_pairs=C.free_pairs, release_set=tuple(release), q=None if C.q is None else tuple(float(x) for x in C.q),
    )


def _prepare(urdf: str | AbsoluteModel, planar: bool, q, assemble: bool,
             max_bodies: int = DEFAULT_MAX_SOLVABILITY_BODIES) -> tuple[AbsoluteModel, np.ndarray]:
    if isinstance(urdf, AbsoluteModel):
        model = urdf
    else:
        model = load_for_analysis(urdf, planar, max_bodies)
    q = None if q is None else np.asarray(q, dtype=float)
    if assemble and (q is not None or not loops_closed(model)):
        q = assemble_loops(model, q)
    return model, q  # None: the neutral configuration, assembled (or not to be assembled)


def analyze_solvability(
    urdf: str, planar: bool = False, q=None, rank_rtol: float = DEFAULT_RANK_RTOL, cross_check: bool | None = None,
    assemble: bool = True, *, max_bodies: int = DEFAULT_MAX_SOLVABILITY_BODIES, method: str = "auto",
) -> SolvabilityReport:
    """Solvability report for URDF XML **text** (never a path; files: ``urdf_extension.read_urdf_file``) at
    configuration ``q`` (Pinocchio order; default neutral).

    ``max_bodies`` caps the moving links, checked while parsing and before any matrix is built.
    With ``assemble`` the loop closures are first closed by Newton's method from ``q`` (driven joints held).
    ``cross_check`` (default: when the matrix has at most 400 rows) runs the direct-sum rank criterion per pair.
    ``method``: "dense" (SVD, the reference), "sparse" (:mod:`.sparse_solvability`, memory ~ nonzeros) or "auto"
    (dense up to ``DENSE_MAX_ROWS`` rows, sparse above; dense up to ``DENSE_FALLBACK_ROWS``, with a logged
    warning, where the sparse path would need the optional SuiteSparseQR that is not installed). Both give the
    same verdicts wherever both run.
    Raises a ValueError subclass with a one-line message on bad input.
    """
    if method not in METHODS:
        raise SolvabilityError(f"method: must be one of {', '.join(METHODS)}, got {str(method)[:20]!r}")
    model, q = _prepare(urdf, planar, q, assemble, max_bodies)
    return analyze_model(model, q, rank_rtol=rank_rtol, cross_check=cross_check, method=method)


def analyze_model(model: AbsoluteModel, q, rank_rtol: float = DEFAULT_RANK_RTOL, cross_check: bool | None = None,
                  method: str = "auto") -> SolvabilityReport:
    """Solvability report of a loaded model at an (assembled) configuration ``q``; ``method`` as above."""
    Cs = sparse.sparse_constraint_matrix(model, q) if method != "dense" else None
    if method == "sparse" or (method == "auto" and Cs is not None and Cs.shape[0] > DENSE_MAX_ROWS):
        try:
            return sparse.analyze_sparse_constraint_matrix(Cs, rank_rtol=rank_rtol, model_name=model.name)
        except SparseQRUnavailable:
            if method == "sparse" or Cs.shape[0] > DENSE_FALLBACK_ROWS:
                raise
            _LOG.warning("solvability: the sparse path needs the optional SuiteSparseQR for %s (%s); using the "
                         "dense path (%d rows)", excerpt(model.name), SPARSE_QR_HINT, Cs.shape[0])
    C = constraint_matrix(model, q)
    return analyze_constraint_matrix(C, rank_rtol=rank_rtol, cross_check=cross_check, model_name=model.name)


def unique_reactions(
    urdf: str | AbsoluteModel, planar: bool = False, q=None, v=None, gravity=(0.0, 0.0, -9.81),
    applied=None, rank_rtol: float = DEFAULT_RANK_RTOL, report: SolvabilityReport | None = None, *,
    max_bodies: int = DEFAULT_MAX_REACTION_BODIES, drive_accelerations: dict[str, float] | None = None,
) -> ReactionReport:
    """Unique reaction values at the state (q, v) under gravity [m/s²] and ``applied`` generalized forces.

    ``v``: Pinocchio joint velocities (must satisfy the loop closures, knife edges and drives: checked).
    ``applied``: optional forces in absolute coordinates (per body [F; M about the link origin], world axes).
    Driving constraints prescribe their joint's rate, so their rows are exempt from the velocity check (a driven
    joint may move); their prescribed accelerations d̈ [m/s², rad/s²] come from ``drive_accelerations`` (by
    driving-constraint name; default zero). Solves the consistent, singular KKT system
    [[M, −C^T], [C, 0]] [ν̇; λ] = [F − h; −Ċ ν] (Wojtyra & Frączek 2013, eq. (11)) by least squares; Ċ ν by a
    central difference of C along the motion. Returns values only where unique (module docstring).
    """
    model, q = _prepare(urdf, planar, q, assemble=False, max_bodies=max_bodies)
    pm = model.pin_model  # velocities and dynamics need Pinocchio's model (and q as a vector)
    q = pin.neutral(pm) if q is None else q
    C = constraint_matrix(model, q)
    if report is None:
        report = analyze_constraint_matrix(C, rank_rtol=rank_rtol, model_name=model.name)
    v = np.zeros(pm.nv) if v is None else np.asarray(v, dtype=float)
    nu = body_twists(model, q, v)
    A = C.matrix
    scale = max(1.0, float(np.linalg.norm(A, 2)) * max(1.0, float(np.linalg.norm(nu))))
    driven = {pr.name: pr.rows[0] for pr in C.pairs if pr.kind == "driving_constraint"}
    checked = np.setdiff1d(np.arange(A.shape[0]), list(driven.values()))
    if checked.size and np.max(np.abs(A[checked] @ nu)) > 1e-8 * scale:
        raise SolvabilityError(
            f"v: the velocities violate the constraints (|C nu| = {np.max(np.abs(A[checked] @ nu)):.3g})")
    h = 1e-6
    if np.any(v):
        Cp = constraint_matrix(model, pin.integrate(pm, q, v * h)).matrix
        Cm = constraint_matrix(model, pin.integrate(pm, q, -v * h)).matrix
        gamma = -((Cp - Cm) / (2 * h)) @ nu
    else:
        gamma = np.zeros(A.shape[0])
    for name, value in (drive_accelerations or {}).items():
        if name not in driven:
            raise SolvabilityError(f"drive_accelerations: {str(name)[:40]!r} is not a driving constraint")
        gamma[driven[name]] += float(value)
    M, rhs = absolute_dynamics(model, q, nu, gravity)
    if applied is not None:
        applied = np.asarray(applied, dtype=float).reshape(-1)
        if applied.shape[0] != model.n_coordinates:
            raise SolvabilityError(f"applied: expected {model.n_coordinates} numbers, got {applied.shape[0]}")
        rhs = rhs + applied
    n, m = model.n_coordinates, A.shape[0]
    K = np.block([[M, -A.T], [A, np.zeros((m, m))]])
    sol = np.linalg.lstsq(K, np.concatenate([rhs, gamma]), rcond=None)[0]
    lam = sol[n:]
    if np.linalg.norm(K @ sol - np.concatenate([rhs, gamma])) > 1e-6 * max(1.0, np.linalg.norm(rhs)):
        raise SolvabilityError("the equations of motion have no solution at this state (inconsistent constraints)")
    out, mask, W = [], unique_components(report, C), {pr.name: pr.wrench_basis for pr in C.pairs}
    for ps in report.pairs:
        lx = lam[list(ps.rows)]
        values = tuple(float((W[ps.name].T @ np.asarray(d)) @ lx) for d in ps.determined_directions)
        out.append(PairReaction(ps.name, ps.solvable, ps.labels, tuple(float(x) if ok else None for x, ok in
                                                                       zip(lx, mask[ps.name])), values))
    return ReactionReport(tuple(out), tuple(float(x) for x in sol[:n]))


def unique_components(report: SolvabilityReport, C: AbsoluteConstraintMatrix) -> dict[str, tuple[bool, ...]]:
    """Per pair, which of its components (rows of C: ``Fx``, ``Mz``, ...) are unique: all of a solvable pair, else
    those whose row lies in the span of the pair's determined directions (Wojtyra & Frączek 2013, Sect. 3.3)."""
    out, W = {}, {pr.name: pr.wrench_basis for pr in C.pairs}
    for ps in report.pairs:
        det = np.array([W[ps.name].T @ np.asarray(d) for d in ps.determined_directions]).reshape(-1, len(ps.rows))
        out[ps.name] = tuple(bool(ps.solvable or (det.size and np.linalg.norm(e - det.T @ (det @ e)) < 1e-8))
                             for e in np.eye(len(ps.rows)))
    return out
