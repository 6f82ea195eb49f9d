"""Recorded stops are timed by the rule their predictions are timed by, with or without recorded velocities.

A JointState recording without velocities was timed by the start of its 1 mrad rest window, 3-14 % before the
speed rule its predictions were timed by: a brake file 15 % too strong (stops predicted too short) passed a 5 %
shortfall check on 6 of 10 stops. Here stops of the independent fixed-step plant (not the predictor's engine) are
seen through the driver-like sensor and written without velocities."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from test.recordings.recordings_testdata import PLANT_DT, true_brakes, ur5
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.stop_comparison import compare_stops, shortfalls
from vtm_dynamics.recordings.bag_files import read_recording
from vtm_dynamics.recordings.simulated import StopStart, plant_stops, sample_stops, write_simulated_bag
from vtm_dynamics.recordings.stops import find_stops

SAMPLE = 0.002  # [s] the sensor's sample period (500 Hz)


def fast_starts(n: int, seed: int) -> list[StopStart]:
    """Stops from poses around the demo pose, every joint at 1.5-3 rad/s in either direction: 60-95 ms stops,
    long enough that 15 % more brake torque shortens them by more than the recording's timing noise."""
    rng = np.random.default_rng(seed)
    home = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
    return [StopStart(home + rng.uniform(-0.3, 0.3, 6), rng.choice([-1, 1], 6) * rng.uniform(1.5, 3.0, 6))
            for _ in range(n)]


@pytest.fixture(scope="module")
def positions_only(tmp_path_factory):
    """Robot, true brakes and the stops of a recording whose joint states carry positions only (a few seconds)."""
    robot = ur5()
    truth = true_brakes(robot)
    plant = plant_stops(robot, truth, fast_starts(6, seed=3), plant_dt=PLANT_DT)
    samples = sample_stops(plant, robot.joint_names, seed=4)
    samples["joint"] = [(stamp, measured, q, np.zeros(0)) for stamp, measured, q, _ in samples["joint"]]
    path = write_simulated_bag(os.path.join(tmp_path_factory.mktemp("bags"), "positions_only"), samples, "mcap")
    rec = read_recording(path)
    assert rec.joints.v is None
    return robot, truth, find_stops(rec, robot)


def scaled(robot, brakes: BrakeSet, factor: float) -> BrakeSet:
    """``brakes`` with every torque and viscous term ``factor`` times larger (stops predicted shorter)."""
    return BrakeSet.from_brakes(robot, [dataclasses.replace(
        b, sliding_torque=factor * b.sliding_torque, viscous=factor * b.viscous,
        holding_torque=factor * b.holding_torque) for b in brakes.brakes])


def test_without_velocities_the_true_brakes_predict_the_recorded_stop_time(positions_only):
    robot, truth, stops = positions_only
    for c in compare_stops(robot, truth, stops, "tool0"):
        # the only difference between the two sides is the recording's noise: a few sample periods at most
        assert c.predicted_time == pytest.approx(c.recorded_time, rel=0.03, abs=SAMPLE), c.label


def test_without_velocities_brakes_15_percent_too_strong_are_short_in_stop_time(positions_only):
    robot, truth, stops = positions_only
    comparisons = compare_stops(robot, scaled(robot, truth, 1.15), stops, "tool0")
    short = {s.label for s in shortfalls(comparisons, 0.05) if s.what == "time"}
    assert short == {s.label for s in stops}


def test_without_velocities_the_trigger_state_states_how_its_position_and_velocity_errors_go_together(
        positions_only):
    """The quadratic through the positions before the trigger reads position and velocity at the end of its window:
    their errors share a sign (correlation 0.87 for 25 samples evenly spread over the 50 ms before the trigger,
    from the design matrix alone). Left out, the covariance the fit propagates understated the error of every
    sample after the trigger, where the two add up."""
    _, _, stops = positions_only
    true = fast_starts(6, seed=3)
    dq = np.concatenate([(s.q0 - t.q0) / s.q0_sigma for s, t in zip(stops, true)])
    dv = np.concatenate([(s.v0 - t.v0) / s.v0_sigma for s, t in zip(stops, true)])
    assert float(np.corrcoef(dq, dv)[0, 1]) > 0.6  # the plant's errors themselves go together
    for s in stops:
        assert s.state_correlation is not None and np.all(np.abs(s.state_correlation - 0.87) < 0.03), s.label
        P = s.state_covariance()
        n = s.v0.size
        assert np.allclose(P[np.arange(n), n + np.arange(n)], s.state_correlation * s.q0_sigma * s.v0_sigma)
