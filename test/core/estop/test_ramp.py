"""Category-1 ramp (IEC 60204-1 stop category 1, :mod:`vtm_dynamics.core.estop.ramp`): the time after which power
is cut regardless, ``CategoryOne.max_duration`` [s]."""

import math
import os

import numpy as np
import pytest

from core_testdata import REPO
from vtm_dynamics.core.estop import CategoryOne, StopInputError, predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config

Q = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
V = np.array([2.0, -2.5, 2.8, 1.5, -2.0, 3.0])


@pytest.fixture(scope="module")
def ur5_brakes(ur5):
    return brakes_from_config(ur5, os.path.join(REPO, "config", "ur5_brakes.yaml"))


@pytest.mark.parametrize("max_duration", [-0.2, -1e-9, math.nan, math.inf, -math.inf])
def test_a_max_duration_that_is_not_a_finite_time_of_at_least_zero_is_an_input_error(ur5, ur5_brakes, max_duration):
    """A negative time would cut the power before the stop begins (the ramp extrapolated backwards in time);
    NaN and infinity are no times."""
    with pytest.raises(StopInputError, match=r"^category_one\.max_duration: ") as err:
        predict_stop(ur5, ur5_brakes, Q, V, category=1, category_one=CategoryOne(max_duration=max_duration))
    assert "\n" not in str(err.value)


def test_a_max_duration_of_zero_cuts_the_power_at_once(ur5, ur5_brakes):
    """max_duration 0: the stop is the category-0 stop from the initial state."""
    p = predict_stop(ur5, ur5_brakes, Q, V, category=1, category_one=CategoryOne(max_duration=0.0))
    zero = predict_stop(ur5, ur5_brakes, Q, V)
    assert p.power_off_time == 0.0
    assert p.stop_time == pytest.approx(zero.stop_time, abs=1e-9)
    np.testing.assert_allclose(p.q_final, zero.q_final, atol=1e-9)


def test_a_ramp_that_ends_at_standstill_hands_the_arm_to_fully_engaged_brakes(ur5, ur5_brakes):
    """The drives hold the arm until the brakes hold it: with the shipped brakes' 5 ms torque rise the arm must not
    sag after the power cut. The stop is the straight ramp itself: it ends at T = max |v0_i| / decel [s] with every
    joint at q0 + v0 T / 2 (before, the brakes' capacity started from zero at the power cut: every joint slipped,
    the stop ended 2.3 ms after the ramp and the elbow rested 8.9e-6 rad further on)."""
    decel = 3.0
    p = predict_stop(ur5, ur5_brakes, Q, V, category=1, category_one=CategoryOne(deceleration=decel))
    T = float(np.max(np.abs(V))) / decel
    assert p.power_off_time == pytest.approx(T, abs=1e-12)
    assert p.stop_time == pytest.approx(T, abs=1e-12)
    np.testing.assert_allclose(p.q_final, Q + V * T / 2.0, atol=1e-12)
    assert not [e for e in p.events if e.kind in ("slip", "release")]
    assert p.stopped and p.locked[-1].all()

