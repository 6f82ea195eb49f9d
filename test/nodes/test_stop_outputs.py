"""What estop_predictor records about each E-stop prediction it publishes (stop_outputs), without ROS traffic."""

import pytest

from vtm_dynamics.nodes.stop_outputs import published_timing
from vtm_dynamics.nodes.stop_session import StopSession


def test_a_revisions_timing_is_stated_from_the_stops_trigger_and_from_its_own_request():
    """Trigger at 500.0 s (monotonic), revision requested at 500.7 s and published at 500.76 s: 0.76 s after the
    trigger, 0.06 s after its request."""
    s = StopSession()
    s.trigger(instant=100.0, stamped=False, received=100.0, wall=500.0, source="test")
    s.record(s.take_job(), True, None, None)
    s.trigger(instant=99.99, stamped=True, received=100.0, wall=500.7, source="test")  # gives the stop its stamp
    revision = s.take_job()
    timing = published_timing(revision, 500.76)
    assert timing.scenario == "estop-1-rev1"
    assert timing.since_trigger == pytest.approx(0.76, abs=1e-9)
    assert timing.since_request == pytest.approx(0.06, abs=1e-9)


class _Recorder:
    """Stands in for a publisher: keeps what is published."""

    def __init__(self, topic: str, sent: dict) -> None:
        self.topic, self.sent = topic, sent

    def publish(self, msg) -> None:
        self.sent.setdefault(self.topic, []).append(msg)


class _Node:
    """Stands in for the predictor node: publishers that record (no ROS graph)."""

    def __init__(self) -> None:
        self.sent: dict = {}

    def create_publisher(self, _type, topic, _depth):
        return _Recorder(topic, self.sent)

    def create_timer(self, *_args, **_kwargs):
        return None


def test_a_continuous_round_resting_past_a_joint_limit_goes_out_alone_as_a_failure():
    """The round's prediction serialized in the prediction process: only "not at rest" was checked, so a round
    whose elbow rests 0.107 rad past its limit also published its trajectory, reactions, markers and ghost, and
    /diagnostics said "ok"."""
    from types import SimpleNamespace

    from test.core.limit_case import UR5_BRAKES, elbow_towards_limit
    from vtm_dynamics.core.estop import predict_stop
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
    from vtm_dynamics.nodes import params as P
    from vtm_dynamics.nodes.continuous_messages import MessageRequest, serialized_messages
    from vtm_dynamics.nodes.estop_parameters import PARAMETERS, prediction_settings
    from vtm_dynamics.nodes.stop_outputs import StopOutputs

    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    q, v, limit = elbow_towards_limit(robot)
    result = predict_stop(robot, brakes_from_config(robot, UR5_BRAKES), q, v, tcp_frame="tool0")
    assert result.stopped and result.q_final[2] > limit + 0.1  # at rest, but past the elbow's limit
    p = P.values(PARAMETERS, {"robot": "ur5"})
    node = _Node()
    outputs = StopOutputs(node, p, prediction_settings(p), {"predictions": 0}, lambda *a: None)
    messages = serialized_messages(robot, result, MessageRequest(1000.0, None, "world", 0, 500, "ur5", "0" * 16, False))
    nominal = {"serialized": messages, "result": result, "markers": "markers", "ghost": "ghost"}
    model = SimpleNamespace(aux=robot, name="ur5", hash="0" * 16)
    outputs.publish_nominal(SimpleNamespace(model=model, sample=None, outcome=SimpleNamespace(reason="")), nominal,
                            0.01, "")
    assert list(node.sent) == ["stop_prediction"]  # alone
    assert not outputs.last_prediction.success and "elbow_joint" in outputs.last_prediction.message
