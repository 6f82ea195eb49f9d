"""Loading a large model computes each pair's constraint wrench basis once per distinct (type, axis, mode).

The basis comes from an SVD (orthogonal complement of the allowed twists); a 10,000-body comb has 20,000 pairs of
one type and axis. Errors still name the pair that caused them.
"""

from __future__ import annotations

import pytest

import vtm_dynamics.core.reactions.absolute_coordinates as ac
from vtm_dynamics.core.reactions.mechanism_families import comb_urdf


@pytest.fixture()
def counted(monkeypatch):
    calls = []
    original = ac.orthogonal_complement

    def counting(T):
        calls.append(T.shape)
        return original(T)

    monkeypatch.setattr(ac, "orthogonal_complement", counting)
    return calls


def test_loading_a_comb_computes_the_revolute_basis_at_most_once(counted):
    model = ac.load_absolute_model(comb_urdf(60), planar=True)
    assert len(model.pairs) == 120  # 60 cranks, A0, 59 closures
    assert len(counted) <= 1  # one (revolute, z, planar) basis; zero if an earlier load cached it


def test_closure_residuals_reuse_the_closure_basis(counted):
    model = ac.load_absolute_model(comb_urdf(60), planar=False)
    counted.clear()
    ac.closure_residuals(model)
    ac.closure_residuals(model)
    assert len(counted) <= 1


def test_cached_bases_cannot_be_changed_by_a_caller():
    model = ac.load_absolute_model(comb_urdf(3), planar=True)
    with pytest.raises(ValueError):
        model.pairs[0].wrench_basis[0, 0] = 5.0


def test_a_non_planar_pair_still_names_itself_when_its_basis_is_cached():
    # A1 (the first closure) about a tilted axis: its wrenches mix in-plane and out-of-plane components
    text = comb_urdf(3).replace('<axis xyz="0 0 1"/></loop_closure>', '<axis xyz="1 0 1"/></loop_closure>', 1)
    for _ in range(2):
        with pytest.raises(ac.AbsoluteModelError, match="A1"):
            ac.load_absolute_model(text, planar=True)
