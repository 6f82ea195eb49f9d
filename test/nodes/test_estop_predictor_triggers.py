"""estop_predictor over real DDS: no trigger is lost to a flood, and no long request keeps a genuine E-stop waiting.

Re-arm semantics used here (module docstring of ``stop_session``): the `estop` line is stopping while any
publisher's latest value is true; each genuine edge is followed by that publisher's `false`, which re-arms.
"""

import threading
import time

import pytest
import rclpy
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from vtm_msgs.msg import BrakeEvent
from vtm_msgs.srv import PredictStop

from test.nodes.node_harness import graph, ros  # noqa: F401 - fixtures
from test.nodes.node_harness import EVENTS, UR5_JOINTS, UR5_Q, UR5_V, Graph, init_rclpy


class Flooder:
    """Another participant publishing one message over and over at ``rate`` Hz on its own thread, for at most
    ``seconds`` (bounded: it stops by itself)."""

    def __init__(self, msg_type, topic, msg, rate: float, seconds: float) -> None:
        self.node = Node("flooder")
        self.pub = self.node.create_publisher(msg_type, topic, EVENTS)
        self.msg, self.period, self.seconds = msg, 1.0 / rate, seconds
        self.sent = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        end = time.monotonic() + self.seconds
        next_t = time.monotonic()
        while time.monotonic() < end:
            self.pub.publish(self.msg)
            self.sent += 1
            next_t += self.period
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def start(self, graph) -> "Flooder":
        assert graph.wait(lambda: self.pub.get_subscription_count() > 0), "flooder not matched"
        self.thread.start()
        return self

    def close(self) -> None:
        self.thread.join(timeout=self.seconds + 5)
        self.node.destroy_node()


@pytest.mark.parametrize("rate", [100.0, 1000.0])
def test_a_cyclic_false_publisher_does_not_mask_genuine_estop_edges(graph, rate):
    flood = Flooder(Bool, "estop", Bool(data=False), rate, 2.5).start(graph)
    try:
        graph.spin_for(0.2)
        edges = 6
        for k in range(edges):
            graph.feed(graph.h.state())
            n = len(graph.stop_predictions())
            graph.h.pub_estop.publish(Bool(data=True))
            assert graph.wait(lambda: len(graph.stop_predictions()) > n, timeout=5.0), f"edge {k} not predicted"
            graph.h.pub_estop.publish(Bool(data=False))
            graph.spin_for(0.05)
        assert flood.thread.is_alive() or flood.sent > rate  # the flood really ran alongside
    finally:
        flood.close()
    preds = graph.stop_predictions()
    assert len({p.scenario_id for p in preds}) == edges, [p.scenario_id for p in preds]
    assert all(p.success for p in preds), [p.message for p in preds]


def test_a_release_flood_does_not_hide_engage_events(graph):
    flood = Flooder(BrakeEvent, "brake_events", BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.RELEASE),
                    1000.0, 2.5).start(graph)
    try:
        graph.spin_for(0.2)
        for k in range(5):
            graph.feed(graph.h.state())
            n = len(graph.stop_predictions())
            stamp = graph.h.get_clock().now().to_msg()
            ev = BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.ENGAGE)
            ev.header.stamp = stamp
            graph.h.pub_brake.publish(ev)
            graph.feed(graph.h.state())  # the state at the instant arrives right after the event
            assert graph.wait(lambda: len(graph.stop_predictions()) > n, timeout=5.0), f"ENGAGE {k} not predicted"
            graph.spin_for(0.05)
    finally:
        flood.close()
    preds = graph.stop_predictions()
    assert len({p.scenario_id for p in preds}) == 5 and all(p.success for p in preds), \
        [(p.scenario_id, p.message) for p in preds]


def _genuine_estop_latency(graph) -> float:
    graph.feed(graph.h.state())
    n = len(graph.stop_predictions())
    t0 = time.monotonic()
    graph.h.pub_estop.publish(Bool(data=True))
    assert graph.wait(lambda: any(p.success for p in graph.stop_predictions()[n:]), timeout=10.0), \
        [p.message for p in graph.stop_predictions()[n:]]
    return time.monotonic() - t0


