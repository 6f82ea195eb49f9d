"""estop_predictor over real DDS: the safety model is not replaced silently, and the node reports on /diagnostics."""

import hashlib
import re

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.parameter import Parameter
from std_msgs.msg import String

from test.nodes.node_harness import graph, ros  # noqa: F401 - fixtures
from test.nodes.node_harness import Graph, init_rclpy
from vtm_dynamics.nodes.model_source import load_urdf_text


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _heavier(text: str, factor: float = 10.0) -> str:
    return re.sub(r'<mass value="([^"]+)"', lambda m: f'<mass value="{float(m.group(1)) * factor!r}"', text)


def test_a_heavier_ur5_published_after_start_up_is_ignored_and_predictions_keep_the_model(graph):
    ur5 = load_urdf_text("ur5")
    heavy = _heavier(ur5)
    assert heavy != ur5
    graph.feed(graph.h.state())
    before = graph.trigger()
    assert before.success and before.model_hash == _hash(ur5) and before.model_name == "ur5"
    graph.h.pub_desc.publish(String(data=heavy))
    assert graph.wait(lambda: graph.h.has_log("robot_description: new description ignored", "allow_model_replacement"))
    graph.feed(graph.h.state())
    after = graph.trigger()
    assert after.success and after.model_hash == _hash(ur5)
    assert after.tcp_path_length == pytest.approx(before.tcp_path_length, rel=1e-9)


@pytest.mark.parametrize("graph", [{"allow_model_replacement": True}], indirect=True)
def test_with_replacement_enabled_only_a_model_with_the_same_joints_is_accepted(graph):
    graph.h.pub_desc.publish(String(data=load_urdf_text("planar_3r")))
    assert graph.wait(lambda: graph.h.has_log("new description ignored", "differ from the model"))
    assert graph.predictor.robot.name == "ur5"
    heavy = _heavier(load_urdf_text("ur5"))
    graph.h.pub_desc.publish(String(data=heavy))
    assert graph.wait(lambda: graph.predictor.model.hash == _hash(heavy))
    graph.feed(graph.h.state())
    pred = graph.trigger()
    assert pred.success and pred.model_hash == _hash(heavy)


def test_diagnostics_report_model_state_age_last_prediction_and_counts(graph):
    seen = []
    graph.h.create_subscription(DiagnosticArray, "/diagnostics", seen.append, 10)
    graph.feed(graph.h.state())
    pred = graph.trigger()
    graph.h.pub_desc.publish(String(data=_heavier(load_urdf_text("ur5"))))

    def latest():
        for array in reversed(seen):
            for s in array.status:
                if s.name.startswith("estop_predictor"):
                    return s
        return None

    def ready():
        s = latest()
        return s is not None and {kv.key: kv.value for kv in s.values}.get("model_replacements_refused") == "1"

    assert graph.wait(ready, timeout=5.0)
    status = latest()
    values = {kv.key: kv.value for kv in status.values}
    assert values["model_name"] == "ur5" and values["model_hash"] == pred.model_hash
    assert float(values["joint_state_age"]) < 5.0
    assert values["last_scenario"] == "estop-1" and values["last_success"] == "True"
    assert float(values["last_latency"]) > 0
    assert int(values["triggers"]) >= 1 and int(values["predictions"]) >= 1
    assert {"refused_work", "rejected_inputs"} <= set(values)
    assert status.level == DiagnosticStatus.WARN and "allow_model_replacement" in status.message


def test_without_a_configured_robot_the_first_description_sets_the_model_off_the_callback_thread():
    g = Graph({"robot": ""})
    try:
        assert g.predictor.robot is None
        text = load_urdf_text("ur5")
        g.h.pub_desc.publish(String(data=text))
        assert g.wait(lambda: g.predictor.model is not None and g.predictor.model.hash == _hash(text))
        g.feed(g.h.state())
        pred = g.trigger()
        assert pred.success and pred.model_hash == _hash(text)
    finally:
        g.close()
