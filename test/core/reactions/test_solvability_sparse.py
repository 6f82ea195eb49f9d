"""The sparse solvability path agrees with the dense one (the reference) and scales with the nonzeros of C.

Independent formulations: the dense path decides by a full SVD and the paper's pivoted QR of C (Wojtyra &
Frączek 2013, eq. (21)-(27)); the sparse path by SuiteSparseQR of C^T and a random sketch of the left null space.
Expected values come from the dense path or from the paper, never from the sparse code itself.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from vtm_dynamics.core.reactions.absolute_coordinates import assemble_loops, constraint_matrix, load_absolute_model
from vtm_dynamics.core.reactions.mechanism_families import comb_urdf, random_mechanism_urdf
from vtm_dynamics.core.reactions.solvability import analyze_constraint_matrix, analyze_solvability
from vtm_dynamics.core.reactions.row_basis import largest_singular_value, row_basis
from vtm_dynamics.core.reactions.sparse_solvability import analyze_sparse_constraint_matrix, sparse_constraint_matrix
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

URDF = Path(__file__).resolve().parents[3] / "urdf"
SHIPPED = [(f.stem, planar) for f in sorted(URDF.glob("*.urdf")) for planar in (False, True)]


def _projector(directions) -> np.ndarray:
    if not directions:
        return np.zeros((6, 6))
    V = np.array(directions).T
    return V @ np.linalg.pinv(V)


def assert_same_verdicts(dense, sparse) -> None:
    assert (sparse.rank, sparse.redundancy) == (dense.rank, dense.redundancy)
    assert (sparse.rank_holonomic, sparse.rank_nonholonomic) == (dense.rank_holonomic, dense.rank_nonholonomic)
    assert [p.name for p in sparse.pairs] == [p.name for p in dense.pairs]
    for d, s in zip(dense.pairs, sparse.pairs):
        assert s.solvable == d.solvable, d.name
        assert s.indeterminate_dimension == d.indeterminate_dimension, d.name
        assert s.releasable_rows == d.releasable_rows, d.name
        assert s.determined_labels == d.determined_labels, d.name
        # a basis of the determined directions is not unique when they combine components: compare the subspaces
        assert np.allclose(_projector(s.determined_directions), _projector(d.determined_directions), atol=1e-6)


def _both(text: str, planar: bool, assemble: bool = True):
    model = load_absolute_model(text, planar=planar)
    q = pin.neutral(model.pin_model)
    if assemble:
        q = assemble_loops(model, q)
    return analyze_constraint_matrix(constraint_matrix(model, q)), analyze_sparse_constraint_matrix(
        sparse_constraint_matrix(model, q)), model, q


def test_the_sparse_matrix_is_the_dense_matrix():
    model = load_absolute_model(read_urdf_file(str(URDF / "mobile_robot_knife_edges.urdf")), planar=True)
    q = assemble_loops(model, pin.neutral(model.pin_model))
    assert np.array_equal(sparse_constraint_matrix(model, q).matrix.toarray(), constraint_matrix(model, q).matrix)


@pytest.mark.parametrize("name,planar", SHIPPED)
def test_sparse_and_dense_verdicts_agree_on_every_shipped_model(name, planar):
    text = read_urdf_file(str(URDF / f"{name}.urdf"))
    try:
        dense, sparse, _, _ = _both(text, planar)
    except ValueError as err:  # e.g. a spatial model that is not planar: both paths share the loader
        pytest.fail(f"{name} planar={planar}: {err}") if "not planar" not in str(err) else None
        return
    assert_same_verdicts(dense, sparse)


def test_the_paper_mobile_robot_by_the_sparse_path():
    # Wojtyra & Frączek 2013, eq. (35) and Sect. 4.2: rank(Phi_q) = 17, rank(Psi) = 4, rank(C) = 20, p = 2
    report = analyze_solvability(read_urdf_file(str(URDF / "mobile_robot_knife_edges.urdf")), planar=True,
                                 method="sparse")
    assert (report.rank_holonomic, report.rank_nonholonomic, report.rank, report.redundancy) == (17, 4, 20, 2)
    assert set(report.unsolvable) == {"B", "C", "W1", "W2", "W3", "W4"}
    assert report.pair("B").determined_labels == ("Fx",)


def test_sparse_and_dense_agree_on_240_random_mechanisms():
    # planar and spatial, 1-14 bodies, revolute/prismatic trees with revolute/prismatic/spherical/fixed closures
    # and knife edges: a wide spread of redundancies, including none
    redundancies = set()
    for seed in range(240):
        planar = seed % 2 == 0
        dense, sparse, _, _ = _both(random_mechanism_urdf(1 + seed % 14, seed, planar=planar), planar, assemble=False)
        assert dense.closure_residual < 1e-12
        assert_same_verdicts(dense, sparse)
        redundancies.add(dense.redundancy)
    assert len(redundancies) > 8  # the family is not degenerate


def test_the_release_set_removes_exactly_the_redundancy():
    dense, sparse, model, q = _both(comb_urdf(12), True, assemble=False)
    A = constraint_matrix(model, q).matrix
    rows = {(pr.name, lab): i for pr in constraint_matrix(model, q).pairs for i, lab in zip(pr.rows, pr.labels)}
    released = [rows[x] for x in sparse.release_set]
    assert len(released) == dense.redundancy == 10  # k - 2 for a planar comb of k cranks
    kept = np.delete(A, released, axis=0)
    assert np.linalg.matrix_rank(kept) == kept.shape[0] == dense.rank


def test_auto_uses_the_sparse_path_above_the_dense_limit_with_the_same_verdicts():
    text = comb_urdf(120)  # 480 rows planar
    sparse = analyze_solvability(text, planar=True, max_bodies=200)
    dense = analyze_solvability(text, planar=True, max_bodies=200, method="dense", cross_check=False)
    assert not sparse.cross_checked and sparse.pairs[0].rank_criterion_dimension is None
    assert_same_verdicts(dense, sparse)
    assert sparse.redundancy == 118


def test_row_basis_finds_an_exactly_dependent_row():
    import scipy.sparse

    rng = np.random.default_rng(3)
    B = rng.standard_normal((5, 9))
    A = scipy.sparse.csr_matrix(np.vstack([B, B[1] - 2 * B[3], rng.standard_normal(9)]))
    basis = row_basis(A, 1e-9 * largest_singular_value(A))
    assert basis.rank == 6 and basis.dependent.size == 1


def test_an_unknown_method_is_one_line():
    with pytest.raises(ValueError, match="method: must be one of auto, dense, sparse"):
        analyze_solvability(comb_urdf(3), planar=True, method="fast")
