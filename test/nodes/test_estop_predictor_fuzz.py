"""estop_predictor survives any input: thousands of random messages through its real subscription callbacks and
random predict_stop requests through its worker-side handler, then a valid trigger is still predicted correctly.

Random, not property-based (Hypothesis is not in the environment): a seeded generator, so a failure reproduces.
"""

import math
import time

import numpy as np
import pytest
import rclpy
from builtin_interfaces.msg import Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from vtm_msgs.msg import BrakeEvent, LockEvent
from vtm_msgs.srv import PredictStop

from test.nodes.node_harness import graph, ros  # noqa: F401 - fixtures
from test.nodes.node_harness import UR5_JOINTS, UR5_Q, Graph, init_rclpy

N = 2000  # inputs per message type and run


WORDS = UR5_JOINTS + ["", "x" * 300, "ünïcödé", "../../etc/passwd", "/proc/self/environ", "joint\n2"]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 1e-300, 1e300, -1e300, float("nan"), float("inf"), float("-inf"), 1e6]


def _floats(rng, n):
    return [float(SPECIAL[i]) if i < len(SPECIAL) else float(rng.normal(0, 3))
            for i in rng.integers(0, len(SPECIAL) + 5, n)]


def _names(rng):
    return [WORDS[i] for i in rng.integers(0, len(WORDS), int(rng.integers(0, 9)))]


def _stamp(rng):
    sec = int(rng.choice([0, -5, 1, 2**31 - 1, -(2**31), int(time.time()), int(time.time()) + 10**6]))
    return Time(sec=sec, nanosec=int(rng.integers(0, 10**9)))


def _info(rng):
    kind = int(rng.integers(0, 4))
    if kind == 0:
        return None
    if kind == 1:
        return {}
    return {"received_timestamp": int(rng.choice([0, -1, time.time_ns(), 2**62])),
            "publisher_gid": {"data": bytes(rng.integers(0, 256, 16, dtype=np.uint8))} if kind == 2 else "junk"}


def _joint_state(rng):
    m = JointState(name=_names(rng))
    m.header.stamp = _stamp(rng)
    m.position = _floats(rng, int(rng.integers(0, 9)))
    m.velocity = _floats(rng, int(rng.integers(0, 9)))
    m.effort = _floats(rng, int(rng.integers(0, 3)))
    return m


def _brake(rng):
    m = BrakeEvent(joint_names=_names(rng), action=int(rng.integers(0, 4)))
    m.header.stamp = _stamp(rng)
    for field in ("engage_delay", "sliding_torque", "viscous_coefficient", "holding_torque"):
        setattr(m, field, _floats(rng, int(rng.integers(0, 9))))
    return m


def _lock(rng):
    m = LockEvent(joint_names=_names(rng), action=int(rng.integers(0, 4)), source=WORDS[int(rng.integers(0, 6))])
    m.header.stamp = _stamp(rng)
    return m


def _description(rng):
    return String(data=str(rng.choice(["", "/etc/hostname", "<robot", "<robot name='a'/>", "<" * 5000,
                                       "<robot name='r'><link name='a'/></robot>"])))


def _callbacks(node):
    """The subscription callbacks of the predictor (one node: the events' callback group included)."""
    return {s.topic_name.lstrip("/"): s.callback for s in node.subscriptions}


def test_random_inputs_never_kill_the_node_and_the_next_trigger_is_still_right(graph):
    rng = np.random.default_rng(2026)
    calls = _callbacks(graph.predictor)
    makers = {"joint_states": _joint_state, "brake_events": _brake, "lock_events": _lock,
              "estop": lambda r: Bool(data=bool(r.integers(0, 2))), "robot_description": _description}
    for topic, make in makers.items():
        call = calls[topic]
        takes_info = call.__code__.co_argcount >= 2
        for _ in range(N):
            msg = make(rng)
            call(msg, _info(rng)) if takes_info else call(msg)
    # requests through the service's part (what the worker runs for the service)
    for _ in range(300):
        req = PredictStop.Request(state=_joint_state(rng), stop_category=int(rng.integers(0, 4)),
                                  brake_config_yaml=str(rng.choice(["", "[" * 2000, "brakes: {joints: {a: 1}}",
                                                                   "{" * 50 + "}" * 50, "/etc/passwd"])),
                                  tcp_frame=str(rng.choice(["", "tool0", "/etc/hostname"])),
                                  horizon=float(rng.choice([0.0, -1.0, float("nan"), 1e9, 0.3])))
        res = graph.predictor.requests.answer(req, PredictStop.Response())
        assert "\n" not in res.message and "root:" not in res.message
    # the node is up and still predicts correctly over DDS. Random publishers may have left the E-stop line
    # true (it stays stopping while any publisher's latest value is true): a brake RELEASE ends the stop, and the
    # harness's own true is still an edge of its publisher
    graph.h.pub_brake.publish(BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.RELEASE))
    session = graph.predictor.session
    assert graph.wait(lambda: graph.predictor.stop is None and not session.closing, timeout=30.0)
    graph.feed(graph.h.state())
    graph.h.pub_estop.publish(Bool(data=True))
    assert graph.wait(lambda: graph.predictor.stop is not None)
    scenario = f"estop-{graph.predictor.stop.number}"
    assert graph.wait(lambda: [p for p in graph.h.predictions if p.scenario_id == scenario], timeout=10.0)
    pred = [p for p in graph.h.predictions if p.scenario_id == scenario][0]
    assert pred.success, pred.message
    positions = [pred.trajectory.points[0].positions[list(pred.trajectory.joint_names).index(n)] for n in UR5_JOINTS]
    assert pred.model_name == "ur5" and np.allclose(positions, UR5_Q, atol=1e-12)
    assert math.isfinite(pred.tcp_path_length)
