"""The replay of a predicted stop for a ghost robot in RViz (nodes/ghost_replay.py), checked on the topics as RViz
and a robot_state_publisher would receive them: joint states that follow the predicted motion at true time and
rest, markers of the TCP path, the events and the worst-case rest pose, which prediction is replayed when, and the
predictor's hook."""

from __future__ import annotations

import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from visualization_msgs.msg import Marker, MarkerArray

from test.nodes.node_harness import UR5_JOINTS, UR5_Q, Graph, init_rclpy
from test.ros_helpers import spin_until
from test.views.views_testdata import ur5_stop
from vtm_dynamics.nodes.ghost_replay import GhostReplay
from vtm_dynamics.views import palette
from vtm_dynamics.views.replay import joint_origins

PARAMS = {"replay_rate": 100.0, "replay_speed": 1.0, "replay_hold": 0.2, "replay_keep": 10.0,
          "replay_max_points": 40}


@pytest.fixture(scope="module", autouse=True)
def ros():
    init_rclpy()
    yield
    rclpy.try_shutdown()


class Listener(Node):
    """What RViz and a robot_state_publisher would receive."""

    def __init__(self) -> None:
        super().__init__("replay_listener")
        self.states: list[JointState] = []
        self.markers: list[MarkerArray] = []
        self.create_subscription(JointState, "predicted_motion", self.states.append, 1000)
        self.create_subscription(MarkerArray, "predicted_motion_markers", self.markers.append, 100)


@pytest.fixture()
def pair():
    node, listener = Node("replay_host"), Listener()
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    executor.add_node(listener)
    yield node, listener, executor
    executor.shutdown()
    node.destroy_node()
    listener.destroy_node()


def _seconds(stamp) -> float:
    return stamp.sec + 1e-9 * stamp.nanosec


def _on_path(positions: np.ndarray, p) -> tuple[float, float]:
    """(distance to the predicted motion, the time of its nearest point) on a 0.2 ms grid of the prediction."""
    grid = np.arange(0.0, p.t[-1] + 1e-9, 2e-4)
    path = np.column_stack([np.interp(grid, p.t, p.q[:, i]) for i in range(p.q.shape[1])])
    d = np.linalg.norm(path - positions, axis=1)
    return float(d.min()), float(grid[int(np.argmin(d))])


def test_the_ghost_replays_the_predicted_motion_at_true_time_and_rests(pair):
    node, listener, executor = pair
    robot, p, _ = ur5_stop()
    replay = GhostReplay(node, PARAMS, lambda level, text: None)
    replay.offer(robot, p, "world", continuous=False)
    assert replay.builds == 0  # offering built nothing: the predictor's thread only handed over a reference
    spin_until(executor, lambda: len(listener.states) >= 120 and listener.markers, 10.0)
    assert replay.builds == 1
    states = listener.states
    assert all(list(s.name) == list(robot.joint_names) for s in states)
    matched = [_on_path(np.array(s.position), p) for s in states]
    assert max(d for d, _ in matched) < 2e-3  # every published pose lies on the predicted motion
    times = np.array([t for _, t in matched])
    assert times.min() < 0.01 and np.any(np.abs(np.array([s.position for s in states]) - p.q_final).max(axis=1)
                                         < 1e-9)  # it shows the start and reaches the rest pose
    stamps = np.array([_seconds(s.header.stamp) for s in states])
    moving = (times > 0.005) & (times < p.stop_time - 0.005)
    first_pass = moving & (stamps < stamps[0] + p.t[-1] + 0.1)
    assert first_pass.sum() >= 4
    slope = np.polyfit(stamps[first_pass], times[first_pass], 1)[0]
    assert slope == pytest.approx(1.0, abs=0.15)  # true time: one second of the stop per second


def test_the_markers_show_the_tcp_path_the_events_and_the_worst_rest_pose_when_known(pair):
    node, listener, executor = pair
    robot, p, env = ur5_stop()
    replay = GhostReplay(node, PARAMS, lambda level, text: None)
    replay.offer(robot, p, "world", continuous=True)
    assert spin_until(executor, lambda: listener.markers, 5.0)
    first = listener.markers[0].markers
    assert first[0].action == Marker.DELETEALL
    by_ns = {m.ns: m for m in first[1:]}
    assert set(by_ns) == {"replay_tcp_path", "replay_events"}  # no worst case was evaluated yet
    path = np.array([[q.x, q.y, q.z] for q in by_ns["replay_tcp_path"].points])
    assert 2 <= len(path) <= PARAMS["replay_max_points"]
    np.testing.assert_allclose(path[0], p.tcp_positions[0], atol=1e-9)
    np.testing.assert_allclose(path[-1], p.tcp_positions[-1], atol=1e-9)
    events = by_ns["replay_events"]
    assert len(events.points) == 7 and events.header.frame_id == "world"
    assert (events.colors[0].r, events.colors[0].g, events.colors[0].b) == pytest.approx(palette.EVENT_COLORS["engage"])
    worst_q = robot.integrate(p.q[0], env.worst_distance.stopping_angles)
    replay.offer_worst(p, worst_q)
    assert spin_until(executor, lambda: any(m.ns == "replay_worst_rest" for a in listener.markers
                                            for m in a.markers), 5.0)
    worst = next(m for a in listener.markers for m in a.markers if m.ns == "replay_worst_rest" and m.id == 0)
    np.testing.assert_allclose([[q.x, q.y, q.z] for q in worst.points],
                               joint_origins(robot, worst_q, "tool0"), atol=1e-9)


