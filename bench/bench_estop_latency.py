"""Latency from the E-stop event to the published prediction, UR5 with its default brakes, over real DDS.

The estop_predictor runs in its own process (as `ros2 run` starts it, shipped YAML). This script plays the robot:
it publishes joint states of the demo motion at 500 Hz and, N times, a BrakeEvent ENGAGE stamped at the instant
of the state just published (what a safety controller sends); it measures the wall time from publishing that event
to receiving the StopPrediction (DDS both ways, state selection, the core prediction, message building), then
releases the brakes and moves on to the next stop from another point of the motion.

Peer measured in the same run: the bare core call `vtm_dynamics.core.estop.predict_stop` on the same states in
this process (no ROS), i.e. the floor the node cannot beat; the ratio is the ROS overhead factor.

    .venv/bin/python bench/bench_estop_latency.py [--stops 40]
"""

from __future__ import annotations

import os
import random

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")  # DDS stays on this machine
os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 101)))

import argparse  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from vtm_msgs.msg import BrakeEvent, StopPrediction  # noqa: E402

from vtm_dynamics.nodes import prediction_io as io  # noqa: E402
from vtm_dynamics.nodes.conversions import joint_state_message  # noqa: E402
from vtm_dynamics.nodes.model_source import load_urdf_text, model_from_urdf_text  # noqa: E402
from vtm_dynamics.core.estop.braked_plant import demo_motion  # noqa: E402

CONFIG = os.path.join(REPO, "config", "estop_predict.yaml")
HOME = [0.0, -1.2, 1.4, -1.0, -1.57, 0.0]
AMPLITUDE = [0.8, 0.5, 0.6, 0.5, 0.5, 0.8]


def percentile(x: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(x), p))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stops", type=int, default=40)
    args = ap.parse_args()

    robot = model_from_urdf_text(load_urdf_text("ur5"))
    brakes = io.load_brakes(robot, "", "ur5")
    motion = demo_motion(robot.nv, HOME, AMPLITUDE, 0.25, [0.0] * robot.nv)
    names = list(robot.joint_names)

    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "vtm_dynamics.nodes.estop_predictor", "--ros-args", "--params-file", CONFIG,
         "-p", "ghost_rate:=0.0", "-p", "event_rate_limit:=1000.0", "--log-level", "warn"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    rclpy.init()
    node = rclpy.create_node("bench_estop_latency")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    events_qos = QoSProfile(depth=50, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
    pub_js = node.create_publisher(JointState, "joint_states", 20)
    pub_brake = node.create_publisher(BrakeEvent, "brake_events", events_qos)
    received: list[tuple[float, StopPrediction]] = []
    node.create_subscription(StopPrediction, "stop_prediction", lambda m: received.append((time.perf_counter(), m)),
                             10)
    t0 = time.monotonic()
    last = {}

    def publish_state() -> None:
        t = time.monotonic() - t0
        q, v, _ = motion.state(t)
        stamp = node.get_clock().now().to_msg()
        pub_js.publish(joint_state_message(names, q, v, stamp=stamp))
        last.update(q=q, v=v, stamp=stamp)

    node.create_timer(0.002, publish_state)

    def spin_until(cond, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            executor.spin_once(timeout_sec=0.001)
        return cond()

    try:
        if not spin_until(lambda: pub_brake.get_subscription_count() > 0 and node.count_publishers("stop_prediction")
                          > 0, 60.0):
            print("predictor did not come up", file=sys.stderr)
            return 1
        spin_until(lambda: False, 1.0)  # let the predictor collect states
        latencies, core_times, states = [], [], []
        rng = np.random.default_rng(7)
        for k in range(args.stops):
            spin_until(lambda: False, float(rng.uniform(0.15, 0.35)))  # move on to another point of the motion
            n = len(received)
            ev = BrakeEvent(joint_names=names, action=BrakeEvent.ENGAGE)
            ev.header.stamp = last["stamp"]
            states.append((last["q"].copy(), last["v"].copy()))
            t_pub = time.perf_counter()
            pub_brake.publish(ev)
            if not spin_until(lambda: len(received) > n, 10.0):
                print(f"stop {k}: no prediction", file=sys.stderr)
                return 1
            t_rx, msg = received[n]
            if not msg.success:
                print(f"stop {k}: prediction failed: {msg.message}", file=sys.stderr)
                return 1
            latencies.append(t_rx - t_pub)
            pub_brake.publish(BrakeEvent(joint_names=names, action=BrakeEvent.RELEASE))
        # peer in the same run: the bare core call on the same states
        for q, v in states:
            t = time.perf_counter()
            io.predict_stop(robot, brakes, q, v, category=0, tcp_frame="tool0", horizon=5.0)
            core_times.append(time.perf_counter() - t)
    finally:
        executor.remove_node(node)
        node.destroy_node()
        rclpy.try_shutdown()
        proc.terminate()
        proc.wait(timeout=10)

    med, p95 = statistics.median(latencies), percentile(latencies, 95)
    cmed, cp95 = statistics.median(core_times), percentile(core_times, 95)
    print(f"E-stop event -> published StopPrediction, UR5 default brakes, {len(latencies)} stops over DDS (loopback)")
    print(f"  latency   median {1e3 * med:7.2f} ms   p95 {1e3 * p95:7.2f} ms   max {1e3 * max(latencies):7.2f} ms")
    print(f"  core call median {1e3 * cmed:7.2f} ms   p95 {1e3 * cp95:7.2f} ms   (vtm_dynamics.core.estop.predict_stop,"
          " same states, no ROS)")
    print(f"  ratio latency/core (median): {med / cmed:.2f}  -> ROS + messages add {1e3 * (med - cmed):.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
