"""The estop_predictor node over real DDS (loopback): what it publishes on a trigger, and how it survives bad input.

Every robustness case checks three things: the problem is logged with a message naming it (read from /rosout),
the bad input does not change the node's state, and the node still serves good input afterwards.
"""

import math

import numpy as np
import pytest
import rclpy
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from visualization_msgs.msg import Marker
from vtm_msgs.msg import BrakeEvent, LockEvent, StopPrediction, TopologyEvent
from vtm_msgs.srv import PredictStop

from test.nodes.node_harness import graph, ros  # noqa: F401 - fixtures
from test.nodes.node_harness import (
    UR5_JOINTS,
    UR5_Q,
    UR5_V,
    Graph,
    first_positions,
    init_rclpy,
    last_positions,
)
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.nodes.model_source import load_urdf_text, model_from_urdf_text
from vtm_dynamics.core.estop.braked_plant import BrakedPlant

from test.nodes.node_harness import TEST_BRAKES


@pytest.fixture(scope="module")
def ur5():
    return model_from_urdf_text(load_urdf_text("ur5"))


# ---------------------------------------------------------------------------------------------- outputs
def test_a_trigger_publishes_a_prediction_that_starts_at_the_latest_state_and_ends_at_rest(graph, ur5):
    graph.feed(graph.h.state(q=UR5_Q - 0.05))
    graph.feed(graph.h.state())  # the newest state is the start state
    pred = graph.trigger()
    assert pred.success, pred.message
    assert pred.scenario_id == "estop-1" and pred.model_name == "ur5" and pred.tcp_frame == "tool0"
    assert np.allclose(first_positions(pred.trajectory), UR5_Q, atol=1e-12)
    rest = last_positions(pred.trajectory)
    assert np.allclose(rest - UR5_Q, pred.stopping_angles, atol=1e-12)
    assert pred.events[-1].kind == TopologyEvent.STOP
    times = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in pred.trajectory.points]
    assert all(b > a for a, b in zip(times, times[1:])), "trajectory times must increase strictly"
    # independent check of the rest pose: the fixed-step plant from the same state with the same brakes
    plant = BrakedPlant(ur5, brakes_from_config(ur5, TEST_BRAKES), dt=5e-5)
    plant.start(UR5_Q, UR5_V)
    plant.advance(5.0)
    assert plant.at_rest
    assert np.max(np.abs(rest - plant.q)) < 1e-3
    assert abs(pred.stop_time.sec + 1e-9 * pred.stop_time.nanosec - plant.rest_time) < 1e-3
    # the other outputs of the same trigger
    assert graph.wait(lambda: graph.h.trajectories and graph.h.reactions and graph.h.markers)
    assert graph.h.trajectories[-1] == pred.trajectory
    reactions = graph.h.reactions[-1]
    assert reactions.joint_names == UR5_JOINTS and len(reactions.wrenches) == 6
    assert np.allclose(reactions.holding_torques, pred.holding_torques)


def test_markers_clear_first_and_scale_reaction_arrows_by_magnitude(graph):
    graph.feed(graph.h.state())
    pred = graph.trigger()
    assert graph.wait(lambda: graph.h.markers)
    markers = graph.h.markers[-1].markers
    assert markers[0].action == Marker.DELETEALL
    by_ns = {}
    for m in markers[1:]:
        by_ns.setdefault(m.ns, []).append(m)
    assert {"tcp_path", "tcp_start", "tcp_rest", "rest_pose", "reaction_forces", "holding_torques"} <= set(by_ns)
    ids = [(m.ns, m.id) for m in markers[1:]]
    assert len(ids) == len(set(ids)), "namespace/id pairs must be unique"
    path = by_ns["tcp_path"][0]
    assert path.type == Marker.LINE_STRIP
    rest = by_ns["tcp_rest"][0].pose.position
    assert (path.points[-1].x, path.points[-1].y, path.points[-1].z) == pytest.approx((rest.x, rest.y, rest.z))
    assert (rest.x, rest.y, rest.z) == pytest.approx((pred.tcp_rest.x, pred.tcp_rest.y, pred.tcp_rest.z))
    arrows = sorted(by_ns["holding_torques"], key=lambda m: m.id)
    assert len(arrows) == 6 and all(m.type == Marker.ARROW for m in arrows)
    lengths = [math.dist((a.points[0].x, a.points[0].y, a.points[0].z), (a.points[1].x, a.points[1].y, a.points[1].z))
               for a in arrows]
    torques = np.abs(pred.holding_torques)
    scale = graph.predictor.p["marker_torque_scale"]
    assert np.allclose(lengths, np.minimum(scale * torques, 1.0), atol=1e-9)


