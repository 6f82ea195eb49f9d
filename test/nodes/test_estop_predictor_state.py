"""estop_predictor over real DDS: every prediction says which start state it used, and refuses a wrong one."""

import time

import numpy as np
import pytest
import rclpy
from rclpy.duration import Duration
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from vtm_msgs.msg import BrakeEvent

from test.nodes.node_harness import graph, ros  # noqa: F401 - fixtures
from test.nodes.node_harness import UR5_JOINTS, UR5_Q, Graph, first_positions, init_rclpy


def _seconds(stamp) -> float:
    return stamp.sec + 1e-9 * stamp.nanosec


def test_a_prediction_names_its_start_state_and_its_age(graph):
    msg = graph.h.state()
    graph.feed(msg)
    pred = graph.trigger()
    assert pred.success, pred.message
    assert pred.start_state_stamp == msg.header.stamp
    assert 0.0 <= pred.start_state_age <= graph.predictor.p["max_start_state_age"]
    assert abs(_seconds(pred.header.stamp) - _seconds(msg.header.stamp) - pred.start_state_age) < 1e-6
    assert not pred.velocities_estimated and pred.revision == 0 and not pred.final
    assert graph.wait(lambda: any(p.final and p.scenario_id == pred.scenario_id for p in graph.h.predictions))


def test_a_gap_in_joint_states_before_a_stamped_trigger_gives_no_prediction_but_the_age(graph):
    graph.feed(graph.h.state())
    graph.spin_for(0.3)  # a lagging joint-state publisher
    ev = BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.ENGAGE)
    ev.header.stamp = graph.h.get_clock().now().to_msg()
    graph.h.pub_brake.publish(ev)
    assert graph.wait(lambda: graph.h.predictions)
    pred = graph.h.predictions[0]
    assert not pred.success
    assert "older than the trigger instant" in pred.message and "max_start_state_age" in pred.message
    assert pred.start_state_age >= 0.3


def test_a_late_state_at_the_engage_instant_revises_a_prediction_made_from_an_older_one(graph):
    """A stamped ENGAGE whose own state arrives only after the node stopped waiting for it (a loaded machine):
    the node predicts from the newest older state, within max_start_state_age, and says so; when the state
    stamped at the instant arrives, it publishes a revision that starts from that state."""
    now = graph.h.get_clock().now()
    old = graph.h.state(stamp=(now - Duration(seconds=0.04)).to_msg())
    graph.feed(old)
    ev = BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.ENGAGE)
    ev.header.stamp = now.to_msg()
    graph.h.pub_brake.publish(ev)
    assert graph.wait(lambda: graph.stop_predictions())
    first = graph.stop_predictions()[0]
    assert first.success, first.message
    assert first.start_state_stamp == old.header.stamp and first.start_state_age == pytest.approx(0.04, abs=1e-6)
    late = graph.h.state(q=UR5_Q + 0.05, stamp=now.to_msg())
    graph.feed(late)
    assert graph.wait(lambda: len(graph.stop_predictions()) > 1), "no revision from the state at the instant"
    rev = graph.stop_predictions()[1]
    assert rev.success, rev.message
    assert rev.scenario_id == first.scenario_id + "-rev1"
    assert rev.start_state_stamp == late.header.stamp and rev.start_state_age == pytest.approx(0.0, abs=1e-6)
    assert np.allclose(first_positions(rev.trajectory), UR5_Q + 0.05, atol=1e-12)


def test_a_joint_state_from_the_far_future_is_rejected_and_does_not_poison_later_predictions(graph):
    future = graph.h.get_clock().now() + Duration(seconds=1e6)
    graph.feed(graph.h.state(q=UR5_Q + 0.3, stamp=future.to_msg()))
    assert graph.wait(lambda: graph.h.has_log("joint_states: message dropped", "in the future"))
    good = graph.h.state()
    graph.feed(good)
    pred = graph.trigger()
    assert pred.success, pred.message
    assert pred.start_state_stamp == good.header.stamp
    assert np.allclose(first_positions(pred.trajectory), UR5_Q, atol=1e-12)
    ev = BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.ENGAGE)
    ev.header.stamp = future.to_msg()
    n = len(graph.h.predictions)
    graph.h.pub_brake.publish(ev)
    assert graph.wait(lambda: len(graph.h.predictions) > n)
    assert not graph.h.predictions[n].success and "in the future" in graph.h.predictions[n].message


def test_the_bool_trigger_uses_the_state_at_its_receipt_not_a_later_one(graph):
    before = graph.h.state()
    graph.feed(before)
    # the Bool, then (before the node's callbacks run) a state of the robot already stopped
    graph.h.pub_estop.publish(Bool(data=True))
    time.sleep(0.03)
    graph.h.pub_js.publish(graph.h.state(q=UR5_Q + 0.2, v=np.zeros(6)))
    assert graph.wait(lambda: graph.stop_predictions())
    pred = graph.stop_predictions()[0]
    assert pred.success, pred.message
    assert pred.start_state_stamp == before.header.stamp
    assert np.allclose(first_positions(pred.trajectory), UR5_Q, atol=1e-12)
    assert pred.initial_kinetic_energy > 1.0


def test_a_best_effort_joint_state_publisher_is_heard(graph):
    sensor = QoSProfile(depth=5, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.BEST_EFFORT)
    pub = graph.h.create_publisher(JointState, "joint_states", sensor)
    assert graph.wait(lambda: pub.get_subscription_count() > 0)
    stats = graph.predictor.stats
    msg = graph.h.state()
    for _ in range(20):  # best effort may drop one: publish until one arrives
        before = stats["joint_states_ok"]
        msg = graph.h.state()
        pub.publish(msg)
        if graph.wait(lambda: stats["joint_states_ok"] > before, timeout=0.5):
            break
    pred = graph.trigger()
    assert pred.success and pred.start_state_stamp == msg.header.stamp


def test_velocities_estimated_from_positions_are_declared(graph):
    t0 = graph.h.get_clock().now()
    for k in range(3):
        graph.feed(graph.h.state(q=UR5_Q + 0.002 * k, v=None,
                                 stamp=(t0 + Duration(nanoseconds=2_000_000 * k)).to_msg()))
    pred = graph.trigger()
    assert pred.velocities_estimated


def test_velocities_from_unstamped_positions_are_not_passed_off_as_estimates(graph):
    from builtin_interfaces.msg import Time

    for k in range(3):  # no velocities and zero stamps: nothing to estimate a velocity from
        graph.feed(graph.h.state(q=UR5_Q + 0.002 * k, v=None, stamp=Time()))
    pred = graph.trigger()
    assert not pred.success and "velocity" in pred.message and "unstamped" in pred.message
    assert pred.velocities_estimated
