"""The replay schedule of the RViz ghost (views/replay.py): joint positions of the predicted stop at true time
(or slower), the rest pose held, then again; checked against the prediction's own series, interpolated here."""

from __future__ import annotations

import os

import numpy as np
import pytest

from test.views.views_testdata import ur5_stop
from vtm_dynamics.core.estop import predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.views.replay import ReplaySchedule, joint_origins, replay_frames


@pytest.fixture(scope="module")
def frames():
    robot, p, env = ur5_stop()
    worst_q = robot.integrate(p.q[0], env.worst_distance.stopping_angles)
    return replay_frames(robot, p, worst_q=worst_q, max_points=40)


def _predicted(t: float) -> np.ndarray:
    _, p, _ = ur5_stop()
    return np.array([np.interp(t, p.t, p.q[:, i]) for i in range(p.q.shape[1])])


def test_at_true_time_the_ghost_follows_the_predicted_motion(frames):
    _, p, _ = ur5_stop()
    s = ReplaySchedule(frames, speed=1.0, hold=0.5)
    np.testing.assert_allclose(s.positions_at(0.0), p.q[0], atol=1e-12)
    for t in (0.013, 0.05, 0.08):  # between the kept frames the replay interpolates linearly, like the check
        np.testing.assert_allclose(s.positions_at(t), _predicted(t), atol=2e-4)
    np.testing.assert_allclose(s.positions_at(p.t[-1] + 0.3), p.q_final, atol=1e-12)  # resting
    assert s.period == pytest.approx(p.t[-1] + 0.5)
    np.testing.assert_allclose(s.positions_at(s.period + 0.05), s.positions_at(0.05), atol=1e-12)  # again


def test_slower_replay_stretches_the_motion_and_a_single_pass_stays_at_rest(frames):
    s = ReplaySchedule(frames, speed=0.1, hold=0.0)
    np.testing.assert_allclose(s.positions_at(0.5), _predicted(0.05), atol=2e-4)
    once = ReplaySchedule(frames, speed=1.0, hold=0.2, loop=False)
    np.testing.assert_allclose(once.positions_at(100.0), frames.positions[-1])


def test_frames_are_capped_and_carry_the_path_the_events_and_the_worst_case(frames):
    robot, p, env = ur5_stop()
    assert len(frames.times) <= 40 < len(p.t) and frames.joint_names == robot.joint_names
    assert len(frames.tcp_path) == len(frames.times)
    assert [k for k, _ in frames.events][0] == "engage" and len(frames.events) == 7
    worst_q = robot.integrate(p.q[0], env.worst_distance.stopping_angles)
    np.testing.assert_allclose(frames.worst_positions, worst_q)
    assert len(frames.worst_points) == robot.nv + 1  # every joint, then the TCP
    np.testing.assert_allclose(frames.worst_points[-1], robot.frame_placement(worst_q, "tool0").translation)
    origins = joint_origins(robot, p.q[0])
    np.testing.assert_allclose(origins[0], robot.frame_placement(p.q[0], "shoulder_link").translation, atol=1e-12)
    np.testing.assert_allclose(origins[2], robot.frame_placement(p.q[0], "forearm_link").translation, atol=1e-12)


def test_a_continuous_joint_crossing_pi_is_replayed_along_its_motion_not_the_long_way_round():
    """A continuous joint's wrapped angles jump from +pi to -pi between two frames; interpolating them swung the
    ghost through 0 (the arm 4 m from the prediction for a moment). The frames are continuous along the stop."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    text = open(os.path.join(repo, "urdf", "planar_3r.urdf"), encoding="utf-8").read()
    first = text.index('<joint name="joint1"')
    end = text.index(">", first)
    assert 'type="revolute"' in text[first:end]
    robot = RobotModel.from_urdf(text[:first] + text[first:end].replace('type="revolute"', 'type="continuous"')
                                        + text[end:])
    brakes = brakes_from_config(robot, os.path.join(repo, "config", "planar_3r_brakes.yaml"))
    q0 = robot.configuration_from_angles([np.pi - 0.02, 0.3, 0.2])
    p = predict_stop(robot, brakes, q0, np.array([2.0, -0.5, 0.8]))
    frames = replay_frames(robot, p)
    assert np.max(np.abs(np.diff(frames.positions[:, 0]))) < 0.5  # no 2 pi jump between frames
    schedule = ReplaySchedule(frames, speed=1.0, hold=0.0, loop=False)
    for t in np.linspace(0.0, p.t[-1], 41):
        shown = schedule.positions_at(t)[0]
        k = int(np.searchsorted(p.t, t))
        predicted = robot.difference(robot.neutral(), p.q[min(k, len(p.t) - 1)])[0]
        assert abs(np.angle(np.exp(1j * (shown - predicted)))) < 0.1, t  # the same angle on the circle