def test_ghost_joint_states_carry_the_predicted_rest_pose(graph):
    graph.feed(graph.h.state())
    pred = graph.trigger()
    assert graph.wait(lambda: graph.h.ghosts)
    ghost = graph.h.ghosts[-1]
    assert list(ghost.name) == UR5_JOINTS
    assert np.allclose(ghost.position, last_positions(pred.trajectory), atol=1e-12)
    assert np.allclose(ghost.velocity, 0.0)


def test_a_brake_event_triggers_from_the_state_stamped_at_the_estop_instant_with_its_overrides(graph):
    t0 = graph.h.get_clock().now()
    stamps = [(t0 + rclpy.duration.Duration(nanoseconds=int(k * 2e6))).to_msg() for k in range(3)]
    for k, s in enumerate(stamps):
        graph.feed(graph.h.state(q=UR5_Q + 0.01 * k, stamp=s))
    event = BrakeEvent(joint_names=["elbow_joint", "not_a_joint"], action=BrakeEvent.ENGAGE)
    event.header.stamp = stamps[1]
    event.sliding_torque = [15.0, 1.0]  # a much weaker elbow brake than configured (45 N m)
    event.holding_torque = [float("nan"), 1.0]  # NaN: keep the configured value
    graph.h.pub_brake.publish(event)
    assert graph.wait(lambda: graph.h.predictions)
    pred = graph.h.predictions[-1]
    assert pred.success, pred.message
    assert np.allclose(first_positions(pred.trajectory), UR5_Q + 0.01, atol=1e-12)
    assert graph.wait(lambda: graph.h.has_log("brake_events", "unknown joints", "not_a_joint"))
    # the weak elbow brake lets the elbow travel further than with the configured brakes
    graph.h.pub_brake.publish(BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.RELEASE))
    assert graph.wait(lambda: graph.predictor.stop is None)
    graph.feed(graph.h.state(q=UR5_Q + 0.01))  # a fresh state: the Bool trigger refuses a stale one
    configured = graph.trigger()
    elbow = UR5_JOINTS.index("elbow_joint")
    assert abs(pred.stopping_angles[elbow]) > 1.5 * abs(configured.stopping_angles[elbow])


def test_predict_stop_service_answers_on_demand_and_rejects_incomplete_states(graph):
    client = graph.h.create_client(PredictStop, "predict_stop")
    assert graph.wait(client.service_is_ready)
    req = PredictStop.Request(state=JointState(name=UR5_JOINTS[::-1], position=list(UR5_Q[::-1]),
                                               velocity=list(UR5_V[::-1])), stop_category=0)
    fut = client.call_async(req)
    assert graph.wait(fut.done)
    res = fut.result()
    assert res.success, res.message
    assert np.allclose(first_positions(res.prediction.trajectory), UR5_Q, atol=1e-12)  # matched by name
    assert res.prediction.success and len(res.reactions_at_rest.wrenches) == 6
    assert not graph.h.predictions, "the service publishes nothing"
    bad = PredictStop.Request(state=JointState(name=UR5_JOINTS[:5], position=list(UR5_Q[:5]),
                                               velocity=list(UR5_V[:5])))
    fut = client.call_async(bad)
    assert graph.wait(fut.done)
    assert not fut.result().success and "state.name" in fut.result().message and "wrist_3_joint" in fut.result().message
    weak = "brakes:\n  joints:\n" + "".join(f"    {n}: {{sliding_torque: 2.0}}\n" for n in UR5_JOINTS)
    fut = client.call_async(PredictStop.Request(state=req.state, brake_config_yaml=weak, horizon=0.2))
    assert graph.wait(fut.done)
    assert not fut.result().prediction.success and "horizon" in fut.result().prediction.message


# the age limit is lenient here: on a loaded machine a prediction may take longer than the default 0.05 s, and a
# continuous output is refused beyond it (test_estop_predictor_continuous.py checks that refusal); so is the deadline
# (a loaded machine took 3.7 s for a first continuous prediction)
@pytest.mark.parametrize("graph", [{"continuous_rate": 50.0, "max_start_state_age": 5.0, "prediction_deadline": 60.0}],
                         indirect=True)
def test_continuous_mode_predicts_while_moving(graph):
    for _ in range(20):
        graph.feed(graph.h.state())
        graph.spin_for(0.02)
    assert graph.wait(lambda: sum(p.scenario_id == "continuous" for p in graph.h.predictions) >= 3)
    assert all(p.success for p in graph.h.predictions)


# ---------------------------------------------------------------------------------------------- robustness
#: These cases wait for log lines between the good state and the trigger; the start state's age is not what they
#: check (test_a_stale_joint_state_is_refused_with_its_age is).
LENIENT_START_STATE_AGE = pytest.mark.parametrize("graph", [{"max_start_state_age": 5.0}], indirect=True)


