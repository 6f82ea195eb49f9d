"""Recorded stops of robots whose joints are not all revolute: the UR5 on a braked linear track (``track_joint``, a
prismatic joint, +-2 m) and the UR5 with a continuous wrist 3 (reported wrapped to (-pi, pi], as drivers do).

The start state of a replayed stop is estimated from noisy samples; a joint parked at a position limit (the track
at the end of its travel, held by its brake while the arm moves) is estimated a few micrometres either side of it.
Outside the limits the engine refuses the state, and the replay used to report the refused prediction as a stop
"not at rest" (non-conservative, exit status 3) without the reason."""

from __future__ import annotations

import os

import numpy as np
import pytest

from test.core.joint_type_models import ur5_text, with_continuous, write_track_robot
from vtm_dynamics.cli.predict import main
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.recordings.bag_files import RecordingError, read_recording
from vtm_dynamics.recordings.simulated import StopStart, plant_stops, sample_stops, write_simulated_bag
from vtm_dynamics.recordings.stops import find_stops

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UR5_BRAKES = os.path.join(REPO, "config", "ur5_brakes.yaml")
LOWER = -2.0  # [m] the track's lower limit (test.core.joint_type_models.on_track, travel 2 m)
ARM_Q = [0.3, -1.2, 1.4, -0.8, 1.1, 0.5]  # [rad]
ARM_V = [1.0, -1.5, 2.0, 2.5, -2.0, 3.0]  # [rad/s]


@pytest.fixture(scope="module")
def track(tmp_path_factory):
    """The track robot's files, model and the plant's stop of the arm with the track parked at its lower limit."""
    folder = tmp_path_factory.mktemp("track")
    urdf, brakes = write_track_robot(str(folder), UR5_BRAKES)
    robot = RobotModel.from_urdf_file(urdf)
    start = StopStart(np.array([LOWER, *ARM_Q]), np.array([0.0, *ARM_V]))
    plant = plant_stops(robot, brakes_from_config(robot, brakes), [start])
    return folder, urdf, brakes, robot, plant


def _bag(track, name: str, track_offset: float) -> str:
    """The stop through the driver-like sensor, the track's encoder reading ``track_offset`` [m] off the truth."""
    folder, _, _, robot, plant = track
    samples = sample_stops(plant, robot.joint_names, seed=4)
    samples["joint"] = [(stamp, measured, np.concatenate(([q[0] + track_offset], q[1:])), v)
                        for stamp, measured, q, v in samples["joint"]]
    return write_simulated_bag(os.path.join(folder, name), samples)


def test_a_joint_parked_at_its_limit_and_read_just_beyond_it_starts_the_replay_at_the_limit(track, capsys):
    """The track's samples read 20 um below its -2 m limit (a fifth of the sensor's 0.1 mm noise): the stop's start
    state holds the track at -2 m, and the replay predicts the stop. Before, the start state held -2.00002 m, the
    engine refused it, and the replay said 'non-conservative ... not at rest' with exit status 3."""
    _, urdf, brakes, robot, _ = track
    bag = _bag(track, "just_beyond", -2e-5)
    stop = find_stops(read_recording(bag, joints=robot.joint_names), robot)[0]
    assert stop.q0[0] == LOWER
    assert stop.q0[1:] == pytest.approx(ARM_Q, abs=5e-4)
    assert main(["--urdf", urdf, "--brakes", brakes, "--bag", bag, "--tcp-frame", "tool0"]) == 0
    out = capsys.readouterr().out
    assert "not at rest" not in out and "verdict: every stop figure within 5 %" in out


def test_a_joint_recorded_well_beyond_its_limit_is_an_error_naming_it(track, capsys):
    """5 mm below the limit is no measurement noise: the recording and the model disagree (a calibration offset,
    limits that are not the robot's). The replay names the joint and stops (exit status 2); before, it reported
    the stop 'not at rest' (exit status 3)."""
    _, urdf, brakes, robot, _ = track
    bag = _bag(track, "far_beyond", -5e-3)
    with pytest.raises(RecordingError, match=r"stop 1 \(trigger at .*track_joint.*-2\.005.*outside the joint limits"):
        find_stops(read_recording(bag, joints=robot.joint_names), robot)
    assert main(["--urdf", urdf, "--brakes", brakes, "--bag", bag, "--tcp-frame", "tool0"]) == 2
    assert "track_joint" in capsys.readouterr().err


def test_a_joint_at_its_velocity_limit_and_read_just_above_it_starts_the_replay_at_the_limit(track, capsys):
    """The track running at its 2 m/s speed limit, its velocities read 0.3 mm/s high (a seventh of the sensor's
    2 mm/s noise): the start state holds 2 m/s and the stop is predicted. Before, the engine refused 2.0003 m/s and
    the replay said 'not at rest' (exit status 3)."""
    folder, urdf, brakes, robot, _ = track
    start = StopStart(np.array([-1.5, *ARM_Q]), np.array([2.0, *ARM_V]))
    plant = plant_stops(robot, brakes_from_config(robot, brakes), [start])
    samples = sample_stops(plant, robot.joint_names, seed=4)
    samples["joint"] = [(stamp, measured, q, np.concatenate(([v[0] + 3e-4], v[1:])))
                        for stamp, measured, q, v in samples["joint"]]
    bag = write_simulated_bag(os.path.join(folder, "at_speed_limit"), samples)
    stop = find_stops(read_recording(bag, joints=robot.joint_names), robot)[0]
    assert stop.v0[0] <= 2.0 and stop.v0[0] == pytest.approx(2.0, abs=1e-3)
    assert main(["--urdf", urdf, "--brakes", brakes, "--bag", bag, "--tcp-frame", "tool0"]) == 0
    assert "not at rest" not in capsys.readouterr().out


