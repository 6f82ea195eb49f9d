"""The predictor's E-stop source configured by topic, type, field and values (a driver's safety-mode message
instead of a Bool), with the same per-publisher line rules; a type or field that does not exist stops the node
at start-up with one line naming the parameter.

``vtm_msgs/msg/BrakeEvent`` stands in for a driver's status type here: a uint8 field (``action``) with named
constants (``ENGAGE``, ``RELEASE``), like ``ur_dashboard_msgs/msg/SafetyMode.mode``."""

import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from vtm_msgs.msg import BrakeEvent

from test.nodes.node_harness import ros  # noqa: F401 - fixture
from test.nodes.node_harness import EVENTS, TEST_BRAKES, Harness
from test.ros_helpers import spin_until
from vtm_dynamics.nodes import params as P

SAFETY = {"trigger_topic": "safety_mode", "trigger_type": "vtm_msgs/msg/BrakeEvent", "trigger_field": "action",
          "trigger_values": ["ENGAGE"], "trigger_on_brake_event": False}


def _predictor(extra):
    from vtm_dynamics.nodes.estop_predictor import EstopPredictor

    params = {"robot": "ur5", "brake_config": TEST_BRAKES, "ghost_rate": 0.0, "max_start_state_age": 0.15, **extra}
    return EstopPredictor(parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])


@pytest.fixture
def safety_graph():
    predictor = _predictor(SAFETY)
    h = Harness()
    other = Node("second_safety_publisher")
    pubs = [h.create_publisher(BrakeEvent, "safety_mode", EVENTS), other.create_publisher(BrakeEvent, "safety_mode",
                                                                                          EVENTS)]
    ex = SingleThreadedExecutor()
    for n in (predictor, h, other):
        ex.add_node(n)
    assert spin_until(ex, lambda: all(p.get_subscription_count() > 0 for p in pubs)
                      and h.pub_js.get_subscription_count() > 0, 10.0), "predictor not discovered"
    yield predictor, h, pubs, ex
    for n in (predictor, h, other):
        ex.remove_node(n)
        n.destroy_node()
    ex.shutdown()


def _feed(predictor, h, ex):
    stats = predictor.stats
    before = stats["joint_states_ok"]
    h.pub_js.publish(h.state())
    assert spin_until(ex, lambda: stats["joint_states_ok"] > before, 10.0)


def test_a_safety_mode_value_fires_a_prediction_and_lines_are_per_publisher(safety_graph):
    predictor, h, (a, b), ex = safety_graph
    _feed(predictor, h, ex)
    b.publish(BrakeEvent(action=BrakeEvent.RELEASE))  # not stopping
    a.publish(BrakeEvent(action=BrakeEvent.ENGAGE))  # stopping: a rising edge of publisher a
    assert spin_until(ex, lambda: any(p.scenario_id == "estop-1" for p in h.predictions), 10.0), "no prediction"
    first = next(p for p in h.predictions if p.scenario_id == "estop-1")
    assert first.success, first.message
    b.publish(BrakeEvent(action=BrakeEvent.RELEASE))  # another publisher's "not stopping" does not end a's stop
    spin_until(ex, lambda: False, 0.3)
    assert predictor.stop is not None
    a.publish(BrakeEvent(action=BrakeEvent.RELEASE))
    assert spin_until(ex, lambda: predictor.stop is None, 10.0), "the line's release did not end the stop"
    _feed(predictor, h, ex)
    b.publish(BrakeEvent(action=BrakeEvent.ENGAGE))  # and b's own edge fires the next stop
    assert spin_until(ex, lambda: any(p.scenario_id == "estop-2" for p in h.predictions), 10.0)


@pytest.mark.parametrize("extra, expected", [
    ({"trigger_type": "ur_dashboard_msgs/msg/SafetyMode"}, "trigger_type: message package 'ur_dashboard_msgs' is "
                                                           "not installed"),
    ({"trigger_type": "std_msgs/msg/NoSuchType"}, "trigger_type: std_msgs/msg has no message type 'NoSuchType'"),
    ({"trigger_type": "os/msg/Path"}, "trigger_type: message package 'os' is not installed"),
    ({"trigger_type": "std_msgs.msg.Bool"}, "trigger_type: expected '<package>/msg/<Type>'"),
    ({"trigger_field": "mode"}, "trigger_field: 'mode' does not exist in std_msgs/msg/Bool (fields: data)"),
    ({"trigger_type": "vtm_msgs/msg/BrakeEvent", "trigger_field": "header"}, "is not a single bool, number or "
                                                                             "string"),
    ({"trigger_type": "vtm_msgs/msg/BrakeEvent", "trigger_field": "action", "trigger_values": ["ENGAGE", "ENGAEG"]},
     "trigger_values: 'ENGAEG' is neither a number nor a constant of the type (trigger_field 'action' of "
     "vtm_msgs/msg/BrakeEvent is a number; constants: ENGAGE, RELEASE)"),
    ({"trigger_values": ["yes"]}, "trigger_values: 'yes' is not true or false (trigger_field 'data' of "
                                  "std_msgs/msg/Bool is a bool)"),
])
def test_a_trigger_that_cannot_work_refuses_to_start_with_one_line(extra, expected):
    with pytest.raises(P.ParameterError) as err:
        _predictor(extra)
    assert expected in str(err.value) and "\n" not in str(err.value)
