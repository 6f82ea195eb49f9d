"""Uncertainty envelope: sampling, monotone trends of the physics, payload handling, progress and errors."""

import os

import numpy as np
import pytest
import yaml

from core_testdata import REPO
from joint_type_models import TRACK_BRAKE, on_track, ur5_text
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.envelope import EnvelopeSpec, envelope_samples, stop_envelope
from vtm_dynamics.core.estop import CategoryOne, StopInputError, predict_stop
from vtm_dynamics.core.estop.payload import with_payload
from vtm_dynamics.core.robot.model import RobotModel

UR5_BRAKES = os.path.join(REPO, "config", "ur5_brakes.yaml")
Q = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
V = np.array([1.5, -1.5, 2.0, 1.0, -1.0, 2.0])


def test_samples_are_nominal_then_corners_then_seeded_random():
    spec = EnvelopeSpec(torque_factor=(0.8, 1.2), delay_factor=(1.0, 2.0), payload=(0.0, 5.0), n_random=3, seed=7)
    s = envelope_samples(spec)
    assert s[0] == (1.0, 1.0, 0.0)
    corners = {(a, b, c) for a in (0.8, 1.2) for b in (1.0, 2.0) for c in (0.0, 5.0)}
    assert set(s[1:9]) == corners and len(s) == 1 + 8 + 3
    assert s[-3:] == envelope_samples(spec)[-3:]  # seeded
    for tf, df, m in s[-3:]:
        assert 0.8 <= tf <= 1.2 and 1.0 <= df <= 2.0 and 0.0 <= m <= 5.0


def test_envelope_brackets_the_nominal_stop_and_weaker_brakes_stop_later(ur5):
    brakes = brakes_from_config(ur5, UR5_BRAKES)
    calls = []
    env = stop_envelope(ur5, brakes, Q, V, EnvelopeSpec(torque_factor=(0.8, 1.2), delay_factor=(1.0, 2.0),
                                                         payload=(0.0, 5.0), payload_frame="tool0", n_random=2),
                        tcp_frame="tool0", progress=lambda d, n: calls.append((d, n)))
    n = len(env.cases)
    assert calls == [(k, n) for k in range(1, n + 1)]
    nominal = predict_stop(ur5, brakes, Q, V, tcp_frame="tool0")
    assert env.nominal.tcp_straight_distance == pytest.approx(nominal.tcp_straight_distance, abs=1e-12)
    d = [c.tcp_straight_distance for c in env.cases]
    assert env.worst_distance.tcp_straight_distance == max(d) >= nominal.tcp_straight_distance
    assert env.best_distance.tcp_straight_distance == min(d) <= nominal.tcp_straight_distance
    assert env.worst_time.stop_time >= nominal.stop_time >= env.best_time.stop_time
    # physics trend: at equal delay and payload, weaker brakes stop later and farther. (The delay is not
    # monotone: while the brakes are not yet engaged gravity can slow a joint that moves upwards.)
    corner = {(c.torque_factor, c.delay_factor, c.payload): c for c in env.cases[1:9]}
    for df in (1.0, 2.0):
        for m in (0.0, 5.0):
            weak, strong = corner[(0.8, df, m)], corner[(1.2, df, m)]
            assert weak.stop_time > strong.stop_time
            assert weak.tcp_straight_distance > strong.tcp_straight_distance


def test_payload_case_equals_a_prediction_on_the_loaded_model(ur5):
    brakes = brakes_from_config(ur5, UR5_BRAKES)
    env = stop_envelope(ur5, brakes, Q, V, EnvelopeSpec(torque_factor=(1.0, 1.0), delay_factor=(1.0, 1.0),
                                                         payload=(0.0, 3.0), payload_frame="tool0"))
    heavy = [c for c in env.cases if c.payload == 3.0][0]
    direct = predict_stop(with_payload(ur5, 3.0, "tool0"), brakes, Q, V)
    np.testing.assert_allclose(heavy.stopping_angles, direct.stopping_angles, atol=1e-14)
    assert heavy.stop_time != env.nominal.stop_time


@pytest.mark.parametrize("spec, field", [
    (EnvelopeSpec(torque_factor=(1.2, 0.8)), "envelope.torque_factor"),
    (EnvelopeSpec(delay_factor=(-1.0, 1.0)), "envelope.delay_factor"),
    (EnvelopeSpec(payload=(0.0, float("nan"))), "envelope.payload"),
    (EnvelopeSpec(payload=(0.0, 2.0)), "envelope.payload_frame"),
    (EnvelopeSpec(payload=(0.0, 1e30)), "envelope.payload"),  # ran into a singular mass matrix
    (EnvelopeSpec(torque_factor=(0.9, 1e6)), "envelope.torque_factor"),
])
def test_bad_envelope_specs_name_the_field(ur5, spec, field):
    brakes = brakes_from_config(ur5, UR5_BRAKES)
    with pytest.raises(StopInputError) as err:
        stop_envelope(ur5, brakes, Q, V, spec)
    assert str(err.value).startswith(field + ":")


