"""E-stop line edge -> published StopPrediction, quiet and under a 1 kHz flood on every input topic plus a CPU hog.

The estop_predictor runs in its own process (shipped YAML). This script plays the robot (joint states of the demo
motion at 500 Hz) and a safety button: N one-shot ``estop`` edges (true, and false once the prediction arrived).
It measures the wall time from publishing ``true`` to receiving the StopPrediction of that edge, first quiet, then
while other participants publish at 1 kHz each: ``estop`` false (a cyclic PLC line), ``brake_events`` RELEASE,
``lock_events`` UNLOCK, ``joint_states`` of an unknown joint and ``robot_description`` (the same text again), and a
busy-looping process competes for the CPU. Every flood is bounded in time and stops by itself; the hog is ended
by its PID. Reports median / p95 / max and how many edges went unanswered (must be 0).

    .venv/bin/python bench/bench_estop_flood.py [--edges 30]
"""

from __future__ import annotations

import os
import random

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")  # DDS stays on this machine
os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 101)))

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Bool, String  # noqa: E402
from vtm_msgs.msg import BrakeEvent, LockEvent, StopPrediction  # noqa: E402

from vtm_dynamics.core.estop.braked_plant import demo_motion  # noqa: E402
from vtm_dynamics.nodes import graph  # noqa: E402
from vtm_dynamics.nodes.conversions import joint_state_message  # noqa: E402
from vtm_dynamics.nodes.model_source import load_urdf_text, model_from_urdf_text  # noqa: E402

CONFIG = os.path.join(REPO, "config", "estop_predict.yaml")
HOME = [0.0, -1.2, 1.4, -1.0, -1.57, 0.0]
AMPLITUDE = [0.8, 0.5, 0.6, 0.5, 0.5, 0.8]


STOP = threading.Event()


def flood(node, msg_type, topic, msg, qos, rate: float, seconds: float) -> threading.Thread:
    pub = node.create_publisher(msg_type, topic, qos)

    def run() -> None:
        end = time.monotonic() + seconds
        next_t = time.monotonic()
        while time.monotonic() < end and not STOP.is_set():
            pub.publish(msg)
            next_t += 1.0 / rate
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    return threading.Thread(target=run, daemon=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--edges", type=int, default=30)
    ap.add_argument("--floods", default="estop,brake_events,lock_events,joint_states,robot_description",
                    help="comma-separated topics to flood (default: all inputs)")
    ap.add_argument("--no-hog", action="store_true", help="without the CPU hog")
    ap.add_argument("-p", dest="params", action="append", default=[], help="extra predictor parameter name:=value")
    args = ap.parse_args()

    robot = model_from_urdf_text(load_urdf_text("ur5"))
    names = list(robot.joint_names)
    motion = demo_motion(robot.nv, HOME, AMPLITUDE, 0.25, [0.0] * robot.nv)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "vtm_dynamics.nodes.estop_predictor", "--ros-args", "--params-file", CONFIG,
         "-p", "ghost_rate:=0.0", *[x for p in args.params for x in ("-p", p)], "--log-level", "warn"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL,
        stderr=open(os.environ["BENCH_LOG"], "w") if os.environ.get("BENCH_LOG") else subprocess.DEVNULL,
    )
    hog = None
    threads: list[threading.Thread] = []
    rclpy.init()
    node = rclpy.create_node("bench_estop_flood")
    flooder = rclpy.create_node("bench_flooder")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    events = graph.events_qos(1000)
    pub_js = node.create_publisher(JointState, "joint_states", 20)
    pub_estop = node.create_publisher(Bool, "estop", events)
    received: list[tuple[float, StopPrediction]] = []
    node.create_subscription(StopPrediction, "stop_prediction", lambda m: received.append((time.perf_counter(), m)),
                             100)
    t0 = time.monotonic()

    def publish_state() -> None:
        q, v, _ = motion.state(time.monotonic() - t0)
        pub_js.publish(joint_state_message(names, q, v, stamp=node.get_clock().now().to_msg()))

    node.create_timer(0.002, publish_state)

    def spin_until(cond, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            executor.spin_once(timeout_sec=0.001)
        return cond()

    def run_edges(n: int) -> tuple[list[float], int, int]:
        latencies, lost, failed = [], 0, 0
        for _ in range(n):
            spin_until(lambda: False, 0.1)
            seen = {m.scenario_id for _, m in received}
            t_pub = time.perf_counter()
            pub_estop.publish(Bool(data=True))
            if not spin_until(lambda: any(m.scenario_id not in seen for _, m in received), 5.0):
                lost += 1
                if os.environ.get("BENCH_VERBOSE"):
                    print("    lost; last seen:", [m.scenario_id for _, m in received[-3:]])
            else:
                t_rx, msg = next((t, m) for t, m in received if m.scenario_id not in seen)
                latencies.append(t_rx - t_pub)
                failed += not msg.success
                if not msg.success and os.environ.get("BENCH_VERBOSE"):
                    print("   ", msg.scenario_id, msg.message)
            pub_estop.publish(Bool(data=False))
        return latencies, lost, failed

    def report(label: str, lat: list[float], lost: int, failed: int) -> None:
        x = 1e3 * np.asarray(lat)
        print(f"  {label:28s} median {np.median(x):7.2f} ms   p95 {np.percentile(x, 95):7.2f} ms   max "
              f"{x.max():7.2f} ms   edges {len(lat) + lost}, lost {lost}, success=false {failed}")

    try:
        if not spin_until(lambda: pub_estop.get_subscription_count() > 0 and node.count_publishers("stop_prediction")
                          > 0, 60.0):
            print("predictor did not come up", file=sys.stderr)
            return 1
        spin_until(lambda: False, 1.0)
        print(f"E-stop edge -> published StopPrediction, UR5, predictor in its own process, {args.edges} edges each")
        report("quiet", *run_edges(args.edges))
        seconds = args.edges * 0.2 + 10.0
        desc = load_urdf_text("ur5")
        floods = {
            "estop": (Bool, Bool(data=False), events),
            "brake_events": (BrakeEvent, BrakeEvent(joint_names=names, action=BrakeEvent.RELEASE), events),
            "lock_events": (LockEvent, LockEvent(joint_names=names, action=LockEvent.UNLOCK), events),
            "joint_states": (JointState, JointState(name=["flood_joint"], position=[0.0]), 20),
            "robot_description": (String, String(data=desc), graph.LATCHED),
        }
        chosen = [t for t in args.floods.split(",") if t]
        threads = [flood(flooder, floods[t][0], t, floods[t][1], floods[t][2], 1000.0, seconds) for t in chosen]
        if not args.no_hog:
            hog = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + %f\nwhile time.time() "
                                    "< end: pass" % seconds])
        for t in threads:
            t.start()
        spin_until(lambda: False, 1.0)
        report(f"1 kHz flood x{len(chosen)}" + ("" if args.no_hog else " + CPU hog"), *run_edges(args.edges))
    finally:
        STOP.set()
        for t in threads:
            t.join(timeout=5)
        if hog is not None:
            hog.terminate()
            hog.wait(timeout=10)
        executor.remove_node(node)
        node.destroy_node()
        flooder.destroy_node()
        rclpy.try_shutdown()
        proc.terminate()
        proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
