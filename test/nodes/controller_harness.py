"""Test side of projection_controller tests over real DDS: the node in its own process (as `ros2 run` starts it),
subscriptions to what it publishes, a plant that plays the robot in lockstep with it, and a fixed robot that only
publishes one joint state at a steady rate (for tests about what the node commands, not about tracking)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import numpy as np
import pytest
import rclpy
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from vtm_msgs.msg import JointReactions

from test.ros_helpers import REPO_ROOT, python_executable, ros_subprocess_env, spin_until
from vtm_dynamics.core.projection.simulation import ConstraintSet, constrained_step
from vtm_dynamics.core.robot.model import RobotModel

SLIDER_CRANK = os.path.join(REPO_ROOT, "urdf", "slider_crank.urdf")
PLANAR_3R = os.path.join(REPO_ROOT, "urdf", "planar_3r.urdf")
CONFIG = os.path.join(REPO_ROOT, "config", "projection_controller.yaml")
LAUNCH = os.path.join(REPO_ROOT, "launch", "projection_controller.launch.py")
T0 = 1.0  # [s] simulated time at which the plant starts
DT = 0.004  # [s] plant step: joint states at 250 Hz of simulated time
LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
EVENTS = QoSProfile(depth=50, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)


@pytest.fixture(scope="module")
def ros():
    rclpy.init()
    node = rclpy.create_node("projection_controller_test")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    yield node, executor
    executor.remove_node(node)
    node.destroy_node()
    rclpy.shutdown()


class ControllerProcess:
    """The node in its own process (``python -m ...`` is what the ``projection_controller`` entry point runs)."""

    def __init__(self, tmp_path, name: str, *params: str) -> None:
        self.name = name
        self.log_path = tmp_path / f"{name}.log"
        args = [python_executable(), "-m", "vtm_dynamics.nodes.projection_controller", "--ros-args",
                "-r", f"__node:={name}", "--params-file", CONFIG]
        for p in params:
            args += ["-p", p]
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, cwd=REPO_ROOT, env=ros_subprocess_env(), stdout=self.log,
                                     stderr=subprocess.STDOUT, text=True)

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Outputs:
    """Subscriptions to what one controller process publishes."""

    def __init__(self, node, name: str, controller: str) -> None:
        self.node = node
        self.name = name
        self.commands: list[tuple[float, np.ndarray]] = []  # (plant time at receipt, efforts)
        self.command_wall: list[float] = []  # monotonic wall time [s] of each command's receipt here
        self.reactions: list[JointReactions] = []
        self.diagnostics: list[dict[str, str]] = []
        self.plant_time = 0.0
        self.subs = [
            node.create_subscription(Float64MultiArray, f"/{controller}/commands",
                                     self._on_command, 100),
            node.create_subscription(JointReactions, f"/{name}/joint_reactions", self.reactions.append, 100),
            node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 100),
        ]

    def _on_command(self, msg: Float64MultiArray) -> None:
        self.command_wall.append(time.monotonic())
        self.commands.append((self.plant_time, np.array(msg.data)))

    def _on_diag(self, msg: DiagnosticArray) -> None:
        for s in msg.status:
            if s.name.startswith(f"/{self.name}:"):
                d = {kv.key: kv.value for kv in s.values}
                d["_level"], d["_message"] = int.from_bytes(s.level, "little") if isinstance(s.level, bytes) \
                    else int(s.level), s.message
                self.diagnostics.append(d)

    def last_stamp(self) -> float:
        """Stamp [s] of the newest JointReactions, i.e. the node-clock time of its newest control cycle."""
        if not self.reactions:
            return -1.0
        st = self.reactions[-1].header.stamp
        return st.sec + 1e-9 * st.nanosec

    def close(self) -> None:
        for s in self.subs:
            self.node.destroy_subscription(s)


def trajectory_message(names, times, positions, velocities, accelerations, stamp: float) -> JointTrajectory:
    msg = JointTrajectory()
    msg.header.stamp = Time(sec=int(stamp), nanosec=int(round((stamp % 1) * 1e9)))
    msg.joint_names = list(names)
    for t, p, v, a in zip(times, positions, velocities, accelerations):
        pt = JointTrajectoryPoint(positions=[float(x) for x in p], velocities=[float(x) for x in v],
                                  accelerations=[float(x) for x in a])
        pt.time_from_start.sec = int(t)
        pt.time_from_start.nanosec = int(round((t % 1) * 1e9))
        msg.points.append(pt)
    return msg


class Plant:
    """The robot: integrates the core's constrained dynamics with the latest effort command (zero-order hold).

    Its brakes hold it until the first non-zero command arrives (as a drive releases its brakes once the
    controller is active); simulated time runs meanwhile.
    """

    def __init__(self, node, robot: RobotModel, constraints: ConstraintSet, q0, command_joints, outputs: Outputs):
        self.node, self.robot, self.constraints = node, robot, constraints
        self.q, self.v = np.array(q0, dtype=float), np.zeros(robot.nv)
        self.t = T0
        self.index = robot.v_indices(list(command_joints))
        self.outputs = outputs
        self.pub_state = node.create_publisher(JointState, "joint_states", 20)
        self.pub_clock = node.create_publisher(Clock, "/clock", 20)
        self.history: list[tuple[float, np.ndarray, np.ndarray]] = []
        self.released = False
        self.disturbance = None  # optional callable q -> generalized force [N m, N] the controller does not know

    def tau(self) -> np.ndarray:
        """The generalized force acting on the plant: the latest command plus the disturbance, if any."""
        tau = np.zeros(self.robot.nv)
        if self.outputs.commands:
            tau[self.index] = self.outputs.commands[-1][1]
        if self.disturbance is not None and self.released:
            tau = tau + self.disturbance(self.q)
        return tau

    def publish(self) -> None:
        stamp = Time(sec=int(self.t), nanosec=int(round((self.t % 1) * 1e9)) % 1_000_000_000)
        self.pub_clock.publish(Clock(clock=stamp))
        msg = JointState(name=list(self.robot.joint_names), position=[float(x) for x in self.q],
                         velocity=[float(x) for x in self.v])
        msg.header.stamp = stamp
        self.pub_state.publish(msg)

    def run(self, executor, until: float, on_step=None) -> None:
        """Step to simulated time ``until``. Lockstep with the node: after publishing the state at t, wait until
        the node has run a control cycle at t (its JointReactions carry the cycle's stamp), so the loop does not
        depend on how fast this machine is. A node that stops answering costs 1 s of wall time per step, and the
        assertions on the recorded motion fail."""
        while self.t < until - 1e-9:
            self.released = self.released or bool(self.outputs.commands and np.any(self.outputs.commands[-1][1] != 0.0))
            tau = self.tau()
            if self.released:
                step = constrained_step(self.robot, self.constraints, self.q, self.v, tau, DT)
                self.q, self.v = step.q, step.v
            self.t += DT
            self.outputs.plant_time = self.t
            self.history.append((self.t, self.q.copy(), self.v.copy()))
            if on_step is not None:
                on_step(self)
            self.publish()
            spin_until(executor, lambda: self.outputs.last_stamp() >= self.t - 1e-6, 1.0)
            for _ in range(3):
                executor.spin_once(timeout_sec=0.0)

    def close(self) -> None:
        self.node.destroy_publisher(self.pub_state)
        self.node.destroy_publisher(self.pub_clock)


def wait_for_subscribers(executor, *publishers, timeout: float = 20.0) -> None:
    assert spin_until(executor, lambda: all(p.get_subscription_count() > 0 for p in publishers), timeout), \
        "the controller process was not discovered"


def latest_diag(executor, out: Outputs, cond, timeout: float = 10.0) -> dict[str, str]:
    n = len(out.diagnostics)
    ok = spin_until(executor, lambda: any(cond(d) for d in out.diagnostics[n:]), timeout)
    assert ok, out.diagnostics[-1] if out.diagnostics else "no diagnostics"
    return [d for d in out.diagnostics[n:] if cond(d)][-1]


class FixedRobot:
    """A robot standing still at ``q``: publishes its joint state (zero velocity) every ``period`` [s] of wall time
    from a timer of the test node, so the node under test always has a fresh state while the test spins."""

    def __init__(self, node, names, q, period: float = 0.01) -> None:
        self.node, self.names, self.q = node, list(names), np.array(q, dtype=float)
        self.pub = node.create_publisher(JointState, "joint_states", 20)
        self.timer = node.create_timer(period, self.publish)

    def publish(self) -> None:
        msg = JointState(name=self.names, position=[float(x) for x in self.q], velocity=[0.0] * len(self.names))
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.pub.publish(msg)

    def close(self) -> None:
        self.node.destroy_timer(self.timer)
        self.node.destroy_publisher(self.pub)


def stamp_seconds(stamp) -> float:
    return stamp.sec + 1e-9 * stamp.nanosec