def test_a_long_horizon_request_neither_blocks_nor_delays_a_genuine_estop(graph):
    client = graph.h.create_client(PredictStop, "predict_stop")
    assert graph.wait(client.service_is_ready)
    state = JointState(name=UR5_JOINTS, position=list(UR5_Q), velocity=list(UR5_V))
    # brakes that hardly brake: the robot slides until the horizon (about 0.6 s of work for 30 s, measured)
    no_brakes = "brakes:\n  joints:\n" + "".join(f"    {n}: {{sliding_torque: 0.01}}\n" for n in UR5_JOINTS)
    huge = client.call_async(PredictStop.Request(state=state, brake_config_yaml=no_brakes, horizon=600.0))
    assert graph.wait(huge.done, timeout=5.0)
    assert not huge.result().success and "max_horizon" in huge.result().message
    # the longest horizon allowed, without brakes, still running on the worker while the E-stop comes
    long = client.call_async(PredictStop.Request(state=state, brake_config_yaml=no_brakes, horizon=30.0))
    graph.spin_for(0.05)
    assert _genuine_estop_latency(graph) < 1.0
    assert not long.done() or "horizon" in long.result().prediction.message  # it really was long
    assert graph.wait(long.done, timeout=30.0)
    res = long.result()
    assert not res.prediction.success  # it never stops; on a loaded machine it may even overrun the deadline
    assert ("not at rest within the horizon (30.000 s)" in res.prediction.message
            or "prediction_deadline" in res.prediction.message), res.prediction.message


def test_a_brake_event_with_a_huge_delay_does_not_delay_the_next_genuine_estop(graph):
    graph.feed(graph.h.state())
    ev = BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.ENGAGE)
    ev.header.stamp = graph.h.get_clock().now().to_msg()
    ev.engage_delay = [1e6] * 6
    graph.h.pub_brake.publish(ev)
    assert graph.wait(lambda: graph.h.predictions, timeout=5.0)
    bogus = graph.h.predictions[0]
    assert not bogus.success and "engage_delay" in bogus.message and "max_engage_delay" in bogus.message
    assert _genuine_estop_latency(graph) < 1.0


def test_nested_yaml_in_a_request_is_answered_and_the_next_trigger_is_served(graph):
    client = graph.h.create_client(PredictStop, "predict_stop")
    assert graph.wait(client.service_is_ready)
    state = JointState(name=UR5_JOINTS, position=list(UR5_Q), velocity=list(UR5_V))
    fut = client.call_async(PredictStop.Request(state=state, brake_config_yaml="[" * 1000 + "]" * 1000))
    assert graph.wait(fut.done, timeout=10.0)
    res = fut.result()
    assert not res.success and "brake_config_yaml" in res.message and "\n" not in res.message
    graph.feed(graph.h.state())
    assert graph.trigger().success


def test_a_trigger_during_a_running_prediction_is_served_right_after_it(graph):
    graph.feed(graph.h.state())
    first = BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.ENGAGE)
    first.header.stamp = graph.h.get_clock().now().to_msg()
    first.sliding_torque = [0.5] * 6  # weak brakes: a long slide, a longer prediction
    graph.h.pub_brake.publish(first)
    assert graph.wait(lambda: graph.predictor.stats["triggers"] == 1)
    graph.h.pub_brake.publish(BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.RELEASE))
    assert graph.wait(lambda: graph.predictor.stop is None)
    graph.feed(graph.h.state())
    graph.h.pub_estop.publish(Bool(data=True))  # the next stop, while the first is still being predicted
    assert graph.wait(lambda: len(graph.stop_predictions()) >= 2, timeout=10.0)
    assert [p.scenario_id for p in graph.stop_predictions()][:2] == ["estop-1", "estop-2"]
    assert graph.stop_predictions()[1].success


@pytest.mark.parametrize("graph", [{"prediction_deadline": 1e-4}], indirect=True)
def test_a_prediction_over_its_deadline_is_answered_success_false_and_the_node_goes_on(graph):
    graph.feed(graph.h.state())
    pred = graph.trigger()
    assert not pred.success and "prediction_deadline" in pred.message
    graph.feed(graph.h.state())
    again = graph.trigger()  # the next trigger is served (and judged by the same deadline)
    assert again.scenario_id != pred.scenario_id and not again.success and "prediction_deadline" in again.message


