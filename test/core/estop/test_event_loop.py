"""The braking engines' events (:mod:`vtm_dynamics.core.estop.event_loop` and its compiled twin): which joints are
watched for coming to rest, and what the record says about each stick/slip decision."""

import math

import numpy as np
import pinocchio as pin
import pytest

from vtm_dynamics.core.estop import StopSettings, predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config

ENGINES = ("compiled", "python")
STRONG = {"sliding_torque": 9000.0, "holding_torque": 9000.0}
HORIZONTAL = np.array([math.pi / 2, 0.0, 0.0])  # the three bars stretched horizontally


def planar(robot, joint1, joint2, joint3):
    return brakes_from_config(robot, {"brakes": {"joints": {"joint1": joint1, "joint2": joint2, "joint3": joint3}}})


def potential_energy(robot, q):
    return pin.computePotentialEnergy(robot.model, robot.model.createData(), q)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_brake_that_only_holds_catches_its_joint_where_it_comes_to_rest(planar_3r, engine):
    """Joint 3 swings up (2 rad/s) with a brake of no sliding torque but 5000 N m holding torque (friction order
    holding >= breakaway >= sliding >= 0); joints 1 and 2 are held from t = 0. Joint 3 swings freely and is caught
    at its turning point, where its kinetic energy has become potential energy (no brake work while it slides)."""
    brakes = planar(planar_3r, STRONG, STRONG, {"sliding_torque": 0.0, "holding_torque": 5000.0})
    v0 = np.array([0.0, 0.0, 2.0])
    p = predict_stop(planar_3r, brakes, HORIZONTAL, v0, settings=StopSettings(engine=engine, t_max=3.0))
    assert p.stopped
    stick = [e for e in p.events if e.kind == "stick" and "joint3" in e.joints]
    assert len(stick) == 1 and stick[0].v_minus[2] == 0.0
    assert np.all(p.v[:, 2] >= 0.0)  # it never swings back
    assert abs(planar_3r.gravity_torques(p.q_final)[2]) <= 5000.0
    kinetic = 0.5 * v0 @ planar_3r.mass_matrix(HORIZONTAL) @ v0
    rise = potential_energy(planar_3r, p.q_final) - potential_energy(planar_3r, HORIZONTAL)
    assert rise == pytest.approx(kinetic, rel=1e-6)


@pytest.mark.parametrize("engine", ENGINES)
def test_every_joint_that_a_brake_engagement_releases_is_recorded_as_released(planar_3r, engine):
    """Joint 3 is held by its brake (700 N m) from t = 0 while joint 1 swings; when joint 1's brake engages at 50 ms
    the reaction exceeds joint 3's capacity and the decision at the engagement releases it: each change from held
    to free in the series is a release event of that joint at that time."""
    brakes = planar(planar_3r, {**STRONG, "engage_delay": 0.05}, {**STRONG, "engage_delay": 0.0},
                    {"sliding_torque": 600.0, "holding_torque": 700.0, "engage_delay": 0.0})
    p = predict_stop(planar_3r, brakes, HORIZONTAL, np.array([3.0, 0.0, 0.0]), settings=StopSettings(engine=engine))
    changes = [(float(p.t[k + 1]), p.joint_names[j]) for k, j in zip(*np.nonzero(p.locked[:-1] & ~p.locked[1:]))]
    assert (0.05, "joint3") in [(pytest.approx(t, abs=1e-12), name) for t, name in changes]
    for t, name in changes:
        assert any(e.kind == "release" and name in e.joints and abs(e.time - t) <= 1e-12 for e in p.events), (t, name)
