"""Every node of the package holds IP sockets on loopback only - its process and every process it starts (the
solvability reporter's analysis worker). The four nodes run in one process started the way their executables
start (``node_main``: the isolation defaults, then ``rclpy.init`` inside the loopback profile's environment; one
process instead of four keeps the test cheap, and the executables share that start-up path - robot_sim's own
executable is checked in test/test_isolation.py). Read from what the kernel shows (``/proc/<pid>/fd`` ->
``/proc/<pid>/net/*``) once every node is on the graph, with a node of this process talking to them (so the DDS
sockets exist). The map tool's processes are checked in test/scaleout/test_cluster_security.py.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor

from test.nodes.node_harness import TEST_BRAKES
from test.ros_helpers import REPO_ROOT, inet_sockets, is_loopback, python_executable, ros_subprocess_env, stop_process

NODES = ("estop_predictor", "projection_controller", "solvability_reporter", "robot_sim")
HOST = textwrap.dedent("""
    import sys
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter
    from vtm_dynamics.nodes.fastdds_profile import rcl_init_environment
    from vtm_dynamics.nodes.graph import apply_isolation_defaults
    from vtm_dynamics.nodes.estop_predictor import EstopPredictor
    from vtm_dynamics.nodes.projection_controller import ProjectionController
    from vtm_dynamics.nodes.robot_sim import RobotSim
    from vtm_dynamics.nodes.solvability_reporter import SolvabilityReporter
    brakes, planar, parallelogram = sys.argv[1:4]
    apply_isolation_defaults()
    with rcl_init_environment():
        rclpy.init()
    def p(**kw):
        return [Parameter(k, value=v) for k, v in kw.items()]
    nodes = [EstopPredictor(parameter_overrides=p(robot="ur5", brake_config=brakes, continuous_rate=10.0)),
             ProjectionController(parameter_overrides=p(urdf_path=planar)),
             SolvabilityReporter(parameter_overrides=p(urdf_path=parallelogram)),
             RobotSim(parameter_overrides=p(brake_config=brakes, wait_for_subscribers=0))]
    executor = MultiThreadedExecutor(num_threads=2)
    for n in nodes:
        executor.add_node(n)
    try:
        executor.spin()
    finally:
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown()
""")


def _tree(pid: int) -> list[int]:
    import psutil

    try:
        return [pid] + [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def test_every_node_process_and_its_children_hold_loopback_sockets_only():
    urdf = os.path.join(REPO_ROOT, "urdf")
    proc = subprocess.Popen([python_executable(), "-c", HOST, TEST_BRAKES, os.path.join(urdf, "planar_3r.urdf"),
                             os.path.join(urdf, "parallelogram_4bar.urdf")], cwd=REPO_ROOT, env=ros_subprocess_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        probe = rclpy.create_node("socket_probe", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(probe)
        deadline = time.monotonic() + 90.0
        while time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
            names = {n for n, _ in probe.get_node_names_and_namespaces()}
            if set(NODES) <= names:
                break
        names = {n for n, _ in probe.get_node_names_and_namespaces()}
        assert set(NODES) <= names, f"nodes not on the graph: {set(NODES) - names}"
        for _ in range(10):  # a moment of traffic: every transport is open
            executor.spin_once(timeout_sec=0.1)
        assert proc.poll() is None, f"the node process ended with {proc.returncode}"
        tree = _tree(proc.pid)
        assert len(tree) >= 2, tree  # the solvability reporter's analysis worker is checked too
        sockets = [(pid, *s) for pid in tree for s in inet_sockets(pid)]
        assert any(s[1].startswith("udp") for s in sockets), sockets  # the check sees the DDS sockets
        exposed = [s for s in sockets if not is_loopback(s[2])]
        assert exposed == [], f"sockets not bound to loopback: {exposed}"
        executor.shutdown()
        probe.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
        stop_process(proc)
