"""Holding capacities read from the stick/slip decisions of recorded stops (core/estop/capacity_bounds.py).

A capacity that no recorded stop slipped is bounded from below only; the nominal brake file then carries the
least value the stops accept, never the prior's (on a validation set a wrist the stops bounded at "at least 28 N m"
for a truth of 29.9 was written with the prior's 42 N m, and a held-out stop in which the real brake slipped was
predicted 7 % short)."""

from __future__ import annotations

import numpy as np
import pytest

from test.recordings.recordings_testdata import REALISTIC
from vtm_dynamics.core.estop.capacity_bounds import StateFreedom, capacity_intervals
from vtm_dynamics.core.estop.inputs import StopSettings
from vtm_dynamics.core.estop.output_error import OutputError, StopPredictor

ELBOW = "elbow_joint"


def _slipped(plant_stop, joint: str) -> bool:
    return any(e.kind == "slip" and joint in e.joints for e in plant_stop.events)


@pytest.fixture(scope="module")
def held_only(realistic, realistic_stops):
    """The elbow's interval from the fitted stops of the realistic set in which the reference plant never slipped
    it (the plant's own events, not the code under test), at the true friction and delays; and its true capacity."""
    robot, truth, plant = realistic
    stops = [s for s, p in zip(realistic_stops[:REALISTIC.stops], plant) if not _slipped(p, ELBOW)]
    assert len(stops) >= 3
    brakes = list(truth.brakes)
    problem = OutputError(robot, brakes, [], stops, np.zeros(0), StopPredictor(robot, StopSettings(step=0.01)))
    noise = 2.0e-4  # [rad] about the residual the driver-like sensor leaves
    true_capacity = next(b.holding_torque for b in brakes if b.joint == ELBOW)
    return capacity_intervals(problem, brakes, [ELBOW], noise**2)[ELBOW], true_capacity


def test_a_capacity_no_stop_slipped_is_bounded_from_below_only_and_not_above_the_truth(held_only):
    interval, truth = held_only
    assert interval.held and not interval.slipped and not interval.tested, interval
    assert interval.loaded and interval.lower <= truth, interval


def test_the_nominal_value_of_a_capacity_bounded_from_below_only_is_the_least_the_stops_accept(held_only):
    """Any larger value would hold the joint in a stop where the real brake slips: a prediction that is short.
    (It used to be the prior's, 1.5 x sliding where the truth is 1.15 x.)"""
    interval, truth = held_only
    assert interval.lower <= interval.nominal <= interval.lower * (1.0 + 3e-3), interval
    assert interval.nominal <= truth * (1.0 + 3e-3), interval


def test_the_whitened_residual_carries_the_cost_with_the_trigger_state_free(realistic, realistic_stops):
    """What a least-squares fit with each stop's trigger state free minimises (the re-fit that checks an end of an
    interval, core/estop/capacity_profile.py): |W r|^2 equals the comparison's own cost of r, min over the state
    change d of |r + A d|^2 + s^2 d^T P^-1 d, for the stop's residual and for any other."""
    robot, truth, _ = realistic
    stop = realistic_stops[0]
    problem = OutputError(robot, list(truth.brakes), [], [stop], np.zeros(0),
                          StopPredictor(robot, StopSettings(step=0.01)))
    noise = 2.0e-4  # [rad]
    r = problem.residuals_of(truth)[0]
    free = StateFreedom(problem, truth, stop, r, noise**2)
    whiten = free.whitener(noise**2)
    for v in (r, np.random.default_rng(3).normal(0.0, noise, r.size)):
        w = whiten(v)
        assert w @ w == pytest.approx(free.cost(v), rel=1e-6)
        assert w @ w < v @ v  # the state takes some of it
