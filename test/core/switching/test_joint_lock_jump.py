"""The closed-form joint-lock jump (Müller 2026, eq. (22) with unit rows) against the general transition of
eqs. (22)/(24), (32), (37), on random SPD mass matrices and on the UR5; and the E-stop's abrupt lock uses it."""

import os

import numpy as np
import pytest

from vtm_dynamics.core.switching import transitions as switching
from vtm_dynamics.core.switching.transitions import SwitchingError, joint_lock_jump, transition

GENERAL = ("kkt", "redundant", "minimal")


def _random_spd(rng, n):
    """A random SPD matrix with condition number up to ~1e3 (mass matrices of arms are in this range)."""
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (Q * rng.uniform(0.05, 50.0, size=n)) @ Q.T


def _random_sets(rng, n):
    """Disjoint sorted (held, locking) velocity index sets, locking non-empty."""
    perm = rng.permutation(n)
    n_lock = int(rng.integers(1, n + 1))
    n_held = int(rng.integers(0, n - n_lock + 1))
    return np.sort(perm[n_lock:n_lock + n_held]), np.sort(perm[:n_lock])


def _check_against_general(M, held, locking, v):
    nv = M.shape[0]
    jump = joint_lock_jump(M, held, locking, v)
    eye = np.eye(nv)
    scale = max(1.0, float(np.max(np.abs(v))))
    imp_scale = max(1.0, float(np.max(np.abs(M @ v))))
    L = np.union1d(held, locking)
    np.testing.assert_array_equal(jump.locked, L)
    assert np.all(jump.v_plus[L] == 0.0)
    for method in GENERAL:
        general = transition(M, eye[held], eye[locking], v, method=method)
        np.testing.assert_allclose(jump.v_plus, general.v_plus, rtol=0, atol=1e-12 * scale)
        # Lambda of the activated rows (same in all three methods), at their places in L'
        pos = np.searchsorted(L, locking)
        np.testing.assert_allclose(jump.impulses[pos], general.impulses, rtol=0, atol=1e-12 * imp_scale)
        if method == "kkt" and held.size:  # Lambda of the persistent rows from the whole-stack KKT solve
            np.testing.assert_allclose(jump.impulses[np.searchsorted(L, held)], general.persistent_impulses,
                                       rtol=0, atol=1e-12 * imp_scale)
        assert jump.energy_loss == pytest.approx(general.energy_loss, rel=1e-12, abs=1e-12 * imp_scale * scale)
    # the momentum of the free rows is conserved (eq. (21) with U = 0) and the jump dissipates
    F = np.setdiff1d(np.arange(nv), L)
    np.testing.assert_allclose((M @ jump.dv)[F], 0.0, atol=1e-12 * imp_scale)
    assert jump.energy_loss >= -1e-12 * imp_scale * scale


@pytest.mark.parametrize("seed", range(40))
def test_closed_form_equals_eqs_22_32_37_on_random_spd_mass_matrices(seed):
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(1, 9))
    M = _random_spd(rng, n)
    held, locking = _random_sets(rng, n)
    v = rng.normal(scale=2.0, size=n)
    v[held] = 0.0  # joints already held are at rest
    _check_against_general(M, held, locking, v)


@pytest.mark.parametrize("seed", range(10))
def test_closed_form_equals_eqs_22_32_37_on_the_ur5(ur5, seed):
    rng = np.random.default_rng(2000 + seed)
    q = ur5.random_configuration(rng)
    M = ur5.mass_matrix(q)
    held, locking = _random_sets(rng, ur5.nv)
    v = rng.normal(scale=1.5, size=ur5.nv)
    v[held] = 0.0
    _check_against_general(M, held, locking, v)


def test_general_methods_through_the_same_function_give_exact_zeros_in_the_locked_rows(ur5, rng):
    q = ur5.random_configuration(rng)
    M = ur5.mass_matrix(q)
    v = rng.normal(size=ur5.nv)
    v[[1]] = 0.0
    closed = joint_lock_jump(M, np.array([1]), np.array([2, 4]), v)
    for method in GENERAL:
        jump = joint_lock_jump(M, np.array([1]), np.array([2, 4]), v, method=method)
        assert np.all(jump.v_plus[[1, 2, 4]] == 0.0)
        np.testing.assert_allclose(jump.v_plus, closed.v_plus, atol=1e-12)


