"""Identification of a Stribeck breakaway against known truth: UR5 stops of the independent fixed-step plant whose
brakes rise to a breakaway torque 30 % above the sliding torque at low speed (Stribeck speed 0.2 rad/s), recorded
through the default measurement model (500 Hz, +-0.2 ms timestamp jitter, 19-bit encoder, 1e-4 rad noise).

The stops are designed to identify it: each joint starts at 0.08, 0.15, 0.3, 0.8 and 2 rad/s (+-10 %) in two of
the ten fitted stops each, so that four in ten of its stops are slow ones that end inside the Stribeck region
and the rest separate the sliding from the viscous term. Fitted: delay, sliding, breakaway and viscous terms of
every joint, from the Coulomb + viscous prior; the Stribeck speed is not fitted but fixed at an assumed value
(the true one here: with ten stops its own 1-sigma is 10-20 %, docs/calibration.md gives how a wrong
assumption moves the rest). Two further stops are held out."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from test.recordings.recordings_testdata import MAIN, PLANT_DT, check_held_out_stops, prior_brakes, true_brakes, ur5
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.identification import FitParameter, identify_brakes
from vtm_dynamics.recordings.bag_files import read_recording
from vtm_dynamics.recordings.simulated import StopStart, simulate_stops, write_simulated_bag
from vtm_dynamics.recordings.stops import find_stops

BREAKAWAY_RATIO = 1.3
STRIBECK_VELOCITY = 0.2  # [rad/s]
SPEEDS = (0.08, 0.15, 0.3, 0.8, 2.0)  # [rad/s]
FIELDS = ("engage_delay", "sliding_torque", "viscous", "breakaway_torque")


def stribeck_truth(robot) -> BrakeSet:
    return BrakeSet.from_brakes(robot, [dataclasses.replace(
        b, breakaway_torque=BREAKAWAY_RATIO * b.sliding_torque, stribeck_velocity=STRIBECK_VELOCITY)
        for b in true_brakes(robot).brakes])


def designed_starts(n: int, seed: int) -> list[StopStart]:
    """Stop k moves joint j at SPEEDS[(k + 2 j) mod 5] (+-10 %, random sign) from a pose near the demo pose."""
    rng = np.random.default_rng(seed)
    home = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
    return [StopStart(home + rng.uniform(-0.3, 0.3, 6),
                      rng.choice([-1, 1], 6) * np.array([SPEEDS[(k + 2 * j) % 5] for j in range(6)])
                      * rng.uniform(0.9, 1.1, 6))
            for k in range(n)]


@pytest.fixture(scope="module")
def stribeck_stops(tmp_path_factory):
    """12 stops (a few seconds to simulate)."""
    robot = ur5()
    samples = simulate_stops(robot, stribeck_truth(robot), designed_starts(12, seed=13), seed=3, plant_dt=PLANT_DT)
    bag = write_simulated_bag(os.path.join(str(tmp_path_factory.mktemp("stribeck")), "stribeck"), samples, "mcap")
    stops = find_stops(read_recording(bag), robot)
    assert len(stops) == 12
    return robot, stops


def fit(robot, stops, stribeck_velocity: float, **options):
    prior = [dataclasses.replace(b, stribeck_velocity=stribeck_velocity) for b in prior_brakes(robot).brakes]
    params = [FitParameter(b.joint, f) for b in prior for f in FIELDS]
    return identify_brakes(robot, prior, stops, params, starts=1, **options)


@pytest.fixture(scope="module")
def stribeck_fit(stribeck_stops):
    """10 stops fitted (about 10-40 s), 2 held out."""
    robot, stops = stribeck_stops
    return robot, fit(robot, stops[:10], STRIBECK_VELOCITY), stops[10:]


def test_sliding_breakaway_viscous_within_5_percent_and_delays_within_1_ms(stribeck_fit):
    robot, ident, _ = stribeck_fit
    truth = {b.joint: b for b in stribeck_truth(robot).brakes}
    est = {(e.joint, e.field): e for e in ident.estimates}
    for joint in MAIN:
        for field in ("sliding_torque", "breakaway_torque", "viscous"):
            e = est[(joint, field)]
            assert e.identifiable, (joint, field, e.reason)
            assert e.value == pytest.approx(getattr(truth[joint], field), rel=0.05), (joint, field, e.value)
    for joint in robot.joint_names:
        e = est[(joint, "engage_delay")]
        assert e.identifiable and abs(e.value - truth[joint].engage_delay) < 1e-3, joint
    # what is reported for a wrist is right within a few sigma; what is not, says why and what would identify it
    for e in ident.estimates:
        if e.identifiable:
            assert abs(e.value - getattr(truth[e.joint], e.field)) <= 4.0 * e.sigma, (e.joint, e.field)
        else:
            assert e.reason and e.test_motion


def test_the_breakaway_is_fitted_above_the_sliding_torque(stribeck_fit):
    """The fit must not explain the slow stops by a larger Coulomb term: each main joint's breakaway is found
    about 30 % above its sliding torque, as in the truth."""
    robot, ident, _ = stribeck_fit
    fitted = {b.joint: b for b in ident.brakes}
    for joint in MAIN:
        assert fitted[joint].breakaway_torque / fitted[joint].sliding_torque == pytest.approx(BREAKAWAY_RATIO,
                                                                                                abs=0.05), joint


def test_held_out_stops_are_predicted_within_5_percent(stribeck_fit):
    robot, ident, held = stribeck_fit
    check_held_out_stops(robot, ident, held)


def test_a_wrong_assumed_stribeck_speed_is_carried_into_the_uncertainty(stribeck_stops):
    """The Stribeck speed assumed 25 % low (0.15 rad/s for 0.2) and said to be uncertain by 25 %: the breakaway
    then hinges on the assumption (fitted without it: +11 % for J0 with a 5 % 1-sigma, +31 % for J1), so it
    must come with a 1-sigma that covers that or be reported not identifiable; what is reported stays within
    5 % and 3 sigma of the truth."""
    robot, stops = stribeck_stops
    ident = fit(robot, stops[:10], 0.75 * STRIBECK_VELOCITY, assumed={"stribeck_velocity": 0.25})
    truth = {b.joint: b for b in stribeck_truth(robot).brakes}
    est = {(e.joint, e.field): e for e in ident.estimates}
    for joint in MAIN:
        for field in ("sliding_torque", "viscous"):
            assert est[(joint, field)].identifiable, (joint, field, est[(joint, field)].reason)
        for field in ("sliding_torque", "viscous", "breakaway_torque"):
            e = est[(joint, field)]
            if e.identifiable:
                true = getattr(truth[joint], field)
                assert e.value == pytest.approx(true, rel=0.05), (joint, field, e.value)
                assert abs(e.value - true) <= 3.0 * e.sigma, (joint, field, e.value, e.sigma)
