"""solvability_reporter: publishes which reactions of the robot description are unique, and analyses any URDF.

The node runs beside a test node on one executor; messages cross DDS on loopback. Expected answers are the ones
derived independently in test/core/reactions/test_solvability.py (by hand and from the paper), not produced by the node.
"""

import os

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rcl_interfaces.msg import Log
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from vtm_msgs.msg import SolvabilityEntry, SolvabilityReport
from vtm_msgs.srv import AnalyzeSolvability

from test.ros_helpers import REPO_ROOT, spin_until
from vtm_dynamics.nodes.params import ParameterError
from vtm_dynamics.nodes.solvability_reporter import SolvabilityReporter

LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


def _urdf(name: str) -> str:
    with open(os.path.join(REPO_ROOT, "urdf", name), encoding="utf-8") as handle:
        return handle.read()


@pytest.fixture()
def graph(request):
    """The reporter (start parameters by indirect parametrization: read-only once it runs) and a probe node."""
    rclpy.init()
    reporter = SolvabilityReporter(parameter_overrides=[Parameter(k, value=v)
                                                        for k, v in getattr(request, "param", {}).items()])
    probe = rclpy.create_node("solvability_probe")
    executor = SingleThreadedExecutor()
    executor.add_node(reporter)
    executor.add_node(probe)
    got = {"reports": [], "diagnostics": [], "logs": []}
    probe.create_subscription(SolvabilityReport, "/solvability_reporter/report", got["reports"].append, LATCHED)
    probe.create_subscription(DiagnosticArray, "/diagnostics", got["diagnostics"].append, 10)
    probe.create_subscription(Log, "/rosout", got["logs"].append, QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    description = probe.create_publisher(String, "robot_description", LATCHED)
    yield reporter, probe, executor, description, got
    executor.shutdown()
    probe.destroy_node()
    reporter.destroy_node()
    rclpy.shutdown()


def _publish_and_wait(executor, description, got, text, count):
    description.publish(String(data=text))
    assert spin_until(executor, lambda: len(got["reports"]) >= count and len(got["diagnostics"]) >= count, 20.0)
    return got["reports"][-1], got["diagnostics"][-1].status[0]


def test_parallelogram_description_gives_the_hand_derived_report_and_a_warning(graph):
    _, _, executor, description, got = graph
    report, status = _publish_and_wait(executor, description, got, _urdf("parallelogram_4bar.urdf"), 1)
    # spatial parallelogram: 3 bodies x 6 = 18 coordinates, 4 revolutes x 5 + 1 drive = 21 rows, rank 18, p = 3
    assert report.success and (report.coordinates, report.constraints, report.rank, report.redundancy) == (18, 21, 18, 3)
    verdicts = {e.name: e.solvable for e in report.pairs}
    assert verdicts == {"O1": False, "A1": False, "O2": False, "A2": False, "drive_O1": True}
    o1 = next(e for e in report.pairs if e.name == "O1")
    assert o1.kind == SolvabilityEntry.JOINT and o1.type == "revolute" and o1.rows == 5
    # in-plane forces Fx, Fy of every revolute are unique: two directions, 6-vectors, spanning the Fx-Fy plane
    assert o1.solvable_direction_count == 2 and len(o1.solvable_directions) == 12
    directions = [o1.solvable_directions[0:6], o1.solvable_directions[6:12]]
    assert all(abs(d[k]) < 1e-9 for d in directions for k in (2, 3, 4, 5))
    assert len(report.releasable) == 3
    assert 0 < report.relative_tolerance < report.tolerance
    assert status.level == DiagnosticStatus.WARN and all(n in status.message for n in ("O1", "A1", "O2", "A2"))


def test_a_late_subscriber_receives_the_latched_report(graph):
    _, probe, executor, description, got = graph
    _publish_and_wait(executor, description, got, _urdf("parallelogram_4bar_rssr.urdf"), 1)
    late = []
    probe.create_subscription(SolvabilityReport, "/solvability_reporter/report", late.append, LATCHED)
    assert spin_until(executor, lambda: bool(late), 20.0)
    assert late[0].success and late[0].redundancy == 0 and all(e.solvable for e in late[0].pairs)


def test_an_invalid_description_is_reported_and_logged_and_the_node_keeps_serving(graph):
    _, _, executor, description, got = graph
    report, status = _publish_and_wait(executor, description, got, "<robot name='broken'><link name='a'>", 1)
    assert not report.success and "cannot analyse" in report.message
    assert status.level == DiagnosticStatus.ERROR
    assert spin_until(executor, lambda: any("cannot analyse" in m.msg for m in got["logs"]
                                            if m.name == "solvability_reporter"), 10.0)
    dangling = _urdf("parallelogram_4bar.urdf").replace('<child link="', '<child link="nowhere_', 1)
    report, _ = _publish_and_wait(executor, description, got, dangling, 2)
    assert not report.success
    report, status = _publish_and_wait(executor, description, got, _urdf("parallelogram_4bar_rssr.urdf"), 3)
    assert report.success and report.redundancy == 0 and status.level == DiagnosticStatus.OK


def test_the_service_reproduces_the_papers_mobile_robot_in_planar_mode(graph):
    _, probe, executor, _, _ = graph
    client = probe.create_client(AnalyzeSolvability, "/solvability_reporter/analyze")
    assert spin_until(executor, client.service_is_ready, 20.0)
    future = client.call_async(AnalyzeSolvability.Request(urdf=_urdf("mobile_robot_knife_edges.urdf"), planar=True))
    assert spin_until(executor, future.done, 30.0)
    response = future.result()
    assert response.success, response.message
    r = response.report
    # Wojtyra & Fraczek 2013, Sect. 4.2: n = 21, m + h = 17 + 5, rank 20, p = 2
    assert (r.coordinates, r.constraints, r.rank, r.redundancy) == (21, 22, 20, 2)
    unsolvable = {e.name for e in r.pairs if not e.solvable}
    knives = {e.name for e in r.pairs if e.kind == SolvabilityEntry.KNIFE_EDGE}
    assert len(knives) == 5 and len(unsolvable & knives) == 4 and len(unsolvable) == 6


def test_the_service_answers_bad_urdf_with_a_reason_not_a_crash(graph):
    _, probe, executor, _, _ = graph
    client = probe.create_client(AnalyzeSolvability, "/solvability_reporter/analyze")
    assert spin_until(executor, client.service_is_ready, 20.0)
    same_body = _urdf("parallelogram_4bar.urdf").replace("</robot>", (
        '<loop_closure name="self" type="fixed"><parent link="world"/><child link="world"/></loop_closure></robot>'))
    for text, words in (("not xml", "URDF"), (same_body, "same link")):
        future = client.call_async(AnalyzeSolvability.Request(urdf=text))
        assert spin_until(executor, future.done, 20.0)
        response = future.result()
        assert not response.success and words in response.message and "\n" not in response.message
    future = client.call_async(AnalyzeSolvability.Request(urdf=_urdf("parallelogram_4bar.urdf"), positions=[0.0]))
    assert spin_until(executor, future.done, 20.0)
    assert not future.result().success and future.result().message.startswith("positions:")


@pytest.mark.parametrize("graph", [{"planar": True}], indirect=True)
def test_the_planar_analysis_is_chosen_at_start_up_and_no_parameter_changes_later(graph):
    reporter, _, executor, description, got = graph
    _publish_and_wait(executor, description, got, _urdf("parallelogram_4bar.urdf"), 1)
    planar = got["reports"][-1]
    assert planar.planar and planar.redundancy == 0  # the parallelogram is not redundant as a planar model
    for name, value in (("planar", False), ("relative_tolerance", 1e-3), ("max_links", 100000),
                        ("analysis_deadline", 3600.0), ("max_description_bytes", 1_000_000_000)):
        result = reporter.set_parameters([Parameter(name, value=value)])[0]
        assert not result.successful and name in result.reason
    assert reporter.p["planar"] and reporter.p["max_links"] == 500
    assert reporter.set_parameters([Parameter("marker_size", value=0.05)])[0].successful  # drawing only


def test_a_bad_start_value_refuses_to_start_with_the_parameter_named():
    rclpy.init()
    try:
        with pytest.raises(ParameterError) as err:
            SolvabilityReporter(parameter_overrides=[Parameter("relative_tolerance", value=-1.0)])
        assert str(err.value).startswith("relative_tolerance:")
    finally:
        rclpy.shutdown()


def test_a_missing_urdf_file_refuses_to_start_with_one_line():
    rclpy.init()
    try:
        with pytest.raises(ParameterError, match="urdf_path"):
            SolvabilityReporter(parameter_overrides=[Parameter("urdf_path", value="/nonexistent/robot.urdf")])
    finally:
        rclpy.shutdown()