@LENIENT_START_STATE_AGE
def test_nan_joint_state_is_logged_and_dropped_and_good_input_still_served(graph):
    graph.feed(graph.h.state())
    bad_q = UR5_Q.copy()
    bad_q[2] = float("nan")
    graph.feed(graph.h.state(q=bad_q))
    assert graph.wait(lambda: graph.h.has_log("joint_states: message dropped", "position", "elbow_joint"))
    bad_v = UR5_V.copy()
    bad_v[0] = float("inf")
    graph.feed(graph.h.state(v=bad_v))
    assert graph.wait(lambda: graph.h.has_log("joint_states: message dropped", "velocity", "shoulder_pan_joint"))
    pred = graph.trigger()
    assert pred.success and np.allclose(first_positions(pred.trajectory), UR5_Q, atol=1e-12)


@LENIENT_START_STATE_AGE
def test_mismatched_lengths_are_logged_and_dropped(graph):
    graph.feed(graph.h.state())
    short = graph.h.state()
    short.position = list(UR5_Q[:4])
    graph.feed(short)
    assert graph.wait(lambda: graph.h.has_log("joint_states: message dropped", "position: 4 values for 6 names"))
    odd = graph.h.state()
    odd.velocity = list(UR5_V[:5])
    graph.feed(odd)
    assert graph.wait(lambda: graph.h.has_log("velocity: 5 values for 6 names"))
    assert graph.predictor.stats["joint_states_rejected"] == 2
    pred = graph.trigger()
    assert pred.success and np.allclose(first_positions(pred.trajectory), UR5_Q, atol=1e-12)


@LENIENT_START_STATE_AGE
def test_unknown_joint_names_are_logged_and_ignored_while_known_ones_are_used(graph):
    names = UR5_JOINTS + ["gripper_finger_joint"]
    graph.feed(graph.h.state(q=list(UR5_Q) + [0.3], v=list(UR5_V) + [0.1], names=names))
    assert graph.wait(lambda: graph.h.has_log("ignoring joints not in model", "gripper_finger_joint"))
    pred = graph.trigger()
    assert pred.success and np.allclose(first_positions(pred.trajectory), UR5_Q, atol=1e-12)


def test_subsets_of_joints_from_several_publishers_are_merged_by_name(graph):
    graph.feed(graph.h.state(q=UR5_Q[3:], v=UR5_V[3:], names=UR5_JOINTS[3:]))
    pred = graph.trigger()  # three joints never reported: refused with a reason
    assert not pred.success and "no complete joint state" in pred.message
    graph.feed(graph.h.state(q=UR5_Q[:3][::-1], v=UR5_V[:3][::-1], names=UR5_JOINTS[:3][::-1]))
    pred = graph.trigger()
    assert pred.success and np.allclose(first_positions(pred.trajectory), UR5_Q, atol=1e-12)


@LENIENT_START_STATE_AGE
def test_a_repeated_lock_event_is_logged_once_per_period_not_once_per_message(graph):
    """A controller that republishes its lock state at 1 kHz must not turn every message into a /rosout line: at
    the default log level that flood delayed E-stop predictions to a p95 of 0.24 s (1.25 s on the earlier code)."""
    for _ in range(200):
        graph.h.pub_lock.publish(LockEvent(joint_names=["wrist_3_joint"], action=LockEvent.UNLOCK, source="plc"))
    assert graph.wait(lambda: graph.h.has_log("lock event UNLOCK", "wrist_3_joint"))
    graph.spin_for(0.5)
    lines = [m for m in graph.h.log_lines() if "lock event UNLOCK" in m]
    assert len(lines) == 1, lines[:5]
    graph.feed(graph.h.state())
    assert graph.trigger().success  # and the E-stop is still served


@LENIENT_START_STATE_AGE
def test_lock_events_naming_unknown_joints_are_logged(graph):
    graph.feed(graph.h.state())
    graph.h.pub_lock.publish(LockEvent(joint_names=["elbow_joint", "no_such_joint"], action=LockEvent.LOCK,
                                       source="pawl"))
    assert graph.wait(lambda: graph.h.has_log("lock_events", "unknown joints", "no_such_joint"))
    assert graph.wait(lambda: graph.h.has_log("lock event LOCK", "elbow_joint"))
    assert graph.trigger().success