def test_a_cyclic_false_on_the_estop_line_does_not_end_a_stop_started_by_a_brake_event(graph):
    graph.feed(graph.h.state())
    ev = BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.ENGAGE)
    ev.header.stamp = graph.h.get_clock().now().to_msg()
    graph.h.pub_brake.publish(ev)
    assert graph.wait(lambda: graph.stop_predictions())
    for _ in range(5):  # the line was never true: these falses are no transition
        graph.h.pub_estop.publish(Bool(data=False))
    graph.spin_for(0.2)
    assert graph.predictor.stop is not None and graph.predictor.stop.number == 1
    graph.h.pub_brake.publish(BrakeEvent(joint_names=UR5_JOINTS, action=BrakeEvent.RELEASE))
    assert graph.wait(lambda: graph.predictor.stop is None)


@pytest.mark.parametrize("graph", [{"max_estop_publishers": 3}], indirect=True)
def test_other_publishers_sending_false_never_release_the_line_the_plc_holds(graph):
    """A PLC holds estop=true; more other publishers than the table holds each send false once. Before, the PLC's
    entry was evicted, the stop ended and the PLC's next cyclic true started a second stop."""
    graph.feed(graph.h.state())
    graph.h.pub_estop.publish(Bool(data=True))  # the harness's publisher is the PLC
    assert graph.wait(lambda: graph.stop_predictions())
    others = [graph.h.create_publisher(Bool, "estop", EVENTS) for _ in range(5)]
    try:
        assert graph.wait(lambda: all(p.get_subscription_count() > 0 for p in others))
        before = graph.predictor.stats["events"]
        for p in others:
            p.publish(Bool(data=False))
        assert graph.wait(lambda: graph.predictor.stats["events"] >= before + len(others))
        assert graph.predictor.stop is not None and graph.predictor.line.stopping
        graph.feed(graph.h.state())
        graph.h.pub_estop.publish(Bool(data=True))  # the PLC's cyclic true
        graph.spin_for(0.3)
        assert [p.scenario_id for p in graph.stop_predictions()] == ["estop-1"]  # no second stop
        graph.h.pub_estop.publish(Bool(data=False))  # the holder releases it
        assert graph.wait(lambda: graph.predictor.stop is None)
    finally:
        for p in others:
            graph.h.destroy_publisher(p)


def test_on_a_multithreaded_executor_requests_are_answered_and_excess_ones_refused():
    import threading

    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter

    from test.nodes.node_harness import TEST_BRAKES, Harness
    from vtm_dynamics.nodes.estop_predictor import EstopPredictor

    predictor = EstopPredictor(parameter_overrides=[Parameter(k, value=v) for k, v in {
        "robot": "ur5", "brake_config": TEST_BRAKES, "ghost_rate": 0.0, "max_pending_requests": 1}.items()])
    h = Harness("mt_harness")
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(predictor)
    executor.add_node(h)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        client = h.create_client(PredictStop, "predict_stop")
        assert client.wait_for_service(timeout_sec=10.0)
        state = JointState(name=UR5_JOINTS, position=list(UR5_Q), velocity=list(UR5_V))
        weak = "brakes:\n  joints:\n" + "".join(f"    {n}: {{sliding_torque: 0.01}}\n" for n in UR5_JOINTS)
        slow = client.call_async(PredictStop.Request(state=state, brake_config_yaml=weak, horizon=30.0))
        time.sleep(0.1)
        busy = client.call_async(PredictStop.Request(state=state))
        end = time.monotonic() + 30.0
        while time.monotonic() < end and not (slow.done() and busy.done()):
            time.sleep(0.01)
        assert busy.done() and not busy.result().success and "max_pending_requests" in busy.result().message
        assert slow.done() and not slow.result().prediction.success  # answered (never at rest in 30 s)
        good = client.call_async(PredictStop.Request(state=state))
        end = time.monotonic() + 10.0
        while time.monotonic() < end and not good.done():
            time.sleep(0.01)
        assert good.done() and good.result().success, good.result().message if good.done() else "no answer"
    finally:
        executor.shutdown(timeout_sec=5.0)
        spinner.join(timeout=5.0)
        predictor.destroy_node()
        h.destroy_node()
