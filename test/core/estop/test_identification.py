"""Identification against known truth on stops that do not share the fit's assumptions: the realistic set of
test/recordings/recordings_testdata.py (per-joint delays of 13-24 ms, viscous terms on J0-J2, capacities 1.15-1.3 x
sliding that decide slips in about half of the stops, 5 kg at tool0, a driver-like sensor), fitted from the
shipped prior without the extended terms, as a user would. Before this work the same kind of stops ended in the
wrong basin (1 of 24 values identified, held-out stops 19-21 % short in stop time, an elbow capacity reported as
"at least 85 N m" above the truth) and the command exited 0."""

from __future__ import annotations


import numpy as np
import pytest

from test.recordings.recordings_testdata import REALISTIC, SHIPPED_PRIOR
from vtm_dynamics.core.estop.brakes import BrakeSet, brakes_from_config, friction_order_problem
from vtm_dynamics.core.estop.identification import (
    FitParameter, IdentificationError, RecordedStop, compare_stops, identify_brakes,
)
from vtm_dynamics.core.estop.stop_comparison import shortfalls

MAIN = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")


def _truth(realistic):
    return {b.joint: b for b in realistic[1].brakes}


def test_every_stop_is_found_with_a_trigger_state_whose_stated_uncertainty_covers_the_truth(realistic, realistic_stops):
    _, _, plant = realistic
    assert len(realistic_stops) == REALISTIC.stops + REALISTIC.held == len(plant)
    for stop, true in zip(realistic_stops, plant):
        assert stop.q0_sigma is not None and stop.v0_sigma is not None
        # the plant's state at the trigger is the truth the estimate from the samples before it must cover
        assert np.all(np.abs(stop.q0 - true.start.q0) <= 5.0 * stop.q0_sigma + 2e-5), stop.label
        assert np.all(np.abs(stop.v0 - true.start.v0) <= 5.0 * stop.v0_sigma + 1e-3), stop.label


def test_main_friction_within_5_percent_and_every_delay_within_1_ms(realistic, realistic_fit):
    truth = _truth(realistic)
    est = {(e.joint, e.field): e for e in realistic_fit.estimates}
    for joint in MAIN:
        for field in ("sliding_torque", "viscous"):
            e = est[(joint, field)]
            assert e.identifiable, (joint, field, e.reason)
            assert e.value == pytest.approx(getattr(truth[joint], field), rel=0.05), (joint, field)
    for joint in truth:
        e = est[(joint, "engage_delay")]
        assert e.identifiable and abs(e.value - truth[joint].engage_delay) < 1e-3, (joint, e.value)


def test_every_reported_value_lies_within_four_sigma_of_the_truth(realistic, realistic_fit):
    """The 1-sigma used to be too small (values up to 5.5 sigma from the truth at the right optimum): it now
    carries the trigger-state estimates' error. Four sigma here because this set's plant step (2e-5 s) biases the
    best-determined torques by up to 3.6 sigma; the stated rate is measured in bench/validate_calibration.py."""
    truth = _truth(realistic)
    for e in realistic_fit.estimates:
        if e.identifiable and e.field != "holding_torque":
            error = e.value - getattr(truth[e.joint], e.field)
            assert abs(error) <= 4.0 * e.sigma, (e.joint, e.field, error / e.sigma)


def test_the_elbow_capacity_is_bracketed_both_ways_around_the_truth_and_no_bound_is_above_it(realistic,
                                                                                              realistic_fit):
    """The elbow slips in some of these stops and holds in others: its capacity is an interval with both ends
    (it used to be "at least 85 N m", above the truth of 66.7 N m, a lower bound that was no bound)."""
    truth = _truth(realistic)
    caps = {c.joint: c for c in realistic_fit.capacities}
    elbow = caps["elbow_joint"]
    assert elbow.tested and elbow.held and elbow.slipped, elbow
    assert elbow.lower <= truth["elbow_joint"].holding_torque <= elbow.upper, elbow
    for c in caps.values():
        if c.loaded:  # "at least" means at least (an untested capacity claims no bound)
            assert c.lower <= truth[c.joint].holding_torque <= c.upper, c
    est = {(e.joint, e.field): e for e in realistic_fit.estimates}
    untested = [e for e in est.values() if e.field == "holding_torque" and e.joint != "elbow_joint"]
    assert all(not e.identifiable and e.value is None and ("not tested" in e.reason or "at least" in e.reason)
               for e in untested)


