"""solvability_reporter in RViz: MarkerArray of the verdicts, updated from joint states, throttled, latest wins.

The node runs beside a probe node on one executor; messages cross DDS on loopback. Expected verdicts are the
paper's (Wojtyra & Frączek 2013, Sect. 4.2) and the hand derivation of test/core/reactions/test_solvability.py.
"""

import os

import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from visualization_msgs.msg import Marker, MarkerArray
from vtm_msgs.msg import SolvabilityReport

from test.ros_helpers import REPO_ROOT, spin_until
from vtm_dynamics.nodes.solvability_io import PARTLY_COLOR, SOLVABLE_COLOR, UNSOLVABLE_COLOR
from vtm_dynamics.nodes.solvability_reporter import SolvabilityReporter

LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


def _urdf(name: str) -> str:
    with open(os.path.join(REPO_ROOT, "urdf", name), encoding="utf-8") as handle:
        return handle.read()


@pytest.fixture()
def graph():
    rclpy.init()
    reporter = SolvabilityReporter(parameter_overrides=[Parameter("planar", value=True),
                                                        Parameter("max_update_rate", value=2.0)])
    probe = rclpy.create_node("solvability_marker_probe")
    executor = SingleThreadedExecutor()
    executor.add_node(reporter)
    executor.add_node(probe)
    got = {"markers": [], "reports": []}
    probe.create_subscription(MarkerArray, "/solvability_reporter/markers", got["markers"].append, LATCHED)
    probe.create_subscription(SolvabilityReport, "/solvability_reporter/report", got["reports"].append, LATCHED)
    description = probe.create_publisher(String, "robot_description", LATCHED)
    states = probe.create_publisher(JointState, "joint_states", 10)
    yield reporter, executor, description, states, got
    executor.shutdown()
    probe.destroy_node()
    reporter.destroy_node()
    rclpy.shutdown()


def _spheres(array: MarkerArray) -> dict[str, Marker]:
    labels = {m.id: m.text.split(" ")[0] for m in array.markers if m.ns == "solvability_labels"}
    return {labels[m.id]: m for m in array.markers if m.ns == "solvability_pairs"}


def _rgb(marker: Marker) -> tuple[float, float, float]:
    return (round(marker.color.r, 3), round(marker.color.g, 3), round(marker.color.b, 3))


def test_markers_colour_the_papers_verdicts_and_draw_the_unique_directions(graph):
    _, executor, description, _, got = graph
    description.publish(String(data=_urdf("mobile_robot_knife_edges.urdf")))
    assert spin_until(executor, lambda: got["markers"], 20.0)
    array = got["markers"][-1]
    assert array.markers[0].action == Marker.DELETEALL
    spheres = _spheres(array)
    assert set(spheres) == {"A", "B", "C", "D", "E", "H", "F", "G", "W1", "W2", "W3", "W4", "W5", "drive_H"}
    rgb = {name: _rgb(m) for name, m in spheres.items()}
    for name in ("A", "D", "E", "F", "G", "H", "W5", "drive_H"):
        assert rgb[name] == SOLVABLE_COLOR, name
    for name in ("B", "C"):  # Fx unique: partly
        assert rgb[name] == PARTLY_COLOR, name
    for name in ("W1", "W2", "W3", "W4"):  # nothing unique in a knife edge's single row
        assert rgb[name] == UNSOLVABLE_COLOR, name
    arrows = [m for m in array.markers if m.ns == "solvability_unique_forces"]
    assert len(arrows) == 2  # the Fx direction of B and of C, along the platform (world x at q0)
    for a in arrows:
        d = np.array([a.points[1].x - a.points[0].x, a.points[1].y - a.points[0].y, a.points[1].z - a.points[0].z])
        assert abs(abs(d[0]) - 0.1) < 1e-9 and abs(d[1]) < 1e-9
    # the sphere of the knife edge W3 is where the URDF puts it: (0, -0.2) in the platform, which the planar joint
    # places at x = 1 m (the paper's q0, eq. (34))
    w3 = spheres["W3"].pose.position
    assert (w3.x, w3.y) == pytest.approx((1.0, -0.2), abs=1e-12)
    assert array.markers[1].header.frame_id == "world"  # the URDF root link


def test_a_joint_state_moves_the_markers_and_bursts_are_throttled_latest_wins(graph):
    reporter, executor, description, states, got = graph
    description.publish(String(data=_urdf("mobile_robot_knife_edges.urdf")))
    assert spin_until(executor, lambda: got["markers"], 20.0)
    first = len(got["markers"])
    # a burst of 50 states within a few milliseconds: the node analyses the newest, not all of them
    for k in range(50):
        states.publish(JointState(name=["H"], position=[0.0002 * k]))
    assert spin_until(executor, lambda: len(got["markers"]) > first, 20.0)
    executor.spin_once(timeout_sec=0.0)
    spin_until(executor, lambda: False, 1.5)
    assert len(got["markers"]) - first <= 3  # 2 per second at most, never 50
    # the newest state was analysed: pin F sits on the slider, which moved 49 x 0.0002 m along the platform's y
    # (world y at q0); an intermediate state would put it elsewhere
    before = _spheres(got["markers"][first - 1])["F"].pose.position
    after = _spheres(got["markers"][-1])["F"].pose.position
    assert (after.x - before.x, after.y - before.y) == pytest.approx((0.0, 0.0098), abs=1e-7)  # Newton re-closes loops to 1e-12
    assert got["reports"][-1].success and got["reports"][-1].redundancy == 2


def test_a_hostile_joint_state_is_ignored_with_one_line(graph):
    reporter, executor, description, states, got = graph
    description.publish(String(data=_urdf("mobile_robot_knife_edges.urdf")))
    assert spin_until(executor, lambda: got["markers"], 20.0)
    states.publish(JointState(name=["H", "B"], position=[float("nan"), 0.0]))
    states.publish(JointState(name=["H"], position=[0.0, 1.0]))
    spin_until(executor, lambda: False, 1.0)
    assert reporter._latest_state is None  # neither was kept


@pytest.mark.parametrize("config", ["solvability.rviz", "estop_predict.rviz"])
def test_the_rviz_configs_show_the_solvability_markers(config):
    import yaml

    with open(os.path.join(REPO_ROOT, "config", "rviz", config), encoding="utf-8") as handle:
        displays = yaml.safe_load(handle)["Visualization Manager"]["Displays"]
    shown = [d for d in displays if d["Class"] == "rviz_default_plugins/MarkerArray"
             and d["Topic"]["Value"] == "/solvability_reporter/markers"]
    assert len(shown) == 1 and shown[0]["Enabled"]
    # the node latches its markers: the display must ask for transient-local to see them after joining late
    assert shown[0]["Topic"]["Durability Policy"] == "Transient Local"
    from vtm_dynamics.nodes.solvability_io import MARKER_NAMESPACES

    assert set(shown[0]["Namespaces"]) == set(MARKER_NAMESPACES)