def test_locking_every_joint_stops_all_and_loses_all_kinetic_energy(rng):
    M = _random_spd(rng, 4)
    v = rng.normal(size=4)
    jump = joint_lock_jump(M, np.zeros(0, dtype=int), np.arange(4), v)
    assert np.all(jump.v_plus == 0.0)
    assert jump.energy_loss == pytest.approx(0.5 * v @ M @ v, rel=1e-14)
    np.testing.assert_allclose(jump.impulses, M @ v, rtol=1e-14)  # Lambda = -(M dv) = M v-


def test_a_joint_named_twice_locks_once_with_the_momentum_of_the_free_rows_conserved():
    """Locking [1, 1] is locking joint 1: v+_1 = 0 and the free rows' momentum M v is unchanged (eq. (21), U = 0),
    so the kinetic energy can only fall. Counting the repeated column twice gave free rows whose momentum changed
    by -0.64 and -0.26 N m s and an energy loss of 2.06 J instead of 1.74 J."""
    M = np.array([[2.0, 0.5, 0.2], [0.5, 1.0, 0.1], [0.2, 0.1, 0.5]])
    v = np.array([1.0, -2.0, 0.5])
    free = np.array([0, 2])
    for method in ("closed_form",) + GENERAL:
        jump = joint_lock_jump(M, np.zeros(0, dtype=int), np.array([1, 1]), v, method=method)
        assert jump.v_plus[1] == 0.0
        np.testing.assert_array_equal(jump.locked, [1])
        np.testing.assert_allclose((M @ (jump.v_plus - v))[free], 0.0, atol=1e-12)
        assert jump.energy_loss == pytest.approx(0.5 * v @ M @ v - 0.5 * jump.v_plus @ M @ jump.v_plus, rel=1e-12)
        assert jump.energy_loss >= 0.0


def test_moving_held_rows_and_wrong_sizes_are_refused(rng):
    M = _random_spd(rng, 3)
    with pytest.raises(SwitchingError, match=r"^v_minus:"):
        joint_lock_jump(M, np.array([0]), np.array([1]), np.array([0.1, 1.0, 2.0]))
    with pytest.raises(SwitchingError, match=r"^v_minus:"):
        joint_lock_jump(M, np.zeros(0, dtype=int), np.array([1]), np.ones(4))


def test_the_estop_abrupt_lock_uses_the_one_home_of_the_jump(ur5, monkeypatch):
    """The E-stop has no second copy of eq. (22): its lock event's jump is switching.joint_lock_jump's."""
    from core_testdata import REPO
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.estop import LockEvent, StopSettings, predict_stop

    brakes = brakes_from_config(ur5, os.path.join(REPO, "config", "ur5_brakes.yaml"))  # engage after 10 ms
    q = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
    v = np.array([2.0, -2.5, 2.8, 1.5, -2.0, 3.0])
    calls = []
    real = switching.joint_lock_jump

    def spy(M, held, locking, v_minus, method="closed_form"):
        calls.append((held.tolist(), locking.tolist(), method))
        return real(M, held, locking, v_minus, method)

    monkeypatch.setattr(switching, "joint_lock_jump", spy)
    p = predict_stop(ur5, brakes, q, v, lock_events=[LockEvent(0.005, "elbow_joint")],
                     settings=StopSettings(t_max=0.05))
    assert calls == [([], [2], "closed_form")]
    lock = [e for e in p.events if e.kind == "lock"][0]
    M = ur5.mass_matrix(lock.q) + np.diag(brakes.armature)  # the shipped brakes reflect rotor inertia
    expected = real(M, np.zeros(0, dtype=int), np.array([2]), lock.v_minus)
    np.testing.assert_allclose(lock.v_plus, expected.v_plus, rtol=0, atol=1e-13)
    np.testing.assert_allclose(lock.impulses, expected.impulses, rtol=1e-13)


def test_an_abrupt_lock_gives_each_joint_its_own_capacity_when_one_is_already_held(ur5):
    """Locking [elbow, wrist_2] while the elbow is already held: the wrist gets the wrist's capacity."""
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.estop import StopSettings
    from vtm_dynamics.core.estop.event_loop import BrakingEngine

    brakes = brakes_from_config(ur5, {"brakes": {"joints": {n: {"sliding_torque": 10.0} for n in ur5.joint_names}}})
    engine = BrakingEngine(ur5, brakes, StopSettings())
    q = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
    v = np.array([2.0, -2.5, 2.8, 1.5, -2.0, 3.0])
    v = engine._abrupt_lock(0.0, q, v, np.array([2]), np.array([150.0]))
    engine._abrupt_lock(0.0, q, v, np.array([2, 4]), np.array([150.0, 12.0]))
    assert engine.cap[2] == 150.0 and engine.cap[4] == 12.0
