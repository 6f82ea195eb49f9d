"""estop_predictor against what a real cell puts on ``joint_states``: several publishers on one topic, joint names in
the driver's own order, messages without velocities, and drivers stamping on another clock.

A cell has an arm driver (its six joints, with velocities, 500 Hz), a gripper driver (only its finger joint, 50 Hz)
and often a ``joint_state_publisher`` that republishes every joint at 10 Hz with older stamps. The prediction must
start from the arm driver's newest state; nothing the other publishers send may become the start state or make the
node refuse. Every published prediction is checked against the core's ``predict_stop`` computed here from the state
the test knows to be right (the node's stop category, horizon and step; the test brakes).

The stamps are set by the test (2 ms apart, as at 500 Hz) and each message is handed over before the next, so the
order is the test's, not the machine's; the generous ``max_start_state_age`` keeps a slow machine from refusing.
"""

from __future__ import annotations

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from rclpy.duration import Duration
from sensor_msgs.msg import JointState
from vtm_msgs.msg import BrakeEvent

from test.nodes import node_harness
from test.nodes.node_harness import TEST_BRAKES, UR5_JOINTS, UR5_Q, UR5_V, first_positions, last_positions
from vtm_dynamics.core.estop import StopSettings, predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.nodes.model_source import load_urdf_text, model_from_urdf_text

graph, ros = node_harness.graph, node_harness.ros  # the harness's fixtures
LENIENT = pytest.mark.parametrize("graph", [{"max_start_state_age": 5.0}], indirect=True)
FINGER = "robotiq_85_left_knuckle_joint"  # a gripper joint the UR5 model does not have
# the order ur_robot_driver publishes the UR joints in (shoulder_pan last), not the model's
DRIVER_ORDER = ["shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint", "wrist_3_joint",
                "shoulder_pan_joint"]
PERIOD = 0.002  # [s] arm driver at 500 Hz


@pytest.fixture(scope="module")
def ur5():
    return model_from_urdf_text(load_urdf_text("ur5"))


def _stamp(t0, seconds: float) -> Time:
    return (t0 + Duration(nanoseconds=int(round(seconds * 1e9)))).to_msg()


def _message(names, q, v=None, effort=None, stamp=None) -> JointState:
    msg = JointState(name=list(names), position=[float(x) for x in q])
    msg.velocity = [] if v is None else [float(x) for x in v]
    msg.effort = [] if effort is None else [float(x) for x in effort]
    msg.header.stamp = stamp
    return msg


def _in_order(names, values) -> list[float]:
    """``values`` (model order, UR5_JOINTS) rearranged to ``names``."""
    return [float(values[UR5_JOINTS.index(n)]) for n in names]


def _arm(q, v, stamp, names=UR5_JOINTS, velocities=True) -> JointState:
    return _message(names, _in_order(names, q), _in_order(names, v) if velocities else None, stamp=stamp)


def _expected(graph, ur5, q, v):
    """The core's prediction from (q, v) with the node's settings: the reference every check compares with."""
    p = graph.predictor.p
    return predict_stop(ur5, brakes_from_config(ur5, TEST_BRAKES), np.asarray(q, float), np.asarray(v, float),
                        category=p["stop_category"], tcp_frame="tool0",
                        settings=StopSettings(step=p["integration_step"], t_max=p["horizon"]))


def _seconds(t) -> float:
    return t.sec + 1e-9 * t.nanosec


def _assert_prediction_from(pred, expected, q, start_stamp, rel: float = 1e-9) -> None:
    """``pred`` (published) starts at ``q`` stamped ``start_stamp`` and agrees with the core's ``expected``: stop
    time, rest pose, TCP distance; ``rel`` relative tolerance (wider where the node estimates velocities)."""
    assert pred.success, pred.message
    assert pred.message == "ok"
    assert pred.start_state_stamp == start_stamp
    assert np.allclose(first_positions(pred.trajectory), q, rtol=0.0, atol=1e-12)
    assert expected.stopped
    assert _seconds(pred.stop_time) == pytest.approx(expected.stop_time, rel=rel, abs=1e-9)
    assert np.allclose(last_positions(pred.trajectory), expected.q_final, rtol=0.0, atol=rel + 1e-12)
    assert pred.tcp_straight_distance == pytest.approx(expected.tcp_straight_distance, rel=rel)
    assert pred.tcp_path_length == pytest.approx(expected.tcp_path_length, rel=rel)


