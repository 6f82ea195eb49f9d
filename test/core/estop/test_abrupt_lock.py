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