def _replaying_continuous(pair):
    """(replay on a clock of its own, robot, the continuous prediction it replays, the clock [s] as a list)."""
    node, _, _ = pair
    robot, p, _ = ur5_stop()
    now = [100.0]
    replay = GhostReplay(node, PARAMS, lambda level, text: None, clock=lambda: now[0])
    replay.offer(robot, p, "world", continuous=True)
    replay._on_timer()
    return replay, robot, p, now


def test_an_estop_prediction_replaces_the_replay_at_once_and_continuous_ones_wait(pair):
    replay, robot, p, now = _replaying_continuous(pair)
    assert replay._current[0].result is p and not replay._current[0].urgent
    stop = type(p)(**{**p.__dict__})  # another prediction object (an E-stop)
    replay.offer(robot, stop, "world", continuous=False)
    now[0] += 0.01  # mid-pass: the E-stop takes over anyway
    replay._on_timer()
    assert replay._current[0].result is stop
    later = type(p)(**{**p.__dict__})
    replay.offer(robot, later, "world", continuous=True)
    now[0] += 5.0  # many passes later, but within replay_keep: the E-stop stays
    replay._on_timer()
    assert replay._current[0].result is stop
    now[0] += 6.0  # past replay_keep, in the middle of a pass: the pass is shown to its end
    replay._on_timer()
    assert replay._current[0].result is stop
    period = replay._current[1].period
    now[0] += period  # the next pass: the continuous prediction
    replay._on_timer()
    assert replay._current[0].result is later
    assert replay.builds == 3


def test_a_continuous_prediction_takes_over_only_at_the_end_of_the_pass_in_progress(pair):
    """A new continuous prediction replaced a replay that had looped for a while at once, in the middle of a pass:
    the ghost jumped from the middle of one stop to the start of another."""
    replay, robot, p, now = _replaying_continuous(pair)
    period = replay._current[1].period
    now[0] += 2.5 * period  # the third pass, half way
    replay._on_timer()
    newer = type(p)(**{**p.__dict__})
    replay.offer(robot, newer, "world", continuous=True)
    for _ in range(4):  # the rest of the third pass
        now[0] += 0.1 * period
        replay._on_timer()
        assert replay._current[0].result is p
    now[0] += 0.15 * period  # into the fourth pass
    replay._on_timer()
    assert replay._current[0].result is newer


def test_the_predictor_replays_its_estop_prediction():
    g = Graph({"replay_rate": 50.0, "replay_hold": 0.2})
    states: list[JointState] = []
    g.h.create_subscription(JointState, "predicted_motion", states.append, 1000)
    try:
        g.feed(g.h.state())
        pred = g.trigger()
        assert pred.success
        assert g.wait(lambda: len(states) >= 20)
        names = list(states[-1].name)
        assert names == UR5_JOINTS
        traj = pred.trajectory
        t = np.array([pt.time_from_start.sec + 1e-9 * pt.time_from_start.nanosec for pt in traj.points])
        q = np.array([pt.positions for pt in traj.points])
        for s in states:  # on the published trajectory of this very prediction
            pos = np.array(s.position)
            grid = np.linspace(0.0, t[-1], 2000)
            path = np.column_stack([np.interp(grid, t, q[:, i]) for i in range(6)])
            assert np.min(np.linalg.norm(path - pos, axis=1)) < 5e-3
        assert np.allclose(q[0], UR5_Q, atol=1e-12)
    finally:
        g.close()


def test_the_shipped_rviz_config_shows_the_replaying_ghost_and_its_markers():
    import os

    import yaml

    from test.ros_helpers import REPO_ROOT
    from vtm_dynamics.nodes.ghost_replay import MARKER_NAMESPACES

    rviz = yaml.safe_load(open(os.path.join(REPO_ROOT, "config", "rviz", "estop_predict.rviz"), encoding="utf-8"))
    displays = rviz["Visualization Manager"]["Displays"]
    ghost = [d for d in displays if d["Class"] == "rviz_default_plugins/RobotModel" and d["TF Prefix"] == "replay"]
    assert len(ghost) == 1 and ghost[0]["Description Topic"]["Value"] == "/ghost_replay/robot_description"
    markers = [d for d in displays if d["Class"] == "rviz_default_plugins/MarkerArray"
               and d["Topic"]["Value"] == "/predicted_motion_markers"]
    assert len(markers) == 1 and set(markers[0]["Namespaces"]) == set(MARKER_NAMESPACES)


def test_the_live_envelope_keeps_the_rest_pose_of_its_worst_distance_case():
    from types import SimpleNamespace

    from vtm_dynamics.core.estop import predict_stop
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.estop.envelope import EnvelopeSpec, stop_envelope
    from vtm_dynamics.nodes.live_stopping import LIVE_PARAMETERS, LiveStopping
    from test.nodes.node_harness import TEST_BRAKES, UR5_V

    robot = ur5_stop()[0]
    brakes = brakes_from_config(robot, TEST_BRAKES)
    p = {s.name: s.default for s in LIVE_PARAMETERS}
    nominal = predict_stop(robot, brakes, UR5_Q, UR5_V, tcp_frame="tool0")
    live = LiveStopping().evaluate(robot, brakes, nominal, p, "tool0", lambda r, b: SimpleNamespace(
        result=predict_stop(r, b, UR5_Q, UR5_V, tcp_frame="tool0"), reason=""))
    env = stop_envelope(robot, brakes, UR5_Q, UR5_V, EnvelopeSpec(), tcp_frame="tool0")  # the core's own envelope
    assert live.worst_distance == pytest.approx(env.worst_distance.tcp_straight_distance, rel=1e-12)
    np.testing.assert_allclose(live.worst_rest, robot.integrate(UR5_Q, env.worst_distance.stopping_angles),
                               atol=1e-12)
