#!/usr/bin/env python3
"""Benchmark of the stop-safe trajectory check (docs/stopsafe.md), on one core.

1. The issue's case: a 10 s UR5 trajectory sampled at 100 Hz with the 9-case envelope (1001 E-stop instants,
   9009 predicted stops and their sweeps) in a cell with a table, a wall and the floor: wall time of the whole
   check, split into the predictions (the one entry point ``predict_stops``) and the sweep.
2. The sweep against the previous approach, measured in the same run on the same predicted stops: every
   collision pair's exact distance at every sample of every stop (Pinocchio's ``computeDistances``, the
   brute-force reference), with the accuracy of the check's clearance against it.
3. Agreement with the dense reference on the UR5 and the Panda (reference at every instant of the check and between
   every two: largest difference, against the stated resolution + sampling bound).
4. The ISO/TS 15066 protective separation distance as a node would call it (worst corner): calls per second.

Run: ``python bench/bench_stopsafe.py [--quick]`` (``--quick``: 2 s of trajectory, fewer reference instants).
The figures depend on the machine's load; the report says how loaded it was.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core: no BLAS threads
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stopsafe_scenarios as S  # noqa: E402
from stopsafe_reference import ReferenceSweep  # noqa: E402

import vtm_dynamics.core.stopsafe.check as check_module  # noqa: E402
from vtm_dynamics.core.robot.model import example_robot_urdf  # noqa: E402
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file  # noqa: E402
from vtm_dynamics.core.stopsafe.broad_phase import scene_bodies  # noqa: E402
from vtm_dynamics.core.stopsafe.check import CheckSettings, TrajectoryChecker  # noqa: E402
from vtm_dynamics.core.stopsafe.robot_geometry import example_robot_package_dir  # noqa: E402
from vtm_dynamics.core.stopsafe.sampling import Instants, SamplingSpec, states  # noqa: E402
from vtm_dynamics.core.stopsafe.separation import SeparationMonitor, SeparationParameters  # noqa: E402
from vtm_dynamics.core.stopsafe.stop_cases import predict_stops  # noqa: E402
from vtm_dynamics.core.stopsafe.sweep import Sweeper  # noqa: E402
from vtm_dynamics.core.stopsafe.trajectory import model_order  # noqa: E402


def load() -> str:
    try:
        return "load average %.1f %.1f %.1f on %d cores" % (*os.getloadavg(), os.cpu_count() or 0)
    except OSError:
        return "load unknown"


class Timed:
    """Wraps a function and sums its wall time."""

    def __init__(self, fn):
        self.fn, self.seconds, self.calls = fn, 0.0, 0

    def __call__(self, *a, **k):
        start = time.perf_counter()
        try:
            return self.fn(*a, **k)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1


def issue_case(seconds: float) -> tuple:
    robot, geometry, setup = S.ur5(envelope=True)
    scene = S.scene("ur5", table_top=0.12)
    traj = S.ur5_tour(seconds)
    checker = TrajectoryChecker(setup, geometry, scene, CheckSettings(sampling=SamplingSpec(rate=100.0)), "tool0")
    predict = Timed(check_module.predict_stops)
    sweep = Timed(checker.sweeper.sweep)
    check_module.predict_stops, checker.sweeper.sweep = predict, sweep
    start = time.perf_counter()
    result = checker.check(traj)
    total = time.perf_counter() - start
    check_module.predict_stops = predict.fn
    checker.sweeper.sweep = sweep.fn
    print(f"1. UR5, {traj.duration:.0f} s trajectory at 100 Hz, {len(result.cases)} cases: {len(result.samples)} E-stop "
          f"instants, {result.n_stops} stops")
    print(f"   whole check      {total:8.2f} s   ({1e3 * total / result.n_stops:.2f} ms per stop; target 10 s)")
    print(f"   predictions      {predict.seconds:8.2f} s   ({1e3 * predict.seconds / result.n_stops:.2f} ms per stop)")
    print(f"   sweeps           {sweep.seconds:8.2f} s   ({1e3 * sweep.seconds / result.n_stops:.3f} ms per stop, "
          f"{result.exact_calls} exact distances)")
    print(f"   rest             {total - predict.seconds - sweep.seconds:8.2f} s   (sampling bounds, results)")
    print(f"   verdict: {'safe' if result.safe else 'UNSAFE'}, smallest certified clearance "
          f"{result.min_certified_clearance:.4f} m, largest sampling bound {result.max_sampling_bound:.4f} m at 100 Hz")
    return robot, geometry, setup, scene, traj, result


def sweep_against_brute_force(robot, geometry, setup, scene, traj, result, n: int) -> None:
    order = model_order(robot, traj)
    picked = result.samples[:: max(1, len(result.samples) // n)][:n]
    inst = Instants(np.array([s.time for s in picked]), np.zeros(len(picked), bool))
    preds = predict_stops(setup, *states(traj, order, inst))
    sweeper = Sweeper(geometry, scene_bodies(scene), CheckSettings().sweep_settings(), "tool0")
    start = time.perf_counter()
    swept = sweeper.sweep(preds)
    fast = time.perf_counter() - start
    reference = ReferenceSweep(read_urdf_file(example_robot_urdf(S.UR5_URDF)), [example_robot_package_dir()], scene)
    start = time.perf_counter()
    brute = [reference.stop_clearances(p, per_interval=None) for p in preds]
    slow = time.perf_counter() - start
    poses = sum(len(p.t) for ps in preds for p in ps)
    diff = np.array([b[0] - c.scene.value for b, c in zip(brute, swept)])
    res = np.array([c.scene.resolution for c in swept])
    print(f"\n2. sweep of {len(preds)} instants x {len(preds[0])} cases ({poses} engine samples), same stops:")
    print(f"   {'approach':<44}{'time [s]':>10}{'per stop [ms]':>15}")
    print(f"   {'every pair at every sample (computeDistances)':<44}{slow:10.3f}{1e3 * slow / (len(preds) * len(preds[0])):15.3f}")
    print(f"   {'branch and bound (the check)':<44}{fast:10.3f}{1e3 * fast / (len(preds) * len(preds[0])):15.3f}")
    print(f"   ratio {slow / fast:.1f}x; brute force at the samples minus the check's clearance: "
          f"{diff.min():+.5f} .. {diff.max():+.5f} m (the check also searches between samples; resolution "
          f"{res.max():.4f} m)")


def agreement(name: str, every: int) -> None:
    if name == "ur5":
        robot, geometry, setup = S.ur5()
        traj, urdf, fixed = S.ur5_pan(0.8, 1.2), S.UR5_URDF, None
    else:
        robot, geometry, setup = S.panda()
        traj, urdf, fixed = S.panda_pan(1.0, 1.2), S.PANDA_URDF, S.PANDA_FINGERS
    scene = S.scene(name)
    result = TrajectoryChecker(setup, geometry, scene, CheckSettings()).check(traj)
    reference = ReferenceSweep(read_urdf_file(example_robot_urdf(urdf)), [example_robot_package_dir()], scene, fixed)
    order = model_order(robot, traj)
    times = result.times[::every]
    mids = 0.5 * (result.times[:-1] + result.times[1:])[::every]
    at, between = [], []
    for grid, out in ((times, at), (mids, between)):
        inst = Instants(grid, np.zeros(len(grid), bool))
        for t, p in zip(grid, predict_stops(setup, *states(traj, order, inst))):
            out.append((t, reference.stop_clearances(p, per_interval=8)[0]))
    k = {s.time: s for s in result.samples}
    err_at = max(abs(r - k[t].clearance) for t, r in at)
    worst_between, below = 0.0, 0
    for t, r in between:
        i = int(np.searchsorted(result.times, t)) - 1
        a, b = result.samples[i], result.samples[i + 1]
        certified = min(a.clearance - a.resolution, b.clearance - b.resolution) - max(a.sampling_bound, b.sampling_bound)
        below += r < certified - 1e-9
        worst_between = max(worst_between, abs(r - a.clearance) / (a.sampling_bound + a.resolution))
    print(f"   {name:<6}{len(result.samples):>9}{result.min_certified_clearance:>12.4f}{err_at:>14.5f}"
          f"{float(np.max(result.column('resolution'))):>12.4f}{result.max_sampling_bound:>12.4f}{worst_between:>12.3f}"
          f"{below:>8}")


def separation_rate(calls: int) -> None:
    robot, geometry, setup = S.ur5(envelope=True)
    monitor = SeparationMonitor(setup, geometry, SeparationParameters(reaction_time=0.1))
    names = list(robot.joint_names)
    rng = np.random.default_rng(5)
    states_ = [(np.array(S.UR5_HOME) + rng.uniform(-0.3, 0.3, 6), rng.uniform(-1.0, 1.0, 6)) for _ in range(calls)]
    start = time.perf_counter()
    for q, v in states_:
        monitor(names, q, v, [0.8, 0.4, 0.5])
    dt = (time.perf_counter() - start) / calls
    print(f"\n4. ISO/TS 15066 S_p as a node calls it (UR5, worst corner: 1 stop per call): {1e3 * dt:.2f} ms per call, "
          f"{1 / dt:.0f} Hz (target 50 Hz)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="2 s of trajectory and fewer reference instants")
    args = ap.parse_args()
    print(f"bench_stopsafe ({load()}; one BLAS thread)\n")
    case = issue_case(2.0 if args.quick else 10.0)
    sweep_against_brute_force(*case, n=10 if args.quick else 40)
    print("\n3. agreement with the dense brute-force reference (table, wall, floor; default settings):")
    print(f"   {'robot':<6}{'instants':>9}{'min cert.':>12}{'|ref-C| at':>14}{'resolution':>12}{'max bound':>12}"
          f"{'between/err':>12}{'below':>8}")
    for name in ("ur5", "panda"):
        agreement(name, 4 if args.quick else 1)
    print("   (|ref-C| at: largest difference at the check's instants [m]; between/err: largest difference of the"
          " reference between two instants from the earlier one, as a fraction of the stated error; below: reference"
          " values under the certified clearance, must be 0)")
    separation_rate(20 if args.quick else 100)
    print(f"\n({load()})")


if __name__ == "__main__":
    main()
