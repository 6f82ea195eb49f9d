"""Benchmark: full category-0 stop predictions (UR5 with the shipped brakes, 7-DOF Panda), CPU time per prediction,
the same stops with the Python engine (the path before the compiled one, ``StopSettings(engine="python")``) and
with MuJoCo in the same run, accuracy of both engines against an independent tight reference (scipy DOP853 at
rtol 1e-12 restarted at every event, with its own brake law: :mod:`vtm_dynamics.core.estop.reference_stop`, also
timed), the same accuracy on held-out states (another seed, faster: no setting of the engine was chosen on them), and
a cProfile summary.

Run: python bench/bench_estop.py [--repeat 30] [--states 5] [--held-out 16] [--batch-only]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import os
import pstats
import sys
import time

import numpy as np
import pinocchio as pin

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test", "core"))  # the MuJoCo peer helpers shared with the tests

from mujoco_stop import mujoco_full_stop, mujoco_model_from_urdf  # noqa: E402
from vtm_dynamics.core.estop.brakes import brakes_from_config  # noqa: E402
from vtm_dynamics.core.estop import StopSettings, predict_stop  # noqa: E402
from vtm_dynamics.core.estop.reference_stop import reference_stop  # noqa: E402
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf  # noqa: E402

UR5 = "ur_description/urdf/ur5_robot.urdf"
PANDA = "panda_description/urdf/panda.urdf"
PANDA_FINGERS = ("panda_finger_joint1", "panda_finger_joint2")


def panda_model() -> RobotModel:
    """Panda arm with the gripper fingers fixed (7 DOF)."""
    full = RobotModel.from_urdf_file(example_robot_urdf(PANDA))
    lock = [full.model.getJointId(n) for n in PANDA_FINGERS]
    reduced = pin.buildReducedModel(full.model, lock, pin.neutral(full.model))
    return RobotModel(reduced, full.extension, full.urdf_text)


def panda_brakes(robot: RobotModel):
    """ASSUMED Panda brakes (no published figures used): sliding 0.6 x and holding 0.8 x the URDF effort limit,
    no viscous part, 10 ms delay."""
    eff = robot.model.effortLimit
    return brakes_from_config(robot, {"brakes": {"defaults": {"engage_delay": 0.01}, "joints": {
        n: {"sliding_torque": 0.6 * float(eff[i]), "holding_torque": 0.8 * float(eff[i])}
        for i, n in enumerate(robot.joint_names)}}})


def moving_states(robot: RobotModel, n: int, seed: int, speed: float = 0.7):
    """Seeded random moving states: q inside 80 % of the joint range, |v| up to ``speed`` x the velocity limit."""
    rng = np.random.default_rng(seed)
    lo, hi = robot.model.lowerPositionLimit, robot.model.upperPositionLimit
    lo = np.maximum(lo, -np.pi)
    hi = np.minimum(hi, np.pi)
    mid, half = (lo + hi) / 2, (hi - lo) / 2 * 0.8
    out = []
    for _ in range(n):
        q = mid + rng.uniform(-1, 1, robot.nv) * half
        v = rng.uniform(-1, 1, robot.nv) * speed * robot.model.velocityLimit
        out.append((q, v))
    return out


def median_time(fn, repeat: int) -> float:
    """Median CPU time of ``fn`` (process time: on a shared machine wall time mostly measures the neighbours)."""
    ts = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        ts.append(time.process_time() - t0)
    return float(np.median(ts))


PYTHON_ENGINE = StopSettings(engine="python")


def bench_robot(label, robot, brakes, mj_model, states, repeat):
    print(f"\n== {label}: {robot.nv} DOF, {len(states)} moving states, median CPU time of {repeat} runs ==")
    hdr = (f"{'state':>5} {'stop [s]':>9} {'events':>6} {'evals':>6} {'ours [ms]':>10} {'x real':>7} "
           f"{'before [ms]':>11} {'evals':>6} {'bef/ours':>8} {'MuJoCo [ms]':>12} {'MJ/ours':>8} {'ref [ms]':>9} "
           f"{'|dq| ours':>9} {'|dt| ours':>9} {'|dq| bef':>9} {'|dt| bef':>9}")
    print(hdr)
    rows = []
    for k, (q, v) in enumerate(states):
        p = predict_stop(robot, brakes, q, v)
        old = predict_stop(robot, brakes, q, v, settings=PYTHON_ENGINE)
        t_ours = median_time(lambda: predict_stop(robot, brakes, q, v), repeat)
        t_old = median_time(lambda: predict_stop(robot, brakes, q, v, settings=PYTHON_ENGINE), max(3, repeat // 3))
        t_mj = median_time(lambda: mujoco_full_stop(mj_model, brakes, q, v, t_end=p.stop_time + 0.02, dt=2e-4),
                           max(3, repeat // 10))
        t0 = time.process_time()
        ref = reference_stop(robot, brakes, q, v)
        t_ref = time.process_time() - t0
        acc = []
        for pred in (p, old):
            acc.append(float(np.max(np.abs(ref.q_final - pred.q_final))))
            acc.append(float(np.nanmax(np.abs(ref.joint_stop_times - pred.joint_stop_times))))
        rows.append((p.stop_time, t_ours, t_old, t_mj, t_ref, *acc))
        print(f"{k:>5} {p.stop_time:>9.4f} {len(p.events):>6} {p.n_evaluations:>6} {t_ours * 1e3:>10.3f} "
              f"{p.stop_time / t_ours:>7.0f} {t_old * 1e3:>11.3f} {old.n_evaluations:>6} {t_old / t_ours:>8.1f} "
              f"{t_mj * 1e3:>12.2f} {t_mj / t_ours:>8.1f} {t_ref * 1e3:>9.1f} "
              + " ".join(f"{x:>9.1e}" for x in acc))
    r = np.array(rows)
    print(f"median: ours {np.median(r[:, 1]) * 1e3:.3f} ms per stop ({np.median(r[:, 0] / r[:, 1]):.0f}x faster than "
          f"real time), before {np.median(r[:, 2]) * 1e3:.3f} ms ({np.median(r[:, 2] / r[:, 1]):.1f}x slower), MuJoCo "
          f"(frictionloss, 0.2 ms steps) {np.median(r[:, 3] / r[:, 1]):.1f}x slower, scipy reference "
          f"{np.median(r[:, 4] / r[:, 1]):.0f}x slower; worst |dq| {r[:, 5].max():.1e} rad, worst |dt| "
          f"{r[:, 6].max():.1e} s (before: {r[:, 7].max():.1e} rad, {r[:, 8].max():.1e} s) against the reference")
    return rows


def batch_throughput(robot, brakes, states, repeat):
    """Stops per second per core (CPU time) of one predict_stops call over the states x the envelope's corners
    (torque 0.9 / 1.1, delay 1.0 / 1.5, and nominal), with M and h from generated code and from Pinocchio's calls
    (timed alternately in the same run), against the same stops as single predict_stop calls; the generated
    path's set-up time (trace and compile, or the disk cache's load) and its accuracy against the reference."""
    from vtm_dynamics.core.estop.batch import StopBatch, predict_stops
    from vtm_dynamics.core.estop.envelope import EnvelopeSpec, envelope_samples
    from vtm_dynamics.core.estop.generated_dynamics import generated_stages

    corners = envelope_samples(EnvelopeSpec())
    q = [s[0] for s in states for _ in corners]
    v = [s[1] for s in states for _ in corners]
    tf = [c[0] for _ in states for c in corners]
    df = [c[1] for _ in states for c in corners]
    n = len(q)

    def singles():
        for k in range(n):
            predict_stop(robot, brakes.scaled(tf[k], df[k]), q[k], v[k])

    t0 = time.perf_counter()
    fast = StopBatch(robot, brakes, generated=True)
    reason = fast.generated_reason()
    if reason is None:
        generated_stages(robot).prepare_loop()  # the compiled event loop too, not in the first timed batch
    setup = time.perf_counter() - t0
    plain = StopBatch(robot, brakes, generated=False)
    times = {True: [], False: []}
    for _ in range(repeat):  # alternated, so both see the same load
        for generated, batch in ((True, fast), (False, plain)):
            times[generated].append(median_time(lambda: predict_stops(robot, brakes, q, v, torque_factors=tf,
                                                                      delay_factors=df, batch=batch), 1))
    t_gen, t_batch = float(np.median(times[True])), float(np.median(times[False]))
    t_single = median_time(singles, repeat)
    # the floor of this design: every evaluation of the right-hand side is two Pinocchio calls from Python (CRBA and
    # nonLinearEffects), timed here alone at the batch's own states, times the evaluations each stop needs
    evals = np.array([p.n_evaluations for p in predict_stops(robot, brakes, q, v, torque_factors=tf,
                                                             delay_factors=df, batch=plain)])
    m, d = robot.model, robot.data
    qs = np.array(q)
    vs = np.array(v)

    def calls():
        for _ in range(20):
            for k in range(n):
                pin.crba(m, d, qs[k])
                pin.nonLinearEffects(m, d, qs[k], vs[k])

    per_eval = median_time(calls, repeat) / (20 * n)
    print(f"\n== batch: {len(states)} states x {len(corners)} envelope cases = {n} UR5 stops, median CPU time of "
          f"{repeat} runs ==")
    if reason is None:
        nominal = [k for k in range(n) if tf[k] == 1.0 and df[k] == 1.0]
        got = predict_stops(robot, brakes, [q[k] for k in nominal], [v[k] for k in nominal], batch=fast)
        dq = dt = 0.0
        for k, p in zip(nominal, got):
            ref = reference_stop(robot, brakes, q[k], v[k])
            dq = max(dq, float(np.max(np.abs(ref.q_final - p.q_final))))
            dt = max(dt, float(np.nanmax(np.abs(ref.joint_stop_times - p.joint_stop_times))))
        print(f"predict_stops, M and h generated inside the compiled step: {n / t_gen:.0f} stops/s per core "
              f"({1e3 * t_gen / n:.3f} ms each, {t_batch / t_gen:.2f}x Pinocchio's calls); set-up {setup:.1f} s "
              f"(trace and compile, or load from the cache); nominal stops against the reference: worst |dq| "
              f"{dq:.1e} rad, worst |dt| {dt:.1e} s")
    else:
        print(f"predict_stops without generated M and h: {reason}")
    print(f"predict_stops, M and h from Pinocchio's calls: {n / t_batch:.0f} stops/s per core "
          f"({1e3 * t_batch / n:.3f} ms each); single calls: {n / t_single:.0f} stops/s ({t_single / t_batch:.2f}x "
          "that batch's time)")
    floor = float(np.mean(evals)) * per_eval
    print(f"floor of the Pinocchio path (M and h as Pinocchio calls from Python): {1e6 * per_eval:.2f} us per evaluation x "
          f"{np.mean(evals):.0f} evaluations per stop (mean) = {1e3 * floor:.3f} ms, at most {1 / floor:.0f} stops/s "
          f"per core with nothing else done ({floor / (t_batch / n):.0%} of the batch's time per stop)")


def held_out_accuracy(label, robot, brakes, states):
    """Accuracy against the reference on states no setting of the engine was chosen on (another seed, up to 90 % of
    the velocity limits): the worst |dq| and |dt| and, for the worst stop time, the joint's deceleration just
    before it stops (a stop time is as accurate as the velocity divided by that deceleration)."""
    worst_dq, worst = 0.0, (0.0, 0, 0, math.nan)
    evals = []
    for k, (q, v) in enumerate(states):
        p = predict_stop(robot, brakes, q, v)
        ref = reference_stop(robot, brakes, q, v)
        evals.append(p.n_evaluations)
        worst_dq = max(worst_dq, float(np.max(np.abs(ref.q_final - p.q_final))))
        d = np.abs(ref.joint_stop_times - p.joint_stop_times)
        j = int(np.nanargmax(d))
        if d[j] > worst[0]:
            i = max(int(np.searchsorted(p.t, p.joint_stop_times[j])) - 2, 0)
            worst = (float(d[j]), k, j, float(p.a[i, j]))
    dt, k, j, a = worst
    print(f"held out ({label}, {len(states)} other states, seed 4242, |v| up to 90 % of the limits): evaluations "
          f"{min(evals)}-{max(evals)}; worst |dq| {worst_dq:.1e} rad, worst |dt| {dt:.1e} s (state {k}, "
          f"{robot.joint_names[j]}, decelerating at {abs(a):.1f} rad/s^2 before it stops: a velocity error of "
          f"{dt * abs(a):.1e} rad/s)")


def profile_summary(robot, brakes, states, n=20):
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        for q, v in states:
            predict_stop(robot, brakes, q, v)
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(12)
    text = s.getvalue()
    start = text.find("   ncalls")
    print(f"\n== cProfile: {n} x {len(states)} UR5 predictions, top entries by own time ==")
    print(text[start:].rstrip())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--states", type=int, default=5)
    ap.add_argument("--held-out", type=int, default=16, help="states of the held-out accuracy check (0: none)")
    ap.add_argument("--batch-only", action="store_true", help="only the batch throughput (generated M and h "
                                                              "against Pinocchio's calls)")
    args = ap.parse_args(argv)
    ur5 = RobotModel.from_urdf_file(example_robot_urdf(UR5))
    ur5_brakes = brakes_from_config(ur5, os.path.join(REPO, "config", "ur5_brakes.yaml"))
    ur5_states = moving_states(ur5, args.states, seed=1)
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the start "
          "(CPU times: other processes inflate them less than wall times)")
    if args.batch_only:
        batch_throughput(ur5, ur5_brakes, ur5_states, max(3, args.repeat // 3))
        return 0
    bench_robot("UR5, shipped brakes (config/ur5_brakes.yaml: Stribeck, rise, armature)", ur5, ur5_brakes,
                mujoco_model_from_urdf(example_robot_urdf(UR5)), ur5_states, args.repeat)
    panda = panda_model()
    bench_robot("Panda (fingers fixed), assumed brakes", panda, panda_brakes(panda),
                mujoco_model_from_urdf(example_robot_urdf(PANDA), fixed_joints=PANDA_FINGERS),
                moving_states(panda, args.states, seed=2), args.repeat)
    if args.held_out > 0:
        print()
        held_out_accuracy("UR5", ur5, ur5_brakes, moving_states(ur5, args.held_out, seed=4242, speed=0.9))
        held_out_accuracy("Panda", panda, panda_brakes(panda), moving_states(panda, args.held_out, seed=4242,
                                                                             speed=0.9))
    batch_throughput(ur5, ur5_brakes, ur5_states, max(3, args.repeat // 3))
    profile_summary(ur5, ur5_brakes, ur5_states)
    return 0


if __name__ == "__main__":
    sys.exit(main())
