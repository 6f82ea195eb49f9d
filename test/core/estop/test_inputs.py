"""The checks of a stop's start state on joints that are not revolute: a continuous joint's (cos, sin) pair must
lie on the unit circle; a prismatic joint's position and velocity limits are checked in m and m/s."""

import os

import numpy as np
import pytest

from core_testdata import REPO
from joint_type_models import on_track, ur5_text, with_continuous
from vtm_dynamics.core.estop import StopInputError, check_stop_state, predict_stop
from vtm_dynamics.core.estop.inputs import states_pass_checks
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.robot.model import RobotModel

ANGLES = [0.3, -1.2, 1.4, -0.8, 1.1, 3.1]


@pytest.fixture(scope="module")
def continuous():
    return RobotModel.from_urdf(with_continuous(ur5_text(), "wrist_3_joint"))


@pytest.mark.parametrize("pair", [(2.0, 0.0), (0.0, 0.0), (0.6, 0.6)])
def test_a_continuous_joint_off_the_unit_circle_is_refused_naming_it(continuous, pair):
    q = continuous.configuration_from_angles(ANGLES)
    q[5:7] = pair  # Pinocchio would build no rotation from it: a (2, 0) pair was predicted as a 0.076 s stop
    with pytest.raises(StopInputError, match=r"q\[wrist_3_joint\]: .* not a \(cos, sin\) pair on the unit circle"):
        check_stop_state(continuous, q, np.zeros(6))
    brakes = brakes_from_config(continuous, os.path.join(REPO, "config", "ur5_brakes.yaml"))
    with pytest.raises(StopInputError, match="unit circle"):
        predict_stop(continuous, brakes, q, np.ones(6))


def test_a_continuous_joint_on_the_unit_circle_is_accepted(continuous):
    q = continuous.configuration_from_angles(ANGLES)
    q[5:7] *= 1.0 + 1e-7  # float32 round-off
    check_stop_state(continuous, q, np.zeros(6))


def test_a_prismatic_joint_is_checked_against_its_travel_in_m_and_its_speed_in_m_s():
    robot = RobotModel.from_urdf(on_track(ur5_text(), travel=2.0, speed=2.0))
    check_stop_state(robot, [1.99] + ANGLES, [1.99] + [0.0] * 6)
    with pytest.raises(StopInputError, match=r"q\[track_joint\]: 2.5 outside the joint limits \[-2, 2\]"):
        check_stop_state(robot, [2.5] + ANGLES, [0.0] * 7)
    with pytest.raises(StopInputError, match=r"v\[track_joint\]: \|2.5\| exceeds the velocity limit 2"):
        check_stop_state(robot, [0.0] + ANGLES, [2.5] + [0.0] * 6)


def passes_one_by_one(robot, q, v):
    try:
        for qk, vk in zip(q, v, strict=True):
            check_stop_state(robot, qk, vk)
    except (StopInputError, ValueError):
        return False
    return True


@pytest.mark.parametrize("seed", range(12))
def test_a_batch_passes_the_checks_at_once_exactly_when_each_of_its_states_passes_them(ur5, seed):
    # states at, just inside and just beyond the position and velocity limits, and a non-finite one now and then
    rng = np.random.default_rng(seed)
    lo, hi, vmax = ur5.model.lowerPositionLimit, ur5.model.upperPositionLimit, ur5.model.velocityLimit
    n = 6
    q = rng.uniform(lo, hi, (n, 6))
    v = rng.uniform(-vmax, vmax, (n, 6))
    k, j = rng.integers(n), rng.integers(6)
    change = seed % 6
    if change == 1:
        q[k, j] = hi[j] + rng.choice([0.5e-9, 2e-9])  # within the 1e-9 tolerance, or beyond it
    elif change == 2:
        q[k, j] = lo[j] - rng.choice([0.5e-9, 2e-9])
    elif change == 3:
        v[k, j] = vmax[j] * (1 + rng.choice([0.5e-9, 2e-9]))
    elif change == 4:
        v[k, j] = np.nan
    elif change == 5:
        q = list(q[:-1]) + [q[-1][:5]]  # a ragged batch
    together = states_pass_checks(ur5, q, v)
    assert (together is not None) == passes_one_by_one(ur5, q, v)
    if together is not None:
        assert np.array_equal(together[0], np.asarray(q)) and np.array_equal(together[1], v)


def test_a_model_with_continuous_joints_is_checked_state_by_state(continuous):
    q = np.array([continuous.configuration_from_angles(np.zeros(6))])
    assert states_pass_checks(continuous, q, np.zeros((1, 6))) is None
