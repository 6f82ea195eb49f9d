"""solvability_reporter against hostile or careless requests: paths in messages, huge and slow models, memory
exhaustion, malformed positions. The node runs as its own process (as `ros2 run` starts it), so its memory and
its survival are observed from outside; an audit hook installed in that process records every file it opens.

Expected answers come from the papers' examples (test/core/reactions/test_solvability.py) and from the caps themselves.
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rcl_interfaces.msg import Log
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from vtm_msgs.msg import SolvabilityReport
from vtm_msgs.srv import AnalyzeSolvability

from test.ros_helpers import (
    REPO_ROOT, call_until_answered, python_executable, ros_subprocess_env, spin_until, stop_process,
)

LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
ROSOUT = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                    durability=DurabilityPolicy.TRANSIENT_LOCAL)
GB = 1_000_000_000
NODE = "/solvability_reporter"

# Runs the node with an audit hook that records every open() of a path containing the marker directory, and with a
# 4 GB address-space bound on the whole node process (a safety net of this test, not of the node).
LAUNCHER = textwrap.dedent("""
    import os, resource, sys
    record, marker = sys.argv[1], sys.argv[2]
    fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    def hook(event, args):
        if event == "open" and args and marker in str(args[0]):
            os.write(fd, (str(args[0]) + "\\n").encode())
    sys.addaudithook(hook)
    resource.setrlimit(resource.RLIMIT_AS, (4 * 10**9, 4 * 10**9))
    from vtm_dynamics.nodes.solvability_reporter import main
    sys.exit(main(sys.argv[3:]))
