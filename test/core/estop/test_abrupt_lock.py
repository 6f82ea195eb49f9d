"""Abrupt locks (pawls, lock events; Müller 2026, eq. (22)) and the capacity they hold with, in both engines: a
lock's capacity is its own, beside the brake's (which rises with the brake torque), whether the brake already holds
the joint or not."""

import math

import numpy as np
import pytest

from vtm_dynamics.core.estop import LockEvent, StopSettings, predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config

ENGINES = ("compiled", "python")
STRONG = {"sliding_torque": 9000.0, "holding_torque": 9000.0}
HORIZONTAL = np.array([math.pi / 2, 0.0, 0.0])  # the three bars stretched horizontally


def planar(robot, joint3, joint1=STRONG, joint2=STRONG):
    return brakes_from_config(robot, {"brakes": {"joints": {"joint1": joint1, "joint2": joint2, "joint3": joint3}}})


def held_after(p, joint, time):
    """Whether the joint is held in every sample after ``time`` [s]."""
    return bool(np.all(p.locked[p.t > time, joint]))


def released(p, name):
    return [e.time for e in p.events if e.kind == "release" and name in e.joints]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("pawl_margin", [1.05, 0.95])
def test_a_pawl_holds_with_its_own_capacity_while_the_brake_torque_still_rises(planar_3r, engine, pawl_margin):
    """Joint 3 at rest under its gravity load; its brake engages at 0 with a 0.5 s rise (holding 700 N m at the end)
    and its pawl locks at 2 ms with a capacity of 1.05 (holds) or 0.95 (yields) times the load: early in the rise
    the capacity is the pawl's, not r(t) x the brake's holding torque (0.4 % of it at 2 ms)."""
    load = abs(planar_3r.gravity_torques(HORIZONTAL)[2])
    pawl = pawl_margin * load
    assert pawl < 700.0
    brakes = planar(planar_3r, {"sliding_torque": 100.0, "holding_torque": 700.0, "engage_delay": 0.0,
                                "rise_time": 0.5, "pawl_delay": 0.002, "pawl_holding_torque": pawl})
    p = predict_stop(planar_3r, brakes, HORIZONTAL, np.zeros(3), settings=StopSettings(engine=engine))
    lock = [e for e in p.events if e.kind == "lock"]
    assert [e.time for e in lock] == pytest.approx([0.002], abs=1e-12) and lock[0].joints == ("joint3",)
    if pawl_margin > 1.0:
        assert released(p, "joint3") == []
        assert held_after(p, 2, 0.002) and p.stopped
        assert np.all(p.q[p.t >= 0.002, 2] == lock[0].q[2])  # it stays at its lock angle
    else:
        assert released(p, "joint3") == pytest.approx([0.002], abs=1e-12)  # the pawl alone cannot hold it


def pawl_after_brake(robot, pawl_delay=None):
    """Joint 1 swings (3 rad/s) until its brake engages at 50 ms; joint 3's brake (700 N m, too weak for the swing's
    reaction at 50 ms) holds it from 0, optionally with a form-locking pawl at ``pawl_delay``."""
    joint3 = {"sliding_torque": 600.0, "holding_torque": 700.0, "engage_delay": 0.0}
    if pawl_delay is not None:
        joint3["pawl_delay"] = pawl_delay  # pawl_holding_torque: inf (a form lock)
    return planar(robot, joint3, joint1={**STRONG, "engage_delay": 0.05}, joint2={**STRONG, "engage_delay": 0.0})


