"""The scene of a predicted stop (views/stop_view.py) holds the prediction's own motion: the robot starts at the
E-stop pose and ends at the predicted rest pose, the events keep their instants, the worst-case ghost is the
envelope's worst rest pose; and every scene is bounded (views/scene.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from test.views.views_testdata import ur5_geometry, ur5_stop
from vtm_dynamics.views.robot_geometry import frame_positions, link_poses
from vtm_dynamics.views.scene import MAX_FRAMES, SceneError, check_scene
from vtm_dynamics.views.web_page import page_parts
from vtm_dynamics.views.stop_view import merged_events, stop_scene, thinned


@pytest.fixture(scope="module")
def scene():
    robot, p, env = ur5_stop()
    return stop_scene(robot, p, envelope=env, geometry=ur5_geometry())


def _layer(scene, name):
    return next(layer for layer in scene.robots if layer.name == name)


def test_the_robot_moves_from_the_estop_pose_to_the_predicted_rest_pose(scene):
    robot, p, _ = ur5_stop()
    g = ur5_geometry()
    moving = _layer(scene, "robot")
    np.testing.assert_allclose(moving.times, p.t)  # the prediction's own samples, none invented
    np.testing.assert_allclose(moving.poses[0], link_poses(robot.model, g, p.q[:1])[0])
    np.testing.assert_allclose(moving.poses[-1], _layer(scene, "rest").poses[0], atol=1e-12)
    np.testing.assert_allclose(_layer(scene, "start").poses[0], moving.poses[0])
    assert scene.duration == pytest.approx(p.t[-1]) and p.stopped


def test_the_worst_case_ghost_stands_at_the_envelopes_worst_rest_pose(scene):
    robot, p, env = ur5_stop()
    worst = env.worst_distance
    q = robot.integrate(p.q[0], worst.stopping_angles)
    tcp = frame_positions(robot.model, "tool0", q[None, :])[0]
    # the TCP travelled as far as the envelope says its worst case does
    assert np.linalg.norm(tcp - p.tcp_positions[0]) == pytest.approx(worst.tcp_straight_distance, rel=1e-9)
    marker = next(s for s in scene.shapes if s.name == "worst_tcp")
    np.testing.assert_allclose(marker.center, tcp)
    assert worst.tcp_straight_distance > p.tcp_straight_distance  # it is not the nominal pose again


def test_events_are_on_the_timeline_and_on_the_tcp_path_at_their_instants(scene):
    _, p, _ = ur5_stop()
    merged = merged_events(p)
    assert [(e.time, e.kind) for e in scene.events] == [(t, k) for t, k, _ in merged]
    assert merged[0][1] == "engage" and "all 6 joints" in scene.events[0].text
    dots = [s for s in scene.shapes if s.name.startswith("event_")]
    for (time, _, _), dot in zip(merged, dots):
        k = int(np.argmin(np.abs(p.t - time)))
        assert np.linalg.norm(np.asarray(dot.center) - p.tcp_positions[k]) < 5e-3


def test_the_joint_table_says_which_joints_the_brakes_hold(scene):
    _, p, _ = ur5_stop()
    j = scene.joints
    assert j.names[0] == "shoulder_pan_joint" and j.layer == "robot"
    np.testing.assert_array_equal(j.held, p.locked)
    np.testing.assert_allclose(j.angles[-1], p.stopping_angles, atol=1e-12)


def test_a_long_motion_is_thinned_to_the_cap_and_keeps_its_events():
    t = np.linspace(0.0, 10.0, 100_001)
    events = [0.0123, 5.0, 9.99991]
    keep = thinned(t, events, 500)
    assert len(keep) <= 500 and keep[0] == 0 and keep[-1] == len(t) - 1
    for e in events:
        assert int(np.searchsorted(t, e)) in keep
    assert np.all(np.diff(keep) > 0)
    robot, p, _ = ur5_stop()
    small = stop_scene(robot, p, geometry=ur5_geometry(), max_frames=10)
    assert len(_layer(small, "robot").times) <= 10 and any("of its" in n for n in small.notes)


def test_scenes_beyond_their_caps_or_with_non_finite_values_are_refused(scene):
    layer = _layer(scene, "robot")
    bad = dataclasses.replace(layer, poses=np.where(np.arange(7) == 2, np.nan, layer.poses))
    with pytest.raises(SceneError, match="robots.robot.poses: values must be finite"):
        check_scene(dataclasses.replace(scene, robots=(bad,)))
    with pytest.raises(SceneError, match="robots.robot.poses: values must be finite"):  # the page checks what it
        page_parts(dataclasses.replace(scene, robots=(bad,)))  # is given: a scene made from a checked one, too
    long = dataclasses.replace(layer, times=np.zeros(MAX_FRAMES + 1), poses=np.zeros((MAX_FRAMES + 1, 7, 7)))
    with pytest.raises(SceneError, match="robots.robot: expected 1..4000"):
        check_scene(dataclasses.replace(scene, robots=(long,)))
    with pytest.raises(SceneError, match="name must be"):
        check_scene(dataclasses.replace(scene, robots=(dataclasses.replace(layer, name="a/b"),)))


@pytest.fixture(scope="module")
def past_limit():
    """The UR5's elbow 10 mrad below its upper limit at 3 rad/s towards it (test/core/limit_case.py): the brakes
    hold it about 0.1 rad past the limit, where an end stop, not the brake, would end the motion."""
    from test.core.limit_case import elbow_towards_limit
    from vtm_dynamics.cli.predict import run_prediction

    robot = ur5_stop()[0]
    q, v, limit = elbow_towards_limit(robot)
    summary, robot, _ = run_prediction("ur5", q=q, v=v)
    return robot, summary.prediction, limit


def test_a_stop_past_a_joint_limit_is_marked_not_valid_in_the_title_the_text_panel_and_the_rest_ghost(past_limit):
    from vtm_dynamics.views.web_page import page_parts

    robot, p, limit = past_limit
    elbow = robot.joint_names.index("elbow_joint")
    assert p.stopped and p.q_final[elbow] > limit + 0.1  # at rest, but 0.1 rad past the limit
    shown = stop_scene(robot, p, geometry=ur5_geometry())
    assert "NOT VALID: past a joint limit" in shown.title
    assert any(line.startswith("NOT VALID: past a joint limit") for line in shown.info)
    assert any("elbow_joint reaches" in line and f"past its upper limit {limit:.4f} rad" in line
               for line in shown.info)
    assert "NOT VALID" in _layer(shown, "rest").label
    assert any("NOT VALID" in entry.text for entry in shown.legend if "rest" in entry.toggles)
    page = b"".join(page_parts(shown)).decode("utf-8")
    assert "<title>ur5: predicted stop — NOT VALID: past a joint limit</title>" in page
    assert "NOT VALID: past a joint limit (an end stop" in page  # the text panel's line, in the page's data


def test_a_stop_cut_off_by_the_horizon_is_marked_not_valid_and_its_last_pose_is_not_called_a_rest_pose():
    from vtm_dynamics.core.estop import StopSettings, predict_stop
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from test.core.limit_case import UR5_BRAKES

    robot, p0, _ = ur5_stop()
    brakes = brakes_from_config(robot, UR5_BRAKES)
    # the demo stop takes about 0.07 s: a 0.03 s horizon ends it while the joints still slide
    p = predict_stop(robot, brakes, p0.q[0], p0.v[0], tcp_frame="tool0", settings=StopSettings(t_max=0.03))
    assert not p.stopped and p0.stop_time > 0.03
    shown = stop_scene(robot, p, geometry=ur5_geometry())
    assert "NOT VALID: not at rest within the horizon" in shown.title
    assert any(line.startswith("NOT STOPPED within the horizon (0.030 s)") for line in shown.info)
    assert "rest pose" not in _layer(shown, "rest").label and "NOT at rest" in _layer(shown, "rest").label


def test_a_valid_stop_carries_no_mark(scene):
    assert "NOT" not in scene.title and not any("NOT" in line for line in scene.info)
    assert _layer(scene, "rest").label == "predicted rest pose"
