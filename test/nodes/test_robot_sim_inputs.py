"""robot_sim survives whatever a StopPrediction on the graph makes it do: an unexpected error while handling one is
reported in one line naming the topic, and the node keeps running."""

from __future__ import annotations

import rclpy
from rclpy.parameter import Parameter
from vtm_msgs.msg import StopPrediction

from test.nodes.node_harness import TEST_BRAKES


def test_an_error_while_handling_a_prediction_is_one_line_not_a_dead_node():
    from vtm_dynamics.nodes.robot_sim import RobotSim

    rclpy.init()
    try:
        sim = RobotSim(parameter_overrides=[Parameter("brake_config", value=TEST_BRAKES)])
        lines = []
        sim.log.logger = type("Logger", (), {"error": lines.append, "warning": lines.append, "info": lines.append})()
        sim.phase, sim.plant = "rest", type("Plant", (), {"at_rest": True})()

        def broken_compare():
            raise IndexError("positions: 1 value for 6 joints")

        sim._compare = broken_compare
        callback = next(s.callback for s in sim.subscriptions if s.topic_name == "/stop_prediction")
        callback(StopPrediction(scenario_id="estop-1"))  # must not raise
        assert lines == ["stop_prediction: unexpected IndexError: positions: 1 value for 6 joints"]
        sim.destroy_node()
    finally:
        rclpy.try_shutdown()
