"""The conservative brakes of an identification (core/estop/brake_estimates.py) lengthen the stop also where the
stops say nothing: a friction term they cannot identify goes to its lower bound, not to the prior's value or the
direct measurement, and a capacity no stop tested is written at the conservative file's own static friction.

The recordings: three stops of the realistic set's brakes (test/recordings/recordings_testdata.py, the independent
fixed-step plant and the driver-like sensor) with wrist 2 still at every trigger, as in a test campaign that never
moves it: no sample shows its friction. The conservative file used to carry the prior's 28 N m for its sliding
torque (truth 21), and a stop with wrist 2 moving was predicted with wrist 2 turning 6-9 % less than with the
true brakes (20 % shorter in stop time where wrist 2 stops last)."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from test.recordings.recordings_testdata import REALISTIC, REALISTIC_PLANT_DT, fit_realistic
from vtm_dynamics.core.estop import predict_stop
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.recordings.bag_files import read_recording
from vtm_dynamics.recordings.simulated import plant_stops, sample_stops, write_simulated_bag
from vtm_dynamics.recordings.stops import find_stops

WRIST_2 = 4  # its index in the UR5's joints


@pytest.fixture(scope="module")
def wrist_2_still(tmp_path_factory):
    """The robot, the true brakes, the first three starts of the realistic set with wrist 2 at rest, and the
    identification of their stops from the shipped prior (one start, no cross-validation: about 15 s)."""
    robot = REALISTIC.robot()
    truth = REALISTIC.truth(robot)
    starts = [dataclasses.replace(s, v0=np.where(np.arange(robot.nv) == WRIST_2, 0.0, s.v0))
              for s in REALISTIC.starts(robot)[:3]]
    plant = plant_stops(robot, truth, starts, plant_dt=REALISTIC_PLANT_DT)
    samples = sample_stops(plant, robot.joint_names, sensor=REALISTIC.sensor, seed=3)
    bag = write_simulated_bag(os.path.join(str(tmp_path_factory.mktemp("still")), "still"), samples, "mcap")
    stops = find_stops(read_recording(bag), robot)
    assert len(stops) == 3
    return robot, truth, fit_realistic(robot, stops, starts=1, cross_validate=False)


def test_an_unidentified_sliding_torque_goes_below_the_truth_in_the_conservative_file(wrist_2_still):
    robot, truth, ident = wrist_2_still
    joint = robot.joint_names[WRIST_2]
    estimate = next(e for e in ident.estimates if (e.joint, e.field) == (joint, "sliding_torque"))
    assert not estimate.identifiable, estimate  # the case is exercised: no sample shows it
    written = next(b for b in ident.conservative_brakes if b.joint == joint)
    true = next(b for b in truth.brakes if b.joint == joint)
    assert written.sliding_torque <= true.sliding_torque and written.viscous <= true.viscous, written
    assert estimate.conservative == written.sliding_torque


@pytest.mark.parametrize("moving", ["wrist 2 alone", "every joint"])
def test_a_stop_with_wrist_2_moving_is_predicted_at_least_as_long_as_by_the_true_brakes(wrist_2_still, moving):
    """The state: the first recorded pose, with wrist 2 at 2 rad/s (alone, or with the other joints as recorded).
    Wrist 2 turns at least as far as with the true brakes (with the prior's sliding torque it turned 6 % less),
    and the stop takes at least as long and the TCP travels at least as far."""
    robot, truth, ident = wrist_2_still
    start = REALISTIC.starts(robot)[0]
    v0 = np.zeros(robot.nv) if moving == "wrist 2 alone" else np.array(start.v0, float)
    v0[WRIST_2] = 2.0
    conservative = BrakeSet.from_brakes(robot, list(ident.conservative_brakes))
    true = predict_stop(robot, truth, start.q0, v0, tcp_frame="tool0")
    cons = predict_stop(robot, conservative, start.q0, v0, tcp_frame="tool0")
    assert abs(cons.stopping_angles[WRIST_2]) >= abs(true.stopping_angles[WRIST_2]), \
        (cons.stopping_angles, true.stopping_angles)
    assert cons.stop_time >= true.stop_time and cons.tcp_path_length >= true.tcp_path_length, \
        (cons.stop_time, true.stop_time, cons.tcp_path_length, true.tcp_path_length)


def test_a_capacity_no_stop_loaded_is_written_at_the_conservative_static_friction(wrist_2_still):
    """Not at the static friction of the nominal values, which is above the conservative sliding torque: a joint at
    rest in the conservative file held where a brake within the stated intervals slips."""
    _, _, ident = wrist_2_still
    written = {b.joint: b for b in ident.conservative_brakes}
    untested = [c for c in ident.capacities if not c.loaded]
    assert untested  # the case is exercised
    for c in untested:
        b = written[c.joint]
        static = b.breakaway_torque if b.breakaway_torque is not None else b.sliding_torque
        assert b.holding_torque == pytest.approx(static, rel=1e-12), (c, b)
        assert b.holding_torque < c.floor, (c, b)  # the case is exercised: the nominal static friction is above
