"""What a solvability analysis reports, and its errors: the types every reactions module shares.

Wojtyra & Frączek 2013 (Multibody Syst Dyn 30:153-171): per kinematic pair X the verdict "f_X is unique"
(Z = X ⊕ Y, Sect. 3.2) with the QR test's residual ‖B_X‖_F / σ_max (eq. (27)) and the rank criterion's dim(X ∩ Y);
beyond the paper, the determined and indeterminate wrench directions of a pair that is not solvable as a whole
(null(N_X^T) and range(N_X), N the left null space of C) and the rows that can be released. The dense path
(:mod:`~vtm_dynamics.core.reactions.solvability`) and the sparse one
(:mod:`~vtm_dynamics.core.reactions.sparse_solvability`) both fill :class:`SolvabilityReport`; reactions at a state
are :class:`ReactionReport`. :func:`split_directions` and :func:`rounded_components` turn the rows N_X of a pair into
those reported directions, the same way on both paths. Units: N, N m; directions are 6-vectors
[Fx Fy Fz Mx My Mz] in the pair frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vtm_dynamics.core.reactions.absolute_coordinates import AbsoluteModelError, preferred_basis
from vtm_dynamics.core.reactions.analysis_settings import DEFAULT_RANK_RTOL  # noqa: F401 - the reports' default


class SolvabilityError(AbsoluteModelError):
    """Bad input to the solvability analysis (state of the wrong size, velocities violating the constraints, ...)."""


@dataclass(frozen=True)
class PairSolvability:
    """Verdict for one kinematic pair.

    ``solvable``: the pair's reaction is unique (both tests agree on it; if they disagree, False and
    ``criteria_agree`` False). ``qr_residual``: ‖B_X‖_F / σ_max(C) (paper eq. (27)). ``rank_criterion``:
    dim(X∩Y) by ranks (None when skipped for size). ``determined_directions`` / ``indeterminate_directions``:
    6-vectors [Fx Fy Fz Mx My Mz] in the pair frame (see module docstring). ``releasable_rows``: labels of this
    pair's rows that can each be deleted without changing the kinematics.
    """

    name: str
    kind: str
    type: str
    parent: str
    child: str
    rows: tuple[int, ...]
    labels: tuple[str, ...]
    holonomic: bool
    solvable: bool
    qr_residual: float
    qr_solvable: bool
    indeterminate_dimension: int
    rank_criterion_dimension: int | None
    criteria_agree: bool
    pair_rank: int
    determined_directions: tuple[tuple[float, ...], ...]
    indeterminate_directions: tuple[tuple[float, ...], ...]
    determined_labels: tuple[str, ...]
    releasable_rows: tuple[str, ...]


@dataclass(frozen=True)
class SolvabilityReport:
    """Solvability analysis of one model at one configuration (Wojtyra & Frączek 2013, Sect. 3-4).

    m: holonomic rows (joints, loop closures, drives), h: Pfaffian rows (knife edges), n: coordinates,
    rank_holonomic = rank(Φ_q), rank_nonholonomic = rank(Ψ), rank = rank(C), redundancy p = m + h − rank.
    rank_tolerance = rank_rtol · sigma_max (absolute). release_set: (pair, label) rows whose deletion removes the
    redundancy. ``pairs`` excludes pairs with no rows, listed in ``free_pairs``.
    """

    model: str
    planar: bool
    n_bodies: int
    n_coordinates: int
    m_holonomic: int
    h_nonholonomic: int
    rank_holonomic: int
    rank_nonholonomic: int
    rank: int
    redundancy: int
    rank_rtol: float
    rank_tolerance: float
    sigma_max: float
    smallest_kept_singular_value: float
    largest_dropped_singular_value: float
    closure_residual: float
    cross_checked: bool
    pairs: tuple[PairSolvability, ...]
    free_pairs: tuple[str, ...]
    release_set: tuple[tuple[str, str], ...]
    q: tuple[float, ...] | None  # Pinocchio order [rad, m]; None: the neutral configuration

    def pair(self, name: str) -> PairSolvability:
        """The verdict of the pair called ``name``."""
        for p in self.pairs:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def unsolvable(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.pairs if not p.solvable)


@dataclass(frozen=True)
class PairReaction:
    """Reaction of one pair at one state: components along its row labels [N, N m] on the child, pair frame.

    ``components[i]`` is None when that component is not unique. ``determined_values`` are the values of the
    pair's determined directions (``PairSolvability.determined_directions``), in the same order.
    """

    name: str
    solvable: bool
    labels: tuple[str, ...]
    components: tuple[float | None, ...]
    determined_values: tuple[float, ...]


@dataclass(frozen=True)
class ReactionReport:
    """Unique reactions at a state; ``accelerations`` are the (unique) absolute accelerations ν̇ [m/s², rad/s²]."""

    pairs: tuple[PairReaction, ...]
    accelerations: tuple[float, ...] = field(repr=False)

    def pair(self, name: str) -> PairReaction:
        for p in self.pairs:
            if p.name == name:
                return p
        raise KeyError(name)


def split_directions(NX: np.ndarray, tol: float = 1e-8) -> tuple[np.ndarray, np.ndarray]:
    """Bases of range(N_X) (indeterminate) and null(N_X^T) (determined) in the pair's row coordinates.

    N has orthonormal columns, so its entries are O(1) and an absolute tolerance is scale-free.
    """
    k = NX.shape[0]
    if NX.size == 0:
        return np.zeros((k, 0)), np.eye(k)
    U, s, _ = np.linalg.svd(NX, full_matrices=True)
    d = int(np.sum(s > tol))
    if d == k:  # the whole row space: every coordinate axis lies in it, which preferred_basis would pick
        return np.eye(k), np.zeros((k, 0))
    indet = preferred_basis(U[:, :d], tol=1e-8) if d else np.zeros((k, 0))
    det = preferred_basis(U[:, d:], tol=1e-8) if d < k else np.zeros((k, 0))
    return indet, det


def rounded_components(x: np.ndarray) -> tuple[float, ...]:
    """Components rounded to 12 decimals, −0.0 as 0.0 (numpy's rounding, vectorised: one call per direction)."""
    return tuple((np.round(np.asarray(x, dtype=float), 12) + 0.0).tolist())