def _wrapped(angle: float) -> float:
    """``angle`` [rad] as a driver reports a continuous joint: in (-pi, pi]."""
    return float(np.pi - np.mod(np.pi - angle, 2 * np.pi))


@pytest.fixture(scope="module")
def continuous_wrist(tmp_path_factory):
    """The UR5 with a continuous wrist 3 moving at +3 rad/s through +pi at the trigger (3.2 rad there, 3.05 rad
    50 ms before), braked by the plant; the bag holds wrist 3 wrapped to (-pi, pi] (from +3.14 to -3.14 between
    two samples)."""
    folder = tmp_path_factory.mktemp("continuous")
    urdf = folder / "ur5_continuous.urdf"
    urdf.write_text(with_continuous(ur5_text(), "wrist_3_joint"))
    robot = RobotModel.from_urdf_file(str(urdf))
    start = StopStart(np.array([*ARM_Q[:5], 3.2]), np.array(ARM_V))
    plant = plant_stops(robot, brakes_from_config(robot, UR5_BRAKES), [start])
    samples = sample_stops(plant, robot.joint_names, seed=4)
    samples["joint"] = [(stamp, measured, np.concatenate((q[:5], [_wrapped(q[5])])), v)
                        for stamp, measured, q, v in samples["joint"]]
    bag = write_simulated_bag(os.path.join(folder, "bag"), samples)
    return urdf, robot, plant, bag


def test_a_continuous_joint_recorded_wrapped_is_unwrapped_through_pi(continuous_wrist):
    """The start state of wrist 3 is its angle at the trigger (3.2 rad, up to whole turns) and its recorded stop the
    plant's 0.06 rad, not a jump of 2 pi where the samples wrap. Before, a model with a continuous joint was refused
    ('has joints with more than one coordinate')."""
    _, robot, plant, bag = continuous_wrist
    stop = find_stops(read_recording(bag, joints=robot.joint_names), robot)[0]
    assert _wrapped(stop.q0[5]) == pytest.approx(_wrapped(3.2), abs=5e-4)
    assert stop.v0[5] == pytest.approx(ARM_V[5], abs=0.01)
    travel = stop.q[-1] - stop.q0
    assert travel == pytest.approx(plant[0].q[-1] - plant[0].start.q0, abs=1e-3)
    assert np.all(np.abs(np.diff(stop.q[:, 5])) < 0.1)  # no 2 pi jump left in the samples


CREEP = 0.005  # [m/s] the track's creep after the arm has stopped
CREEP_FOR = 0.6  # [s]


@pytest.fixture(scope="module")
def creeping(track):
    """The arm braked from ARM_V with the track parked mid-travel, seen through a quiet sensor (1e-5 rad or m,
    2e-4 rad/s or m/s: a linear encoder's micrometres); (the plant's stop, a bag where the track then creeps at
    CREEP for CREEP_FOR from the plant's rest on, a bag where it stays at rest)."""
    from vtm_dynamics.recordings.simulated import Sensor

    folder, _, brakes, robot, _ = track
    start = StopStart(np.array([0.5, *ARM_Q]), np.array([0.0, *ARM_V]))
    plant = plant_stops(robot, brakes_from_config(robot, brakes), [start], rest_record=1.2)[0]
    samples = sample_stops([plant], robot.joint_names, sensor=Sensor(noise=1e-5, velocity_noise=2e-4), seed=5)
    te = samples["trigger_times"][0]
    crept = []
    for stamp, measured, q, v in samples["joint"]:
        since = measured - te - plant.rest_time
        moving = 0.0 <= since < CREEP_FOR
        q, v = q.copy(), v.copy()
        q[0] += CREEP * min(max(since, 0.0), CREEP_FOR)
        v[0] += CREEP if moving else 0.0
        crept.append((stamp, measured, q, v))
    still = write_simulated_bag(os.path.join(folder, "still"), samples)
    creep = write_simulated_bag(os.path.join(folder, "creep"), {**samples, "joint": crept})
    return plant, creep, still


def test_a_track_creeping_at_5_mm_per_s_after_the_arm_stopped_is_moving_and_the_stop_ends_with_the_creep(
        track, creeping):
    """5 mm/s is motion of a track. Before, the angle thresholds applied to it in m and m/s (1 mm, 0.01 m/s): the
    creep counted as rest and the recorded stop time ended with the arm's, 0.6 s early."""
    robot = track[3]
    plant, creep, _ = creeping
    stop = find_stops(read_recording(creep, joints=robot.joint_names), robot)[0]
    assert stop.stop_time == pytest.approx(plant.rest_time + CREEP_FOR, abs=0.01)
    assert stop.q[-1][0] - stop.q0[0] == pytest.approx(CREEP * CREEP_FOR, abs=1e-4)  # the creep's 3 mm


def test_a_track_really_at_rest_ends_the_stop_with_the_arm(track, creeping):
    robot = track[3]
    plant, _, still = creeping
    stop = find_stops(read_recording(still, joints=robot.joint_names), robot)[0]
    assert stop.stop_time == pytest.approx(plant.rest_time, abs=0.01)
    assert abs(stop.q[-1][0] - stop.q0[0]) < 1e-4
