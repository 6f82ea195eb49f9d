"""robot_sim survives whatever a StopPrediction on the graph makes it do: an unexpected error while handling one is
reported in one line naming the topic, and the node keeps running."""

from __future__ import annotations

import pytest
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


def test_the_rest_check_keeps_a_tracks_metres_apart_from_the_arms_radians():
    """A track 3 mm off (beyond a 1 mm position tolerance) with the arm 1 mrad off: the check took the largest error
    over all joints, 3e-3, against the angle tolerance of 5e-3 "rad" and said OK."""
    import numpy as np

    from vtm_dynamics.nodes.robot_sim import PARAMETERS, rest_errors

    angle, position = rest_errors(np.array([0.503, 1.001, -0.5]), np.array([0.5, 1.0, -0.5]),
                                  np.array([True, False, False]))
    assert angle == pytest.approx(1e-3, abs=1e-9) and position == pytest.approx(3e-3, abs=1e-9)
    assert rest_errors(np.array([1.0]), np.array([0.998]), np.array([False])) == pytest.approx((2e-3, 0.0))
    spec = next(p for p in PARAMETERS if p.name == "position_tolerance")
    assert not spec.live and "[m]" in spec.description  # read-only after start-up, as the other tolerances