SWING = np.array([3.0, 0.0, 0.0])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("how", ["pawl", "lock_event"])
def test_a_lock_on_a_joint_the_brake_already_holds_holds_it_with_the_locks_capacity(planar_3r, engine, how):
    """Joint 3 is held by its brake from t = 0; a rigid lock (a pawl at 5 ms, or a LockEvent) on it adds its own
    (infinite) capacity: joint 3 is not released when joint 1's brake engages at 50 ms, as it is without the lock.
    The lock is recorded at 5 ms and makes no velocity jump (joint 3 is already at rest, no joint newly locks)."""
    settings = StopSettings(engine=engine)
    without = predict_stop(planar_3r, pawl_after_brake(planar_3r), HORIZONTAL, SWING, settings=settings)
    assert not held_after(without, 2, 0.0)  # the brake alone lets go: the lock below is what holds
    if how == "pawl":
        p = predict_stop(planar_3r, pawl_after_brake(planar_3r, 0.005), HORIZONTAL, SWING, settings=settings)
    else:
        p = predict_stop(planar_3r, pawl_after_brake(planar_3r), HORIZONTAL, SWING, settings=settings,
                         lock_events=[LockEvent(0.005, "joint3")])
    lock = [e for e in p.events if e.kind == "lock"]
    assert len(lock) == 1 and lock[0].time == pytest.approx(0.005, abs=1e-12) and lock[0].joints == ("joint3",)
    np.testing.assert_array_equal(lock[0].v_plus, lock[0].v_minus)
    assert lock[0].energy_loss == 0.0
    assert held_after(p, 2, 0.0) and released(p, "joint3") == []
    assert np.all(p.q[:, 2] == HORIZONTAL[2])  # joint 3 never moved
    assert p.stopped


@pytest.mark.parametrize("engine", ENGINES)
def test_a_lock_on_a_held_and_a_free_joint_jumps_only_the_free_ones_and_records_both(planar_3r, engine):
    """Joint 2 is held by its brake from t = 0 and locked at 10 ms; at 20 ms a lock of joints 1 (swinging) and 2: each
    is recorded with all its joints; the jump of eq. (22) stops joint 1 and keeps the momentum of joint 3, which
    stays free ((M v+)_3 = (M v-)_3)."""
    brakes = planar(planar_3r, {"sliding_torque": 10.0, "holding_torque": 10.0, "engage_delay": 1.0},
                    joint1={**STRONG, "engage_delay": 1.0}, joint2={**STRONG, "engage_delay": 0.0})
    p = predict_stop(planar_3r, brakes, HORIZONTAL, SWING, settings=StopSettings(engine=engine, t_max=0.05),
                     lock_events=[LockEvent(0.01, "joint2"), LockEvent(0.02, ("joint1", "joint2"))])
    lock = [e for e in p.events if e.kind == "lock"]
    assert [e.time for e in lock] == pytest.approx([0.01, 0.02], abs=1e-12)
    assert set(lock[1].joints) == {"joint1", "joint2"}
    e = lock[1]
    assert e.v_plus[0] == 0.0 and e.v_plus[1] == 0.0
    M = planar_3r.mass_matrix(e.q)
    assert (M @ e.v_plus)[2] == pytest.approx((M @ e.v_minus)[2], rel=1e-9)
    assert e.energy_loss > 0.0


@pytest.mark.parametrize("engine", ENGINES)
def test_a_lock_event_naming_a_joint_twice_conserves_the_momentum_of_the_free_joints(planar_3r, engine):
    """The three bars swing (1, -2, 1.5 rad/s) with weak brakes engaging late; a LockEvent at 10 ms names joint 2
    twice. The jump must lock joint 2 once: joints 1 and 3 keep their momentum rows of M v (eq. (21), U = 0),
    the kinetic energy falls, and the event names joint 2 once. Counting it twice gave a jump that changed those
    momenta by -938 and -169 N m s and booked -343 J of impulse energy (the jump created energy)."""
    weak = {"sliding_torque": 50.0, "holding_torque": 60.0, "engage_delay": 0.5}
    brakes = planar(planar_3r, weak, joint1=weak, joint2=weak)
    p = predict_stop(planar_3r, brakes, np.array([math.pi / 2, 0.3, -0.2]), np.array([1.0, -2.0, 1.5]),
                     settings=StopSettings(engine=engine), lock_events=[LockEvent(0.01, ["joint2", "joint2"])])
    lock = [e for e in p.events if e.kind == "lock"][0]
    assert lock.joints == ("joint2",)
    M = planar_3r.mass_matrix(lock.q)  # no armature in these brakes
    assert lock.v_plus[1] == 0.0
    np.testing.assert_allclose((M @ (lock.v_plus - lock.v_minus))[[0, 2]], 0.0, atol=1e-9)
    loss = 0.5 * lock.v_minus @ M @ lock.v_minus - 0.5 * lock.v_plus @ M @ lock.v_plus
    assert loss > 0.0 and p.impulse_energy == pytest.approx(loss, rel=1e-9)