@pytest.mark.parametrize("graph", [{"allow_model_replacement": True}], indirect=True)
def test_invalid_urdf_on_robot_description_is_logged_and_the_model_kept(graph):
    graph.feed(graph.h.state())
    graph.h.pub_desc.publish(String(data="<robot name='broken'><link name='a'/><joint name='j' type='revolute'>"))
    assert graph.wait(lambda: graph.h.has_log("invalid robot description ignored", "keeping model 'ur5'"))
    graph.h.pub_desc.publish(String(data="this is not XML"))
    assert graph.wait(lambda: graph.h.has_log("robot_description", "not URDF XML"))
    assert graph.predictor.robot.name == "ur5"
    graph.feed(graph.h.state())  # fresh: waiting for the log lines took longer than max_start_state_age
    assert graph.trigger().success


def test_a_description_of_another_robot_never_replaces_the_model(graph):
    graph.h.pub_desc.publish(String(data=load_urdf_text("planar_3r")))
    assert graph.wait(lambda: graph.h.has_log("robot_description: new description ignored", "keeping model 'ur5'"))
    assert graph.predictor.robot.name == "ur5"
    graph.feed(graph.h.state())
    assert graph.trigger().success


def test_a_flood_of_events_is_processed_without_dropping_any_and_the_node_recovers(graph):
    graph.feed(graph.h.state())
    for k in range(100):
        ev = BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.ENGAGE if k % 2 == 0 else BrakeEvent.RELEASE)
        graph.h.pub_brake.publish(ev)
    stats = graph.predictor.stats
    assert graph.wait(lambda: stats["events"] >= 100, timeout=15.0)
    # every ENGAGE is a stop of its own (a RELEASE ended the one before): each is answered, none dropped
    assert graph.wait(lambda: len({p.scenario_id for p in graph.stop_predictions()}) == 50, timeout=30.0)
    graph.spin_for(0.3)
    assert len({p.scenario_id for p in graph.stop_predictions()}) == 50
    assert graph.wait(lambda: graph.predictor.stop is None)
    graph.feed(graph.h.state())
    pred = graph.trigger()
    assert pred.success and np.allclose(first_positions(pred.trajectory), UR5_Q, atol=1e-12)


def test_a_stale_joint_state_is_refused_with_its_age(graph):
    graph.feed(graph.h.state())
    graph.spin_for(0.2)
    pred = graph.trigger()
    assert not pred.success and "older than the trigger instant" in pred.message
    assert "max_start_state_age" in pred.message and pred.start_state_age >= 0.2
    assert pred.stop_category == StopPrediction.CATEGORY_0


def test_a_lock_event_of_a_joint_still_moving_revises_the_prediction_with_an_abrupt_lock(graph):
    stamp = graph.h.get_clock().now().to_msg()
    graph.feed(graph.h.state(stamp=stamp))
    graph.h.pub_brake.publish(BrakeEvent(header=graph.h.state(stamp=stamp).header, joint_names=UR5_JOINTS,
                                         action=BrakeEvent.ENGAGE))
    assert graph.wait(lambda: graph.h.predictions)
    first = graph.h.predictions[-1]
    wrist = UR5_JOINTS.index("wrist_1_joint")
    t_lock = 0.005
    assert first.joint_stop_times[wrist] > 2 * t_lock  # still moving at the lock instant
    lock = LockEvent(joint_names=["wrist_1_joint"], action=LockEvent.LOCK, source="pawl")
    lock.header.stamp = (rclpy.time.Time.from_msg(stamp) + rclpy.duration.Duration(nanoseconds=5_000_000)).to_msg()
    graph.h.pub_lock.publish(lock)
    assert graph.wait(lambda: graph.h.predictions[-1].scenario_id == "estop-1-rev1")
    rev = graph.h.predictions[-1]
    assert rev.success and rev.header.stamp == first.header.stamp
    locks = [e for e in rev.events if e.kind == TopologyEvent.LOCK]
    assert len(locks) == 1 and list(locks[0].joint_names) == ["wrist_1_joint"]
    t = locks[0].time_from_start.sec + 1e-9 * locks[0].time_from_start.nanosec
    assert abs(t - t_lock) < 1e-6 and abs(rev.joint_stop_times[wrist] - t_lock) < 1e-6
    assert locks[0].velocity_after[wrist] == 0.0 and locks[0].velocity_before[wrist] != 0.0
    # a lock of joints already at rest in the prediction changes nothing: no further revision
    late = LockEvent(joint_names=UR5_JOINTS, action=LockEvent.LOCK, source="standstill")
    late.header.stamp = (rclpy.time.Time.from_msg(stamp) + rclpy.duration.Duration(seconds=2.0)).to_msg()
    graph.h.pub_lock.publish(late)
    assert graph.wait(lambda: graph.h.has_log("lock event LOCK", "standstill"))
    graph.spin_for(0.2)
    assert graph.h.predictions[-1].scenario_id == "estop-1-rev1"
