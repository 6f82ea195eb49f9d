"""The node executables as a launch file starts them (``node_main.run_node``): one node per process under launch's
name remap, every parameter listed and readable over DDS from another process, and exit status 0 on SIGINT
however the shutdown races the executor.

Before: ``-r __node:=estop_predictor`` (what ``ros2 launch`` passes to every node it names) renamed the predictor's
helper node ``estop_predictor_events`` too, so two nodes named ``estop_predictor`` were on the graph; the standard
``get_parameters`` service of ``projection_controller`` answered no value at all for a request naming all its
parameters (``ros2 param dump`` showed none), because six of them were declared by type only and stayed
uninitialized; and 1 in 8 SIGINT shutdowns ended with exit status 1 and a traceback from rclpy's
``_take_subscription``.

The four executables run together in a namespace of their own (launch's ``namespace=`` is the remap ``__ns``), as
in ``launch/estop_predict.launch.py``: robot_sim moves the robot and publishes joint states at 500 Hz once the
predictor listens, so every node is busy receiving when SIGINT comes; this process adds a flood of joint states and
E-stop line values until then.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import numpy as np
import pytest
import rclpy
from rcl_interfaces.srv import GetParameters, ListParameters
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from test.nodes.node_harness import EVENTS, TEST_BRAKES, UR5_JOINTS, UR5_Q, UR5_V
from test.ros_helpers import (
    REPO_ROOT, call_until_answered, default_signals, python_executable, ros_subprocess_env, spin_until,
)

CONFIG = os.path.join(REPO_ROOT, "config")
ARGS = {
    "estop_predictor": ["--params-file", os.path.join(CONFIG, "estop_predict.yaml"), "-p",
                        f"brake_config:={TEST_BRAKES}"],
    "projection_controller": ["--params-file", os.path.join(CONFIG, "projection_controller.yaml"), "-p",
                              f"urdf_path:={os.path.join(REPO_ROOT, 'urdf', 'slider_crank.urdf')}"],
    "solvability_reporter": ["--params-file", os.path.join(CONFIG, "solvability_reporter.yaml")],
    "robot_sim": ["--params-file", os.path.join(CONFIG, "estop_predict.yaml"), "-p", f"brake_config:={TEST_BRAKES}"],
}
ROUNDS = 5  # x 4 executables: 20 start/SIGINT cycles
UP_S = 90.0  # [s] generous bound on four nodes starting together on a loaded 2-core machine
EXIT_S = 30.0  # [s] bound on a node's shutdown


def _start(name: str, namespace: str) -> subprocess.Popen:
    cmd = [python_executable(), "-m", f"vtm_dynamics.nodes.{name}", "--ros-args", "-r", f"__node:={name}",
           "-r", f"__ns:={namespace}", *ARGS[name]]
    return subprocess.Popen(cmd, cwd=REPO_ROOT, env=ros_subprocess_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=default_signals)


def _call(node, executor, srv_type, name: str, request):
    client = node.create_client(srv_type, name)
    try:
        assert client.wait_for_service(timeout_sec=30.0), f"no service {name}"
        answer = call_until_answered(executor, client, request, 30.0)
        assert answer is not None, f"no answer from {name}"
        return answer
    finally:
        node.destroy_client(client)


def _flood(node, namespace: str, seconds: float) -> None:
    """Joint states and E-stop line values into the namespace for ``seconds`` (the nodes are busy receiving)."""
    states = node.create_publisher(JointState, f"{namespace}/joint_states", 20)
    line = node.create_publisher(Bool, f"{namespace}/estop", EVENTS)
    end, k = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        msg = JointState(name=UR5_JOINTS, position=list(UR5_Q), velocity=list(UR5_V))
        msg.header.stamp = node.get_clock().now().to_msg()
        states.publish(msg)
        line.publish(Bool(data=k % 2 == 0))
        k += 1
        time.sleep(0.0005)
    node.destroy_publisher(states)
    node.destroy_publisher(line)


@pytest.fixture(scope="module")
def cycles():
    """``ROUNDS`` rounds of the four executables started together and stopped with SIGINT. Returns, per round,
    the node names the graph showed in the round's namespace, the parameter lists (first round: list_parameters
    and get_parameters of every node, over DDS from this process) and each process's exit status and output."""
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("node_main_observer", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    rng = np.random.default_rng(30)
    rounds = []
    try:
        for k in range(ROUNDS):
            namespace = f"/node_main_{os.getpid()}_{k}"
            procs = {name: _start(name, namespace) for name in ARGS}
            record = {"namespace": namespace, "names": [], "parameters": {}, "exits": {}}
            try:
                def graph_names() -> list[str]:
                    return sorted(n for n, ns in node.get_node_names_and_namespaces() if ns == namespace)

                spin_until(executor, lambda: set(graph_names()) >= set(ARGS) or
                           any(p.poll() is not None for p in procs.values()), UP_S)
                spin_until(executor, lambda: False, 0.5)  # a second node of the same name would be seen by now
                record["names"] = graph_names()
                if k == 0:
                    for name in ARGS:
                        listed = _call(node, executor, ListParameters, f"{namespace}/{name}/list_parameters",
                                       ListParameters.Request()).result.names
                        values = _call(node, executor, GetParameters, f"{namespace}/{name}/get_parameters",
                                       GetParameters.Request(names=list(listed))).values
                        record["parameters"][name] = (list(listed), values)
                _flood(node, namespace, float(rng.uniform(0.0, 0.3)))
            finally:
                for p in procs.values():
                    if p.poll() is None:
                        p.send_signal(signal.SIGINT)
                for name, p in procs.items():
                    try:
                        out, _ = p.communicate(timeout=EXIT_S)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        out, _ = p.communicate(timeout=EXIT_S)
                        out += "\n[killed: no exit within the bound]"
                    record["exits"][name] = (p.returncode, out)
            rounds.append(record)
        yield rounds
    finally:
        executor.remove_node(node)
        node.destroy_node()
        executor.shutdown()
        rclpy.try_shutdown(context=context)


def test_each_executable_is_one_node_of_its_name_under_a_launch_name_remap(cycles):
    for record in cycles:
        assert record["names"] == sorted(ARGS), (record["namespace"], record["names"],
                                                 {n: out[-1500:] for n, (_, out) in record["exits"].items()})


def test_every_parameter_is_listed_and_readable_over_dds_from_another_process(cycles):
    """What ``ros2 param dump`` does: list_parameters (all prefixes, any depth), then get_parameters of every name
    listed - one value per name, of a set type."""
    for name, (listed, values) in cycles[0]["parameters"].items():
        assert "use_sim_time" in listed and len(listed) > 10, (name, listed)
        assert len(values) == len(listed), f"{name}: {len(values)} values for {len(listed)} parameters"
        unset = [n for n, v in zip(listed, values) if v.type == 0]  # PARAMETER_NOT_SET
        assert not unset, (name, unset)
    controller, _ = cycles[0]["parameters"]["projection_controller"]
    assert {"joints", "passive_joints", "task_joints", "task_components", "task_offset",
            "effort_limit_overrides"} <= set(controller)


def test_every_executable_exits_0_on_sigint_however_the_race_falls(cycles):
    exits = [(r["namespace"], name, rc, out) for r in cycles for name, (rc, out) in r["exits"].items()]
    assert len(exits) == 20
    bad = [(ns, name, rc, out[-2000:]) for ns, name, rc, out in exits if rc != 0 or "Traceback" in out]
    assert not bad, bad


RACING_NODE = '''
import sys
import threading
from rclpy.node import Node
from vtm_dynamics.nodes.node_main import run_node


class Racing(Node):
    """Raises what rclpy raised from _take_subscription when the shutdown invalidated a handle under it; with
    'shutdown', after shutting its context down (what SIGINT does from rclpy's signal thread) at that moment."""

    def __init__(self):
        super().__init__("racing")
        self.create_timer(0.01, self.tick)

    def tick(self):
        if sys.argv[1] == "shutdown":
            self.context.try_shutdown()
        elif sys.argv[1] == "shutdown_soon":  # the signal's shutdown, on another thread, reports a moment later
            threading.Timer(0.2, self.context.try_shutdown).start()
        raise RuntimeError("Unable to convert call argument '0' to Python object")


sys.exit(run_node("racing", Racing, ()))
'''


@pytest.mark.parametrize("when, status", [("shutdown", 0), ("shutdown_soon", 0), ("running", 1)])
def test_an_exception_out_of_spin_is_a_shutdown_race_only_once_the_shutdown_began(when, status):
    """The race made deterministic: after the shutdown began, the exception ends the process with 0; while the
    node runs, it is a defect and ends it with 1 and its traceback."""
    out = subprocess.run([python_executable(), "-c", RACING_NODE, when], cwd=REPO_ROOT, env=ros_subprocess_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == status, out.stdout + out.stderr
    assert ("Unable to convert call argument" in out.stderr) == (status == 1), out.stderr


INTERRUPTED_START = '''
import sys
from vtm_dynamics.nodes.node_main import run_node


def interrupted():
    """Ctrl-C while the node is still being made (loading its model, importing): what Python raises on SIGINT
    before rclpy's executor is spinning."""
    raise KeyboardInterrupt


sys.exit(run_node("interrupted", interrupted, ()))
'''


def test_ctrl_c_while_a_node_is_still_starting_ends_with_0_and_no_traceback():
    """A loaded machine makes start-up slow, and a launch's Ctrl-C may come before the node spins (seen in the
    start/SIGINT cycles: a KeyboardInterrupt traceback and status -2 from inside the predictor's construction)."""
    out = subprocess.run([python_executable(), "-c", INTERRUPTED_START], cwd=REPO_ROOT, env=ros_subprocess_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr


SETTLED_NODE = '''
import gc
import sys

from rclpy.node import Node

from vtm_dynamics.nodes.node_main import run_node


class Settled(Node):
    """Reports, once spinning, how many objects are frozen out of garbage collection."""

    def __init__(self):
        super().__init__("settled")
        self.create_timer(0.01, self.report)

    def report(self):
        print(f"frozen {gc.get_freeze_count()}", flush=True)
        self.context.try_shutdown()


sys.exit(run_node("settled", Settled, ()))
'''


def test_the_start_up_heap_is_collected_and_frozen_before_the_node_spins():
    """Python's first full collection came 8-10 s into a predictor's run and stopped it for 68-91 ms; with the
    start-up heap collected and frozen, later full collections see only what was made since (1.8 ms)."""
    out = subprocess.run([python_executable(), "-c", SETTLED_NODE], cwd=REPO_ROOT, env=ros_subprocess_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("frozen "))
    assert int(line.split()[1]) > 10_000  # rclpy, numpy, the node: all of start-up is out of later collections


INTERRUPTED_SETTLING = '''
import gc
import sys

from rclpy.node import Node

from vtm_dynamics.nodes.node_main import run_node


def interrupted_collection():
    """Ctrl-C during the start-up heap's collection (between the node's construction and its spin)."""
    raise KeyboardInterrupt


class Made(Node):
    def __init__(self):
        super().__init__("made")
        gc.collect = interrupted_collection  # the next collection is run_node's settling of the heap


sys.exit(run_node("made", Made, ()))
'''


def test_ctrl_c_while_the_start_up_heap_is_settled_ends_with_0_and_no_traceback():
    """The start/SIGINT cycles caught a Ctrl-C inside the start-up collection: status -2 and a KeyboardInterrupt
    traceback from the predictor, the node never destroyed."""
    out = subprocess.run([python_executable(), "-c", INTERRUPTED_SETTLING], cwd=REPO_ROOT, env=ros_subprocess_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
