"""The direct measurement before any fit (core/estop/stop_measurement.py) against the known truth of the realistic
set: engage delays, sliding laws and the stick/slip record read from the recordings alone (no prior value), and the
recordings' noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from test.recordings.recordings_testdata import REALISTIC, SHIPPED_PRIOR
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.stop_measurement import measure_stops

MAIN = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")


@pytest.fixture(scope="module")
def measured(realistic, realistic_stops):
    robot = realistic[0]
    prior = brakes_from_config(robot, SHIPPED_PRIOR)
    return measure_stops(robot, prior.brakes, realistic_stops[:REALISTIC.stops])


def test_engage_delays_and_main_sliding_laws_are_measured_without_a_prior_value(realistic, measured):
    truth = {b.joint: b for b in realistic[1].brakes}
    slides = {s.joint: s for s in measured.slides}
    for joint, true in truth.items():
        s = slides[joint]
        assert s.delay_measured and abs(s.engage_delay - true.engage_delay) < 1e-3, (joint, s.engage_delay)
    for joint in MAIN:
        s = slides[joint]
        assert s.friction_measured
        assert s.sliding_torque == pytest.approx(truth[joint].sliding_torque, rel=0.02), joint
        assert s.viscous == pytest.approx(truth[joint].viscous, rel=0.1), joint


def test_each_stop_shows_its_own_engage_instant_within_its_stated_uncertainty(realistic, measured):
    truth = {b.joint: b for b in realistic[1].brakes}
    seen = 0
    for s in measured.slides:
        for instant, sigma in zip(s.instants, s.instant_sigmas):
            if math.isfinite(instant):
                seen += 1
                # the profile interval, widened by the sample period: a stop whose joint slides for a few samples
                # only shows its onset to within about one of them
                assert abs(instant - truth[s.joint].engage_delay) <= 3.0 * sigma + 2e-3, (s.joint, instant, sigma)
    assert seen >= 30


def test_the_stick_slip_record_shows_only_slips_the_plant_made(realistic, measured):
    robot, _, plant = realistic
    found = 0
    for record, stop in zip(measured.records, plant):
        slips = [(robot.joint_names.index(e.joints[0]), e.time) for e in stop.events if e.kind == "slip"]
        for episode in record.episodes:
            if episode.slipped:
                found += 1
                near = [t for j, t in slips if j == episode.joint
                        and episode.departure_lo - 3e-3 <= t <= episode.departure_hi + 3e-3]
                assert near, (record.label, robot.joint_names[episode.joint], episode)
    assert found >= 2  # the elbow's slips in this set move it visibly in several stops


def test_the_recordings_noise_and_timestamp_jitter_are_estimated_from_them(measured):
    assert np.all(np.abs(measured.noise - REALISTIC.sensor.noise) < 0.3 * REALISTIC.sensor.noise)
    jitter = REALISTIC.sensor.jitter / np.sqrt(3.0)  # uniform over +-jitter
    assert measured.timing == pytest.approx(jitter, rel=0.35)