""")


def _urdf(name: str) -> str:
    with open(os.path.join(REPO_ROOT, "urdf", name), encoding="utf-8") as handle:
        return handle.read()


def chain_urdf(links: int, name: str = "chain") -> str:
    """A serial chain of ``links`` bodies (world + links-1 revolute-jointed bodies), 1 kg each."""
    inertial = ('<inertial><mass value="1.0"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/>'
                '</inertial>')
    parts = [f'<robot name="{name}">', '<link name="world"/>']
    for k in range(1, links):
        parent = "world" if k == 1 else f"b{k - 1}"
        parts.append(f'<link name="b{k}">{inertial}</link>')
        parts.append(f'<joint name="j{k}" type="revolute"><parent link="{parent}"/><child link="b{k}"/>'
                     '<origin xyz="0 0.1 0"/><axis xyz="0 0 1"/>'
                     '<limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')
    parts.append("</robot>")
    return "".join(parts)


def welded_urdf(closures: int) -> str:
    """Three bodies, the first welded to the world ``closures`` times: 6 redundant rows each. Small text, but the
    analysis needs a dense matrix of some GB (measured peak address space 2.8 GB for 2000 closures)."""
    weld = ('<loop_closure name="w{k}" type="fixed"><parent link="world"/><child link="b1"/>'
            '<origin xyz="0 0.1 0"/></loop_closure>')
    return chain_urdf(3, "welded").replace("</robot>", "".join(weld.format(k=k) for k in range(closures)) + "</robot>")


def _status_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


class Client:
    """The test side: the service client, report/diagnostics/rosout recorders of the node called ``name``."""

    def __init__(self, name: str = NODE) -> None:
        self.name = name
        self.node = rclpy.create_node(f"solvability_hostile_probe_{uuid.uuid4().hex[:8]}")
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.reports: list[SolvabilityReport] = []
        self.diagnostics: list[DiagnosticArray] = []
        self.logs: list[Log] = []
        self.node.create_subscription(SolvabilityReport, f"{name}/report", self.reports.append, LATCHED)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 50)
        self.node.create_subscription(Log, "/rosout", self.logs.append, ROSOUT)
        self.description = self.node.create_publisher(String, "robot_description", LATCHED)
        self.analyze = self.node.create_client(AnalyzeSolvability, f"{name}/analyze")

    def call(self, request: AnalyzeSolvability.Request, timeout: float = 60.0) -> tuple[AnalyzeSolvability.Response, float]:
        start = time.monotonic()
        future = self.analyze.call_async(request)
        assert spin_until(self.executor, future.done, timeout), "no answer from ~/analyze"
        return future.result(), time.monotonic() - start

    def node_lines(self) -> list[str]:
        return [m.msg for m in self.logs if m.name == self.name.lstrip("/")]

    def everything_said(self) -> str:
        """Every text the node has put on the graph: reports, diagnostics (messages and values), log lines."""
        parts = [r.message for r in self.reports] + self.node_lines()
        for array in self.diagnostics:
            for status in array.status:
                parts.append(status.message)
                parts.extend(kv.value for kv in status.values)
        return "\n".join(parts)

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()


@contextlib.contextmanager
def _reporter_process(tmp_path_factory, *params: str, name: str = NODE):
    """A node process called ``name`` with ``analysis_memory_limit`` 1 GB and the given start parameters
    (``name:=value``; they are read-only once the node runs), and a client."""
    secrets = tmp_path_factory.mktemp(f"secret_{uuid.uuid4().hex[:8]}")
    record = secrets.parent / f"{secrets.name}_opened.txt"
    record.write_text("")
    args = ["--ros-args", "-p", f"analysis_memory_limit:={1 * GB}"]
    for p in params:
        args += ["-p", p]
    if name != NODE:
        args += ["-r", f"__node:={name.lstrip('/')}"]
    cmd = [python_executable(), "-c", LAUNCHER, str(record), secrets.name, *args]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=ros_subprocess_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    if not rclpy.ok():
        rclpy.init()
    client = Client(name)
    try:
        assert spin_until(client.executor, client.analyze.service_is_ready, 60.0), "node did not start"
        # an empty request (refused at once, nothing analysed) until the node's answers reach the client
        assert call_until_answered(client.executor, client.analyze, AnalyzeSolvability.Request(urdf="")) is not None
        yield proc, client, secrets, record
    finally:
        client.close()
        stop_process(proc)


@pytest.fixture(scope="module")
def reporter(tmp_path_factory):
    """The node process with the other parameters at their defaults."""
    try:
        with _reporter_process(tmp_path_factory) as started:
            yield started
    finally:
        rclpy.try_shutdown()


@pytest.fixture(scope="module")
def quick_deadline(reporter, tmp_path_factory):
    """A second node process whose analyses may take 0.5 s (started after ``reporter``, which owns rclpy)."""
    # it hears no robot_description: its (failing) analyses of the descriptions other tests publish would put
    # ERRORs on /diagnostics beside those of the node under test
    with _reporter_process(tmp_path_factory, "analysis_deadline:=0.5", "robot_description_topic:=''",
                           name="/solvability_quick") as started:
        yield started


def _assert_answers_the_parallelogram(client: Client) -> None:
    response, _ = client.call(AnalyzeSolvability.Request(urdf=_urdf("parallelogram_4bar.urdf")))
    assert response.success, response.message
    # spatial parallelogram: 18 coordinates, 21 rows, rank 18, redundancy 3 (hand-derived, test_solvability.py)
    r = response.report
    assert (r.coordinates, r.constraints, r.rank, r.redundancy) == (18, 21, 18, 3)


def test_a_path_in_a_message_is_refused_and_no_file_is_opened(reporter):
    proc, client, secrets, record = reporter
    secret = f"SECRET-{uuid.uuid4().hex}"
    path = secrets / "robot.urdf"
    path.write_text(f'<robot name="{secret}"><link name="{secret}"/></robot>\n')
    response, _ = client.call(AnalyzeSolvability.Request(urdf=str(path)))
    assert not response.success and response.message.startswith("urdf:") and "\n" not in response.message
    assert secret not in response.message and secret not in response.report.message
    def errors() -> int:
        return sum(s.level == DiagnosticStatus.ERROR and "robot_description" in s.message
                   for a in client.diagnostics for s in a.status)

    for text in (str(path), "  " + str(path), "file://" + str(path)):
        seen = errors()
        client.description.publish(String(data=text))  # latched, depth 1: one at a time
        assert spin_until(client.executor, lambda: errors() > seen, 30.0)
    time.sleep(0.5)  # a window for any late log line to arrive, then look at everything
    spin_until(client.executor, lambda: False, 0.5)
    assert secret not in client.everything_said()
    assert record.read_text() == "", "the node opened a file named by a message"
    assert proc.poll() is None
    _assert_answers_the_parallelogram(client)


def test_a_2000_link_request_is_refused_before_any_parse(reporter):
    proc, client, _, _ = reporter
    response, seconds = client.call(AnalyzeSolvability.Request(urdf=chain_urdf(2000)), timeout=30.0)
    print(f"2000-link request refused in {seconds * 1e3:.1f} ms")
    assert not response.success and response.message.startswith("urdf:") and "max_links" in response.message
    assert seconds < 5.0  # generous; the refusal is a bounded count of tags (measured: milliseconds)
    assert proc.poll() is None
    _assert_answers_the_parallelogram(client)


def test_the_node_keeps_answering_while_an_analysis_runs(reporter):
    _, client, _, _ = reporter
    heavy = client.analyze.call_async(AnalyzeSolvability.Request(urdf=chain_urdf(80)))  # seconds of work
    spin_until(client.executor, heavy.done, 0.3)
    quick = client.analyze.call_async(AnalyzeSolvability.Request(urdf=chain_urdf(2000)))
    assert spin_until(client.executor, quick.done, 60.0)
    assert not heavy.done(), "the refusal waited for the running analysis: the executor was blocked"
    assert not quick.result().success and "max_links" in quick.result().message
    assert spin_until(client.executor, heavy.done, 60.0)


def test_a_description_larger_than_the_byte_cap_is_refused(reporter):
    _, client, _, _ = reporter
    padding = "<!--" + "x" * 2_100_000 + "-->"
    response, _ = client.call(AnalyzeSolvability.Request(urdf=_urdf("parallelogram_4bar.urdf") + padding))
    assert not response.success and "max_description_bytes" in response.message


def test_an_analysis_past_the_deadline_is_stopped_and_the_next_request_is_served(quick_deadline):
    proc, client, _, _ = quick_deadline
    # 80 bodies: far below max_links, but seconds of analysis (100 bodies measured at 9 s)
    response, seconds = client.call(AnalyzeSolvability.Request(urdf=chain_urdf(80)), timeout=60.0)
    print(f"80-link request stopped after {seconds:.2f} s")
    assert not response.success and "deadline" in response.message and "\n" not in response.message
    assert proc.poll() is None
    _assert_answers_the_parallelogram(client)


def test_requests_beyond_max_pending_are_refused_at_once(quick_deadline):
    proc, client, _, _ = quick_deadline
    # max_pending_requests 4 (default): four 80-body requests wait or run, the fifth and sixth are refused
    futures = [client.analyze.call_async(AnalyzeSolvability.Request(urdf=chain_urdf(80))) for _ in range(6)]
    assert spin_until(client.executor, lambda: all(f.done() for f in futures), 120.0)
    messages = [f.result().message for f in futures]
    assert not any(f.result().success for f in futures)
    assert sum("max_pending_requests" in m for m in messages) == 2, messages
    assert sum("deadline" in m for m in messages) == 4, messages
    assert proc.poll() is None
    _assert_answers_the_parallelogram(client)


def test_an_analysis_beyond_the_memory_limit_fails_and_the_node_memory_stays_flat(reporter, tmp_path_factory):
    # 2000 closures pass the caps (max_links 2500): the memory limit must stop them; the sparse path needs far
    # less (next test), so this node analyses densely
    with _reporter_process(tmp_path_factory, "max_links:=2500", "analysis_method:=dense",
                           name="/solvability_dense") as (proc, client, _, _):
        _assert_answers_the_parallelogram(client)
        before = _status_kb(proc.pid, "VmHWM")
        response, seconds = client.call(AnalyzeSolvability.Request(urdf=welded_urdf(2000)), timeout=60.0)
        _assert_stopped_by_the_memory_limit(proc, client, response, seconds, before)


def _assert_stopped_by_the_memory_limit(proc, client, response, seconds, before) -> None:
    print(f"memory-hungry request failed after {seconds:.2f} s; node peak RSS {before} kB -> "
          f"{_status_kb(proc.pid, 'VmHWM')} kB")
    assert not response.success and "memory limit" in response.message
    assert proc.poll() is None
    _assert_answers_the_parallelogram(client)
    assert _status_kb(proc.pid, "VmHWM") - before < 100_000  # kB; the GB-sized matrix lived in the worker


def test_the_same_large_request_succeeds_by_the_sparse_path_within_the_limits(reporter, tmp_path_factory):
    # 2,000 bodies welded by 2,000 closures: the dense path needs GBs (previous test); auto picks the sparse path
    with _reporter_process(tmp_path_factory, "max_links:=2500", name="/solvability_sparse") as (proc, client, _, _):
        before = _status_kb(proc.pid, "VmHWM")
        response, seconds = client.call(AnalyzeSolvability.Request(urdf=welded_urdf(2000)), timeout=60.0)
        _assert_sparse_success(proc, client, response, seconds, before)


def _assert_sparse_success(proc, client, response, seconds, before) -> None:
    print(f"2,000 welded bodies by the sparse path: {seconds:.2f} s")
    assert response.success, response.message
    assert response.report.redundancy > 0 and len(response.report.pairs) > 2000
    assert _status_kb(proc.pid, "VmHWM") - before < 100_000  # kB: the work stayed in the worker
    _assert_answers_the_parallelogram(client)


@pytest.mark.parametrize("positions, words", [
    ([0.0, math.nan, 0.0], "not a finite number"),  # the parallelogram has 3 joint coordinates
    ([0.0], "values given"),
    ([0.0] * 1_000_000, "max_positions"),
])
def test_malformed_positions_get_one_line_naming_positions(reporter, positions, words):
    _, client, _, _ = reporter
    response, _ = client.call(AnalyzeSolvability.Request(urdf=_urdf("parallelogram_4bar.urdf"),
                                                         positions=positions))
    assert not response.success and response.message.startswith("positions:"), response.message
    assert words in response.message and "\n" not in response.message and len(response.message) < 200


def test_a_bad_description_does_not_replace_the_last_good_report(reporter):
    _, client, _, _ = reporter
    client.description.publish(String(data=_urdf("parallelogram_4bar.urdf")))
    assert spin_until(client.executor, lambda: any(
        r.success and r.model_name == "parallelogram_4bar" for r in client.reports), 60.0)
    errors = sum(s.level == DiagnosticStatus.ERROR for a in client.diagnostics for s in a.status)
    client.description.publish(String(data="<robot name='broken'><link name='a'>"))
    assert spin_until(client.executor, lambda: sum(
        s.level == DiagnosticStatus.ERROR for a in client.diagnostics for s in a.status) > errors, 60.0)
    late: list[SolvabilityReport] = []
    client.node.create_subscription(SolvabilityReport, f"{NODE}/report", late.append, LATCHED)
    assert spin_until(client.executor, lambda: bool(late), 20.0)
    assert late[-1].success and late[-1].model_name == "parallelogram_4bar" and late[-1].redundancy == 3
    last_error = [s for a in client.diagnostics for s in a.status if s.level == DiagnosticStatus.ERROR][-1]
    assert "cannot analyse" in last_error.message and "parallelogram_4bar" in last_error.message



def test_an_oversized_description_is_refused_fast_and_the_node_keeps_serving(reporter):
    proc, client, _, _ = reporter

    def refusals() -> int:
        return sum("max_links" in s.message for a in client.diagnostics for s in a.status)

    seen = refusals()
    client.description.publish(String(data=chain_urdf(2000)))
    assert spin_until(client.executor, lambda: refusals() > seen, 30.0)
    status = [s for a in client.diagnostics for s in a.status if "max_links" in s.message][-1]
    assert status.level == DiagnosticStatus.ERROR and status.message.startswith("robot_description:")
    assert proc.poll() is None
    _assert_answers_the_parallelogram(client)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-s"]))