def _track_robot_and_brakes():
    robot = RobotModel.from_urdf(on_track(ur5_text()))
    with open(os.path.join(REPO, "config", "ur5_brakes.yaml"), encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    config["brakes"]["joints"]["track_joint"] = dict(TRACK_BRAKE)
    return robot, brakes_from_config(robot, config)


TRACK_Q = [0.2, 0.3, -1.2, 1.4, -0.8, 1.1, 2.9]
TRACK_V = [1.5, 1.0, -0.5, 0.5, 0.5, -0.5, 0.5]  # the carriage (1.5 m/s) travels about 0.11 m, the arm < 0.03 rad


def test_a_track_robot_envelope_ranks_by_tcp_distance_and_its_angles_leave_the_track_out():
    robot, brakes = _track_robot_and_brakes()
    env = stop_envelope(robot, brakes, TRACK_Q, TRACK_V, EnvelopeSpec(n_random=0), tcp_frame="tool0")
    for case in env.cases:
        # the largest joint angle used to be the track's travel in m (0.108), reported as rad
        assert case.max_stopping_angle == pytest.approx(np.max(np.abs(case.stopping_angles[1:])), abs=1e-15)
        assert case.max_stopping_angle < abs(case.stopping_angles[0])


def test_a_track_robot_envelope_without_a_tcp_frame_is_refused_naming_the_prismatic_joint():
    robot, brakes = _track_robot_and_brakes()
    # it ranked the cases by the largest |stopping angle|, comparing the track's m with the arm's rad
    with pytest.raises(StopInputError, match=r"envelope.tcp_frame: .*prismatic joint 'track_joint' travels in m"):
        stop_envelope(robot, brakes, TRACK_Q, TRACK_V, EnvelopeSpec(n_random=0))


def test_a_case_past_a_joint_limit_is_named_ranks_worst_and_makes_the_envelope_not_valid(ur5):
    # the elbow 0.15 rad below its upper limit at 3 rad/s: the nominal brakes hold it in time, weak brakes that
    # engage late do not (the model has no end stop, so that case is not a stop the robot can make)
    brakes = brakes_from_config(ur5, UR5_BRAKES)
    elbow = ur5.joint_names.index("elbow_joint")
    limit = float(ur5.model.upperPositionLimit[elbow])
    q = np.array([0.0, -1.5, limit - 0.15, -1.0, 0.5, 0.0])
    v = np.zeros(6)
    v[elbow] = 3.0
    env = stop_envelope(ur5, brakes, q, v, EnvelopeSpec(torque_factor=(0.8, 1.2), delay_factor=(1.0, 2.0)),
                        tcp_frame="tool0")
    for c in env.cases:  # each case checked against its own prediction's path, not against the envelope
        alone = predict_stop(ur5, brakes.scaled(torque_factor=c.torque_factor, delay_factor=c.delay_factor), q, v)
        assert c.valid == (alone.stopped and float(np.max(alone.q[:, elbow])) <= limit)
    (crossed,) = env.crossed
    assert (crossed.torque_factor, crossed.delay_factor) == (0.8, 2.0)
    assert not crossed.valid and crossed.limit_crossings[0].startswith("elbow_joint reaches")
    assert env.nominal.valid and not env.valid
    assert env.worst_distance is crossed and env.worst_time is crossed
    assert env.best_distance.valid and env.best_time.valid
    assert "1 of 5 cases past a joint limit" in env.invalid_text() and "elbow_joint" in env.invalid_text()


def test_an_envelope_within_the_limits_is_valid_and_says_nothing(ur5):
    brakes = brakes_from_config(ur5, UR5_BRAKES)
    env = stop_envelope(ur5, brakes, Q, V, EnvelopeSpec(torque_factor=(0.8, 1.2)), tcp_frame="tool0")
    assert env.valid and env.crossed == () and env.invalid_text() == ""
    assert all(c.valid for c in env.cases)


def test_a_category_one_envelope_ramps_at_the_given_deceleration(ur5):
    """The envelope ramped at the default 3 rad/s^2 whatever deceleration it was given (the ramp's settings were
    not passed on): with 4 rad/s^2 its nominal case stopped after 0.667 s instead of max|v| / a = 2 / 4 = 0.5 s."""
    brakes = brakes_from_config(ur5, UR5_BRAKES)
    c1 = CategoryOne(deceleration=4.0)
    env = stop_envelope(ur5, brakes, Q, V, EnvelopeSpec(), category=1, category_one=c1, tcp_frame="tool0")
    assert env.nominal.stop_time == pytest.approx(np.max(np.abs(V)) / 4.0, abs=1e-9)
    single = predict_stop(ur5, brakes, Q, V, category=1, category_one=c1, tcp_frame="tool0")
    assert env.nominal.tcp_straight_distance == pytest.approx(single.tcp_straight_distance, abs=1e-9)
    np.testing.assert_allclose(env.nominal.stopping_angles, single.stopping_angles, atol=1e-9)
