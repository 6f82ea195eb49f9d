"""Stop-safe motion on the ROS graph: the live protective separation distance's rate and the E-stop latency while
it runs and while a check_trajectory request runs, UR5, one CPU core.

The process is pinned to one core (``os.sched_setaffinity``); estop_predictor (test brakes, shipped defaults
otherwise) and a harness node share one executor, with the node's worker threads. The harness publishes joint
states of a moving UR5 at 500 Hz from a thread and, per trigger, a rising edge on ``estop`` timed until its
StopPrediction arrives (then the line is released and the stop re-armed).

Phases, in alternating blocks so that a change of the machine's load affects all alike:
  quiet  - continuous mode off, no check;
  psd    - continuous mode at ``--rate`` Hz with ``separation_distance`` (worst corner: one prediction per round)
           and the live stopping distance off; the achieved rate of successful SeparationDistance messages;
  check  - a check_trajectory request of a long trajectory running on the auxiliary worker during the triggers.
Peer in the same run: the bare core ``SeparationMonitor.evaluate`` at the same states (its rate is the ceiling of
the node's). Targets (issue 31): PSD >= 50 Hz on one core; the E-stop p95 with PSD or a check running within its
latency target (50 ms under load). The machine is shared: state its load average beside the figures.

    .venv/bin/python bench/bench_stopsafe_ros.py [--triggers 10] [--blocks 2] [--rate 100]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import rclpy  # noqa: E402
from std_msgs.msg import Bool  # noqa: E402
from vtm_msgs.msg import SeparationDistance  # noqa: E402
from vtm_msgs.srv import CheckTrajectory  # noqa: E402

from test.nodes.node_harness import TEST_BRAKES, UR5_Q, Graph  # noqa: E402
from test.nodes.test_trajectory_check import wall_request  # noqa: E402

PERSON = [0.7, 0.3, 0.4]
FAILED: list[float] = []  # predictions answered success=false (e.g. a start state too old on a starved core)
AMPLITUDE, OMEGA = np.array([0.4, 0.3, 0.3, 0.3, 0.3, 0.4]), 1.5


class Feed:
    """Joint states of a moving UR5 at 500 Hz from a thread of the harness."""

    def __init__(self, graph: Graph) -> None:
        self.graph, self.stop = graph, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.is_set():
            t = time.monotonic() - t0
            q = UR5_Q + AMPLITUDE * np.sin(OMEGA * t)
            v = AMPLITUDE * OMEGA * np.cos(OMEGA * t)
            self.graph.h.pub_js.publish(self.graph.h.state(q, v))
            time.sleep(0.002)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def latencies(graph: Graph, n: int) -> list[float]:
    out = []
    for _ in range(n):
        before = {p.scenario_id for p in graph.h.predictions}
        sent = time.monotonic()
        graph.h.pub_estop.publish(Bool(data=True))
        ok = graph.wait(lambda: any(p.scenario_id not in before for p in graph.h.predictions), 5.0)
        out.append(time.monotonic() - sent if ok else math.inf)
        if ok and not next(p for p in graph.h.predictions if p.scenario_id not in before).success:
            FAILED.append(time.monotonic())
        graph.h.pub_estop.publish(Bool(data=False))
        graph.wait(lambda: graph.predictor.stop is None, 5.0)
        graph.spin_for(0.3)
    return out


def psd_rate(graph: Graph, got: list, seconds: float) -> tuple[float, float]:
    """(successful messages per second, share of failed ones) over ``seconds``."""
    graph.spin_for(1.0)
    start = len(got)
    graph.spin_for(seconds)
    window = got[start:]
    ok = sum(1 for m in window if m.success)
    return ok / seconds, (len(window) - ok) / max(len(window), 1)


def core_rate(n: int = 200) -> float:
    """Calls per second of the bare core monitor at the feed's states (the node's ceiling)."""
    from vtm_dynamics.core.estop import CategoryOne, StopSettings
    from vtm_dynamics.core.estop.brakes import brakes_from_config
    from vtm_dynamics.core.estop.envelope import EnvelopeSpec
    from vtm_dynamics.core.stopsafe.robot_geometry import build_robot_geometry, example_robot_package_dir
    from vtm_dynamics.core.stopsafe.separation import SeparationMonitor
    from vtm_dynamics.core.stopsafe.stop_cases import StopSetup
    from vtm_dynamics.nodes.model_source import load_urdf_text

    robot, geometry = build_robot_geometry(load_urdf_text("ur5"), [example_robot_package_dir()])
    setup = StopSetup(robot, brakes_from_config(robot, TEST_BRAKES),
                      EnvelopeSpec(torque_factor=(0.9, 1.1), delay_factor=(1.0, 1.5), payload_frame="tool0"), (0,),
                      CategoryOne(deceleration=3.0), payload_frame="tool0", settings=StopSettings(t_max=5.0))
    monitor = SeparationMonitor(setup, geometry)
    ts = np.linspace(0.0, 4.0, n)
    monitor.evaluate(UR5_Q, np.zeros(6), PERSON)
    start = time.perf_counter()
    for t in ts:
        monitor.evaluate(UR5_Q + AMPLITUDE * np.sin(OMEGA * t), AMPLITUDE * OMEGA * np.cos(OMEGA * t), PERSON)
    return n / (time.perf_counter() - start)


def p95(xs: list[float]) -> float:
    return float(np.percentile(xs, 95)) if xs else math.nan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--triggers", type=int, default=10, help="E-stops per phase and block")
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--rate", type=float, default=100.0, help="continuous_rate [Hz] of the psd phase")
    ap.add_argument("--seconds", type=float, default=4.0, help="PSD rate window per block [s]")
    args = ap.parse_args()
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    print(f"one core: {sorted(os.sched_getaffinity(0))}; load average before: {os.getloadavg()}")
    print(f"core SeparationMonitor (worst corner, UR5): {core_rate():.1f} calls/s")
    rclpy.init()
    # the check runs until check_deadline: longer than the triggers take, then it ends by itself
    common = {"max_start_state_age": 0.1, "check_deadline": 4.0 + 0.8 * args.triggers, "stopping_distance": False,
              "separation_person_point": PERSON}
    figures: dict[str, list[float]] = {"quiet": [], "psd": [], "check": []}
    rates, failed = [], []
    refused = dict.fromkeys(figures, 0)
    for block in range(args.blocks):
        for phase in ("quiet", "psd", "check"):
            params = dict(common, continuous_rate=args.rate if phase == "psd" else 0.0,
                          separation_distance=phase == "psd")
            graph = Graph(params)
            got: list[SeparationDistance] = []
            graph.h.create_subscription(SeparationDistance, "protective_separation_distance", got.append, 1000)
            feed = Feed(graph)
            graph.spin_for(1.0)
            future = None
            if phase == "psd":
                r, f = psd_rate(graph, got, args.seconds)
                rates.append(r)
                failed.append(f)
            if phase == "check":
                client = graph.h.create_client(CheckTrajectory, "/estop_predictor/check_trajectory")
                graph.wait(client.service_is_ready)
                req = wall_request(sample_period=0.01)
                req.trajectory.points[1].time_from_start.sec = 60
                future = client.call_async(req)
                graph.spin_for(1.0)
            failures = len(FAILED)
            figures[phase] += latencies(graph, args.triggers)
            refused[phase] += len(FAILED) - failures
            if future is not None:
                assert not future.done(), "the check ended before the triggers: make it longer"
                graph.wait(future.done, 60.0)
            feed.close()
            graph.close()
        print(f"block {block + 1}/{args.blocks} done; load average {os.getloadavg()}")
    rclpy.shutdown()
    print("\nE-stop latency, rising edge on estop -> StopPrediction (ms):")
    print("| phase | triggers | median | p95 | max | lost | success=false |\n|---|---|---|---|---|---|---|")
    for phase, xs in figures.items():
        fin = [x for x in xs if math.isfinite(x)]
        print(f"| {phase} | {len(xs)} | {1e3 * float(np.median(fin)):.1f} | {1e3 * p95(fin):.1f} | "
              f"{1e3 * max(fin):.1f} | {len(xs) - len(fin)} | {refused[phase]} |")
    q = p95(figures["quiet"])
    print(f"p95 ratio psd / quiet: {p95(figures['psd']) / q:.2f}; check / quiet: {p95(figures['check']) / q:.2f}")
    print(f"\nprotective_separation_distance at continuous_rate {args.rate:g} Hz: achieved "
          f"{', '.join(f'{r:.1f}' for r in rates)} Hz (successful messages; failed share "
          f"{', '.join(f'{100 * f:.0f} %' for f in failed)}); target >= 50 Hz")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
