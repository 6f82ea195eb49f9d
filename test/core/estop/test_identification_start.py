"""The 20-stop fit that ended in a wrong answer that looked identified (elbow sliding torque +23 %, viscous
-68 %, both with small 1-sigma), and the closed-form start of the fit, both against the known truth of the
independent fixed-step plant (test/recordings/recordings_testdata.py: the benchmark's 20 stops, same seeds).

The cause was the elbow's holding capacity: in these category-0 stops the elbow comes to rest while the shoulder
still brakes, and must hold the shoulder's reaction; the prior's capacity (60 N m) is below what the truth holds
(84 N m), but a finite-difference Jacobian of a stick/slip threshold is zero, so the capacity was screened out as
"not sensitive" and the fit raised the sliding torque (which lifts the capacity with it) instead."""

from __future__ import annotations

import os

import pytest

from test.recordings.recordings_testdata import (
    MAIN, check_main_terms_and_delays, check_reported_values_within_sigma, prior_brakes, samples, true_brakes,
    ur5,
)
from vtm_dynamics.core.estop.identification import IdentificationError, identify_brakes
from vtm_dynamics.recordings.bag_files import read_recording
from vtm_dynamics.recordings.simulated import write_simulated_bag
from vtm_dynamics.recordings.stops import find_stops

@pytest.fixture(scope="module")
def twenty(tmp_path_factory):
    """The benchmark's 20 stops (about 30 s to simulate)."""
    robot = ur5()
    bag = write_simulated_bag(os.path.join(str(tmp_path_factory.mktemp("twenty")), "twenty"), samples(20, seed=7),
                              "mcap")
    stops = find_stops(read_recording(bag), robot)
    assert len(stops) == 20
    return robot, stops


@pytest.fixture(scope="module")
def twenty_fit(twenty):
    """The fit of the 20 stops from the prior (about half a minute to two minutes)."""
    robot, stops = twenty
    return robot, identify_brakes(robot, prior_brakes(robot).brakes, stops)


def test_twenty_stops_give_the_true_brakes(twenty_fit):
    robot, ident = twenty_fit
    check_main_terms_and_delays(robot, ident, true_brakes(robot))
    truth = {b.joint: b for b in true_brakes(robot).brakes}
    est = {(e.joint, e.field): e for e in ident.estimates}
    # the elbow's capacity is a threshold the stops crossed: reported as a lower bound, never as a value, and the
    # bound lies between the prior's capacity (too low for these stops) and the truth's
    elbow = est[("elbow_joint", "holding_torque")]
    assert not elbow.identifiable and elbow.value is None and "at least" in elbow.reason
    assert elbow.lower_bound == fitted_holding(ident, "elbow_joint")
    fitted = {b.joint: b for b in ident.brakes}
    assert elbow.prior < fitted["elbow_joint"].holding_torque <= 1.02 * truth["elbow_joint"].holding_torque
    for e in ident.estimates:
        if e.field == "holding_torque":
            assert e.value is None and e.sigma is None, e.joint
    # the YAML says why the elbow's capacity is what it is (a bound the stops showed, not a prior nor a floor)
    from vtm_dynamics.cli.stop_report import brake_yaml

    text = brake_yaml(ident, ["twenty"])
    block = text[text.index("    elbow_joint:"):]
    line = next(x for x in block.splitlines() if x.strip().startswith("holding_torque:"))
    assert "lower bound shown by the stops" in line, line


def test_every_reported_value_is_within_three_sigma_of_the_truth(twenty_fit):
    """The fit used to report wrist 3 as identified with sliding -49 % and viscous x9.6, 10 sigma from the truth:
    the joint stops within microseconds of its brake engaging, so no sample shows it sliding, yet the
    Gauss-Newton 1-sigma (which takes the residuals as independent, while each stop's start-state estimate
    shifts all of its samples alike) was 9 %. A number the fit reports must lie within a few of its sigmas of the
    truth, and what the stops cannot pin down is reported without one, with the test motion that would."""
    robot, ident = twenty_fit
    check_reported_values_within_sigma(ident, true_brakes(robot), 3.0)
    est = {(e.joint, e.field): e for e in ident.estimates}
    for field in ("sliding_torque", "viscous"):
        e = est[("wrist_3_joint", field)]
        assert not e.identifiable and e.value is None and e.sigma is None, (field, e.value)
        assert "wrist_3_joint" in e.test_motion and e.reason


def test_regression_start_is_near_the_truth(twenty):
    from vtm_dynamics.core.estop.identification import regression_start

    robot, stops = twenty
    prior = {b.joint: b for b in prior_brakes(robot).brakes}
    start = {b.joint: b for b in regression_start(robot, list(prior.values()), stops)}
    truth = {b.joint: b for b in true_brakes(robot).brakes}
    for joint in MAIN:
        # a start, not the answer: sliding within 10 % of the truth where the prior is 17 % off; the viscous
        # term, from slides of 10-100 ms at falling speed, within 30 %
        assert start[joint].sliding_torque == pytest.approx(truth[joint].sliding_torque, rel=0.1), joint
        assert start[joint].viscous == pytest.approx(truth[joint].viscous, rel=0.3), joint
        assert start[joint].engage_delay == prior[joint].engage_delay
        assert start[joint].holding_torque == prior[joint].holding_torque


def test_an_unknown_start_is_refused(twenty):
    robot, stops = twenty
    with pytest.raises(IdentificationError, match="start"):
        identify_brakes(robot, prior_brakes(robot).brakes, stops[:1], start="guess")


def fitted_holding(ident, joint: str) -> float:
    return {b.joint: b for b in ident.brakes}[joint].holding_torque