def _publishers(graph):
    """The gripper driver and a joint_state_publisher: two more publishers on ``joint_states`` (the harness's own
    is the arm driver)."""
    gripper = graph.h.create_publisher(JointState, "joint_states", 20)
    jsp = graph.h.create_publisher(JointState, "joint_states", 20)
    assert graph.wait(lambda: gripper.get_subscription_count() > 0 and jsp.get_subscription_count() > 0)
    return gripper, jsp


def _send(graph, publisher, msg: JointState) -> None:
    """Publish on ``publisher`` and wait until the node has taken the message (accepted or rejected)."""
    stats = graph.predictor.stats
    before = stats["joint_states_ok"] + stats["joint_states_rejected"]
    publisher.publish(msg)
    assert graph.wait(lambda: stats["joint_states_ok"] + stats["joint_states_rejected"] > before)


def _cell_stream(graph, t0, n: int, jsp_lag: float, names_of=lambda k: UR5_JOINTS, velocities: bool = True):
    """Feed ``n`` arm states (q = UR5_Q + UR5_V t, 2 ms apart from ``t0``), a gripper message after every fifth
    and, last, a joint_state_publisher message of every joint stamped ``jsp_lag`` before the newest arm state with
    the arm state of that older stamp, then a gripper message. Returns the newest arm message and its q."""
    gripper, jsp = _publishers(graph)
    newest = None
    for k in range(n):
        t = k * PERIOD
        q = UR5_Q + UR5_V * t
        newest = (_arm(q, UR5_V, _stamp(t0, t), names_of(k), velocities), q)
        _send(graph, graph.h.pub_js, newest[0])
        if k % 5 == 4:
            _send(graph, gripper, _message([FINGER], [0.4 + 0.01 * k], [0.05], stamp=_stamp(t0, t + 0.0005)))
    t_old = (n - 1) * PERIOD - jsp_lag
    q_old = UR5_Q + UR5_V * t_old
    everything = [FINGER] + UR5_JOINTS[::-1]
    _send(graph, jsp, _message(everything, [0.3] + list(q_old[::-1]), [0.0] * 7, stamp=_stamp(t0, t_old)))
    _send(graph, gripper, _message([FINGER], [0.5], [0.0], stamp=_stamp(t0, (n - 1) * PERIOD + 0.0007)))
    return newest


# ------------------------------------------------------------------------------------- several publishers
@LENIENT
def test_a_joint_state_publisher_republishing_older_stamps_never_becomes_the_start_state(graph, ur5):
    """The Bool trigger takes the newest state received before it. Before: the joint_state_publisher's message,
    80 ms older than the arm's newest, replaced the arm's joints and was published as the start state with
    success=true (positions 0.1 rad off on the wrist joints, its zero velocities: a robot at rest)."""
    t0 = graph.h.get_clock().now() - Duration(seconds=0.2)
    arm, q = _cell_stream(graph, t0, n=60, jsp_lag=0.08)
    pred = graph.trigger()
    _assert_prediction_from(pred, _expected(graph, ur5, q, UR5_V), q, arm.header.stamp)
    assert not pred.velocities_estimated
    assert pred.start_state_age == pytest.approx(_seconds(pred.header.stamp) - _seconds(arm.header.stamp), abs=1e-6)