def test_a_capacity_no_stop_slipped_is_written_at_the_least_value_the_stops_accept_never_the_prior(realistic,
                                                                                                  realistic_fit):
    """The shipped prior's capacities (1.5 x sliding) lie above these brakes' (1.15-1.3 x): raised to the prior's
    value where no stop slipped the joint, the nominal file held a wrist in a held-out stop where the real brake
    slipped (7 % short in angle on a validation set). The file must carry the least value the stops accept."""
    prior = {b.joint: b.holding_torque for b in brakes_from_config(realistic[0], SHIPPED_PRIOR).brakes}
    written = {b.joint: b.holding_torque for b in realistic_fit.brakes}
    one_sided = [c for c in realistic_fit.capacities if not c.tested]
    assert one_sided
    for c in one_sided:
        assert c.lower <= written[c.joint] <= c.lower * (1.0 + 3e-3) < prior[c.joint], (c, written[c.joint])


def test_every_start_reaches_the_same_optimum_the_prior_included(realistic_fit):
    labels = [s.label for s in realistic_fit.starts]
    assert len(labels) >= 3 and "prior" in labels
    assert realistic_fit.agreeing == len(labels) and realistic_fit.converged


def test_held_out_stops_within_5_percent_in_time_angle_and_distance(realistic, realistic_fit, realistic_stops):
    robot = realistic[0]
    held = realistic_stops[REALISTIC.stops:]
    for c in compare_stops(robot, BrakeSet.from_brakes(robot, list(realistic_fit.brakes)), held, "tool0"):
        for what in ("time", "angle", "tcp"):
            assert abs(c.relative(what)) < 0.05, (c.label, what, c.relative(what))


def test_cross_validation_is_reported_and_the_conservative_brakes_are_never_shorter(realistic_fit):
    cv, cons = realistic_fit.cross_validation, realistic_fit.conservative_cross_validation
    assert len(cv) == len(cons) == REALISTIC.stops
    assert not shortfalls(cv, 0.05) and not shortfalls(cons, 0.05)
    for a, b in zip(cv, cons):
        assert b.predicted_time >= a.predicted_time - 1e-4 and b.predicted_tcp >= a.predicted_tcp - 1e-4, a.label


def test_both_brake_sets_obey_the_friction_order_and_state_their_own_residual(realistic_fit):
    for brakes in (realistic_fit.brakes, realistic_fit.conservative_brakes):
        for b in brakes:
            assert not friction_order_problem(b.sliding_torque, b.breakaway_torque, b.holding_torque), b
    assert realistic_fit.residual_rms < 2.0 * realistic_fit.noise
    assert realistic_fit.conservative_residual_rms > realistic_fit.residual_rms


def test_bad_identification_inputs_name_the_problem(realistic):
    robot = realistic[0]
    prior = list(realistic[1].brakes)
    with pytest.raises(IdentificationError, match="no recorded stop"):
        identify_brakes(robot, prior, [])
    one = [RecordedStop("x", np.zeros(6), np.zeros(6), np.array([0.1]), np.zeros((1, 6)))]
    with pytest.raises(IdentificationError, match="not an identifiable brake field"):
        identify_brakes(robot, prior, one, [FitParameter("elbow_joint", "side")])
    with pytest.raises(IdentificationError, match="no brake in the prior"):
        identify_brakes(robot, prior[:2], one, [FitParameter("elbow_joint", "viscous")])
    with pytest.raises(IdentificationError, match="starts"):
        identify_brakes(robot, prior, one, starts=0)
