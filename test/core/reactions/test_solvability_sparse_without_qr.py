"""The sparse path without the optional, GPL-licensed SuiteSparseQR (``pyspqr``).

The hub and square selections need only scipy; the QR route is the fallback. Without the wheel a model they
decide gets the dense path's verdicts, a model that would need the QR route gets one line naming the extra,
and method "auto" falls back to the dense path where that is affordable. The wheel is hidden by making its
import fail (``sys.modules[name] = None``), as on a machine without it.
"""

from __future__ import annotations

import logging
import sys

import pinocchio as pin
import pytest

from test.core.reactions.test_solvability_sparse import assert_same_verdicts
from vtm_dynamics.core.reactions import solvability
from vtm_dynamics.core.reactions import sparse_solvability
from vtm_dynamics.core.reactions.absolute_coordinates import constraint_matrix
from vtm_dynamics.core.reactions.mechanism_families import comb_urdf, random_mechanism_urdf
from vtm_dynamics.core.reactions.solvability import analyze_constraint_matrix, analyze_model, load_for_analysis
from vtm_dynamics.core.reactions.row_basis import SparseQRUnavailable
from vtm_dynamics.core.reactions.sparse_solvability import analyze_sparse_constraint_matrix, sparse_constraint_matrix


@pytest.fixture
def without_sparse_qr(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspqr", None)  # `import pyspqr` raises ImportError


@pytest.fixture
def square_selection_fails(monkeypatch):
    monkeypatch.setattr(sparse_solvability, "square_row_basis", lambda *args, **kwargs: None)


def _model(bodies: int, seed: int):
    model = load_for_analysis(random_mechanism_urdf(bodies, seed, planar=True), True, bodies + 1)
    return model, pin.neutral(model.pin_model)


def test_a_model_the_square_selection_decides_needs_no_sparse_qr(without_sparse_qr):
    model, q = _model(200, 5)
    dense = analyze_constraint_matrix(constraint_matrix(model, q), cross_check=False)
    assert_same_verdicts(dense, analyze_sparse_constraint_matrix(sparse_constraint_matrix(model, q)))


def test_a_model_with_a_hub_body_is_decided_by_the_square_selection_when_the_hub_route_needs_the_qr(
        without_sparse_qr):
    model = load_for_analysis(comb_urdf(99), True, 101)  # 99 cranks under one coupler: a hub of 4 x 99 rows
    q = pin.neutral(model.pin_model)
    dense = analyze_constraint_matrix(constraint_matrix(model, q), cross_check=False)
    assert_same_verdicts(dense, analyze_sparse_constraint_matrix(sparse_constraint_matrix(model, q),
                                                                 hub_min_nonzeros=64))


def test_a_model_that_needs_the_qr_route_gets_one_line_naming_the_extra(without_sparse_qr, square_selection_fails):
    model, q = _model(200, 5)
    with pytest.raises(SparseQRUnavailable) as err:
        analyze_sparse_constraint_matrix(sparse_constraint_matrix(model, q))
    message = str(err.value)
    assert "\n" not in message and message.startswith("rank decision unclear")
    assert "vtm_dynamics[sparse-qr]" in message and "GPL" in message


def test_auto_uses_the_dense_path_with_a_warning_where_the_sparse_one_would_need_it(
        without_sparse_qr, square_selection_fails, caplog, monkeypatch):
    model, q = _model(200, 5)
    assert sparse_constraint_matrix(model, q).shape[0] > 400  # the case: "auto" takes the sparse path
    dense_calls = []
    dense_path = solvability.analyze_constraint_matrix
    monkeypatch.setattr(solvability, "analyze_constraint_matrix",
                        lambda *args, **kwargs: dense_calls.append(1) or dense_path(*args, **kwargs))
    with caplog.at_level(logging.WARNING, logger="vtm_dynamics"):
        report = analyze_model(model, q, method="auto")
    assert dense_calls == [1]
    assert_same_verdicts(analyze_constraint_matrix(constraint_matrix(model, q), cross_check=False), report)
    assert any("SuiteSparseQR" in r.getMessage() for r in caplog.records)
    with pytest.raises(SparseQRUnavailable):
        analyze_model(model, q, method="sparse")  # asked for by name: no silent switch