@LENIENT
def test_a_stamped_trigger_among_three_publishers_starts_from_the_arm_state_at_its_instant(graph, ur5):
    t0 = graph.h.get_clock().now() - Duration(seconds=0.2)
    arm, q = _cell_stream(graph, t0, n=40, jsp_lag=0.06)
    event = BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.ENGAGE)
    event.header.stamp = _stamp(t0, 39 * PERIOD + 0.001)  # 1 ms after the newest arm state
    graph.h.pub_brake.publish(event)
    assert graph.wait(lambda: graph.stop_predictions())
    pred = graph.stop_predictions()[0]
    _assert_prediction_from(pred, _expected(graph, ur5, q, UR5_V), q, arm.header.stamp)
    assert pred.start_state_age == pytest.approx(0.001, abs=1e-6)


@LENIENT
def test_gripper_messages_alone_neither_become_the_arm_state_nor_stop_predictions(graph, ur5):
    """Only the finger joint, a name the model lacks, and no velocities: the arm state stays what the arm driver
    sent, and the node predicts from it."""
    gripper, _ = _publishers(graph)
    t0 = graph.h.get_clock().now()
    arm = _arm(UR5_Q, UR5_V, _stamp(t0, 0.0))
    graph.feed(arm)
    for k in range(5):
        _send(graph, gripper, _message([FINGER], [0.1 * k], stamp=_stamp(t0, 0.001 + 0.02 * k)))
    pred = graph.trigger()
    _assert_prediction_from(pred, _expected(graph, ur5, UR5_Q, UR5_V), UR5_Q, arm.header.stamp)
    assert not pred.velocities_estimated
    assert not graph.h.has_log("no velocities in the message")  # the gripper's velocities are not the arm's


@LENIENT
def test_a_second_publisher_of_the_arms_joints_with_fresh_stamps_makes_the_prediction_a_refusal(graph, ur5):
    """A joint_state_publisher that restamps with its own clock: its stamps are newer than the arm driver's, its
    positions those it heard 100 ms before. Stamps cannot tell the two apart; before, its message was the start
    state, published with success=true (positions 0.12 rad behind the wrist's, zero velocities). Two publishers
    merging the same joint within a second make every start state from them a refusal that says why."""
    t0 = graph.h.get_clock().now() - Duration(seconds=0.2)
    _, jsp = _publishers(graph)
    for k in range(60):
        t = k * PERIOD
        _send(graph, graph.h.pub_js, _arm(UR5_Q + UR5_V * t, UR5_V, _stamp(t0, t)))
    t_new = 59 * PERIOD + 0.001
    q_heard = UR5_Q + UR5_V * (t_new - 0.1)
    _send(graph, jsp, _message(UR5_JOINTS, q_heard, [0.0] * 6, stamp=_stamp(t0, t_new)))
    pred = graph.trigger()
    assert not pred.success
    assert "published by two publishers" in pred.message and any(f"'{n}'" in pred.message for n in UR5_JOINTS)


# ------------------------------------------------------------------------------------- joint order
@LENIENT
def test_the_drivers_joint_order_and_an_order_changing_between_messages_are_read_by_name(graph, ur5):
    orders = [DRIVER_ORDER, UR5_JOINTS[::-1], UR5_JOINTS[2:] + UR5_JOINTS[:2]]
    t0 = graph.h.get_clock().now() - Duration(seconds=0.1)
    arm, q = _cell_stream(graph, t0, n=12, jsp_lag=0.01, names_of=lambda k: orders[k % 3])
    assert list(arm.name) == orders[11 % 3]
    pred = graph.trigger()
    _assert_prediction_from(pred, _expected(graph, ur5, q, UR5_V), q, arm.header.stamp)
    assert list(pred.joint_names) == UR5_JOINTS and list(pred.trajectory.joint_names) == UR5_JOINTS


# ------------------------------------------------------------------------------------- what a message carries
@LENIENT
@pytest.mark.parametrize("carries", ["position", "position and effort"])
def test_an_arm_driver_without_velocities_gives_its_own_differences_declared_as_estimated(graph, ur5, carries):
    """Velocities are the arm driver's position differences (here exactly UR5_V: the positions move linearly), never
    a difference with the older joint_state_publisher message (before: 1.625 UR5_V, its positions 50 ms old over
    32 ms of stamps); float seconds at today's epoch resolve about 0.24 us
    of the 2 ms step, hence the 1e-3 tolerance on what the velocity feeds."""
    t0 = graph.h.get_clock().now() - Duration(seconds=0.1)
    effort = [1.0] * 6 if carries == "position and effort" else None
    gripper, jsp = _publishers(graph)
    arm = None
    for k in range(10):
        q = UR5_Q + UR5_V * k * PERIOD
        arm = _message(DRIVER_ORDER, _in_order(DRIVER_ORDER, q), effort=effort, stamp=_stamp(t0, k * PERIOD))
        _send(graph, graph.h.pub_js, arm)
        if k == 8:  # a joint_state_publisher message stamped 30 ms back with positions it heard 50 ms back
            q_old = UR5_Q + UR5_V * (k * PERIOD - 0.05)
            _send(graph, jsp, _message(UR5_JOINTS, q_old, stamp=_stamp(t0, k * PERIOD - 0.03)))
    pred = graph.trigger()
    assert pred.velocities_estimated
    assert np.allclose(pred.trajectory.points[0].velocities, UR5_V, rtol=1e-3, atol=0.0)
    _assert_prediction_from(pred, _expected(graph, ur5, q, UR5_V), q, arm.header.stamp, rel=1e-3)


@LENIENT
def test_velocities_of_another_length_drop_the_message_and_the_previous_state_is_used(graph, ur5):
    t0 = graph.h.get_clock().now()
    good = _arm(UR5_Q, UR5_V, _stamp(t0, 0.0), DRIVER_ORDER)
    graph.feed(good)
    bad = _message(DRIVER_ORDER, UR5_Q + 0.2, [0.1, 0.2, 0.3], stamp=_stamp(t0, PERIOD))
    graph.feed(bad)
    assert graph.wait(lambda: graph.h.has_log("joint_states: message dropped", "velocity: 3 values for 6 names"))
    pred = graph.trigger()
    _assert_prediction_from(pred, _expected(graph, ur5, UR5_Q, UR5_V), UR5_Q, good.header.stamp)


# ------------------------------------------------------------------------------------- stamps of another clock
def test_a_driver_stamping_with_simulation_time_is_refused_with_the_age_not_predicted(graph):
    """The node runs on the wall clock; the driver stamps with a simulation clock that started at 0 (12.5 s now):
    its states are decades older than the trigger and no prediction may start from them."""
    graph.feed(graph.h.state(stamp=Time(sec=12, nanosec=500_000_000)))
    pred = graph.trigger()
    assert not pred.success
    assert "older than the trigger instant" in pred.message and "max_start_state_age" in pred.message
    assert pred.start_state_age > 1e9


@pytest.mark.parametrize("graph", [{"use_sim_time": True}], indirect=True)
def test_a_driver_stamping_with_wall_time_under_a_node_on_simulation_time_is_dropped_as_future(graph):
    """The reverse: the node runs on a simulation clock (use_sim_time, /clock at 12.5 s), the driver stamps with the
    wall clock. Its states are in the node's far future: dropped on receipt, and a trigger is refused."""
    from rosgraph_msgs.msg import Clock

    clock = graph.h.create_publisher(Clock, "/clock", 10)
    sim = Time(sec=12, nanosec=500_000_000)

    def on_sim_time() -> bool:
        clock.publish(Clock(clock=sim))
        return abs(graph.predictor.now() - 12.5) < 1e-6

    assert graph.wait(on_sim_time)
    graph.feed(graph.h.state())  # stamped with the wall clock
    assert graph.wait(lambda: graph.h.has_log("joint_states: message dropped", "in the future"))
    pred = graph.trigger()
    assert not pred.success and "no complete joint state" in pred.message
