"""Benchmark: full category-0 stop predictions (UR5 with calibrated brakes, 7-DOF Panda), wall time per prediction,
speed-up over real time, ratio against MuJoCo simulating the same stop in the same run, accuracy against a fine
reference (scipy DOP853 at rtol 1e-12 restarted at every event: the straightforward implementation, also timed),
and a cProfile summary.

Run: python bench/bench_estop.py [--repeat 30] [--states 5]
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
import scipy.integrate

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test", "core"))  # the MuJoCo peer helpers shared with the tests

from mujoco_stop import mujoco_full_stop, mujoco_model_from_urdf  # noqa: E402
from vtm_dynamics.core.estop.brakes import brakes_from_config  # noqa: E402
from vtm_dynamics.core.estop import StopSettings, predict_stop  # noqa: E402
from vtm_dynamics.core.estop.event_loop import BrakingEngine  # noqa: E402
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


def scipy_reference(robot, brakes, q0, v0, rtol=1e-12, t_max=5.0):
    """The straightforward implementation: scipy DOP853 with event functions, restarted at every event, same
    brake law and stick/slip decisions as vtm_dynamics (engine internals reused for the decision only)."""
    eng = BrakingEngine(robot, brakes, StopSettings(t_max=t_max))
    nv = robot.nv
    engage = sorted(set(float(d) for d in brakes.engage_delay[brakes.braked]))
    t, q, v = 0.0, q0.copy(), v0.copy()
    events = []

    def rhs(_, y):
        a, _, tau = eng._f(y[:nv], y[nv:2 * nv])
        return np.concatenate([y[nv:2 * nv], a, [tau @ y[nv:2 * nv]]])

    W = 0.0
    while not eng.locked.all() and t < t_max:
        while engage and engage[0] <= t + 1e-12:
            d = engage.pop(0)
            idx = np.flatnonzero(brakes.braked & (brakes.engage_delay == d))
            eng.engaged[idx] = True
            for i in idx:
                if v[i] != 0:
                    eng.s[i] = np.sign(v[i])
            eng._set_phase()
            eng._decide(t, q, v)
            events.append((t, "engage"))
        t_next = engage[0] if engage else t_max
        fns = []
        for i in eng.slide_idx:
            f = (lambda i: lambda _, y: y[nv + i])(int(i))
            f.terminal, f.direction = True, -eng.s[i]
            fns.append(f)
        for i in eng.release_idx:
            k = int(np.flatnonzero(eng.L == i)[0])
            g = (lambda i, k: lambda _, y: abs(eng._f(y[:nv], y[nv:2 * nv])[1][k]) - eng.cap[i])(int(i), k)
            g.terminal, g.direction = True, 1
            fns.append(g)
        sol = scipy.integrate.solve_ivp(rhs, (t, t_next), np.concatenate([q, v, [W]]), method="DOP853",
                                        rtol=rtol, atol=1e-12, events=fns or None)
        hit = [(te[0], k) for k, te in enumerate(sol.t_events or []) if te.size]
        if hit:
            te, k = min(hit)
            y = sol.y_events[k][0]
            t, q, v, W = te, y[:nv].copy(), y[nv:2 * nv].copy(), y[-1]
            if k < len(eng.slide_idx):
                v[eng.slide_idx[k]] = 0.0
            eng._decide(t, q, v)
            events.append((t, "stick/slip"))
        else:
            t, q, v, W = sol.t[-1], sol.y[:nv, -1], sol.y[nv:2 * nv, -1], sol.y[-1, -1]
    return q, eng.rest_since.copy(), events


def median_time(fn, repeat: int) -> float:
    """Median CPU time of ``fn`` (process time: on a shared machine wall time mostly measures the neighbours)."""
    ts = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        ts.append(time.process_time() - t0)
    return float(np.median(ts))


def bench_robot(label, robot, brakes, mj_model, states, repeat):
    print(f"\n== {label}: {robot.nv} DOF, {len(states)} moving states, median CPU time of {repeat} runs ==")
    hdr = (f"{'state':>5} {'stop [s]':>9} {'events':>6} {'evals':>6} {'ours [ms]':>10} {'x real':>8} "
           f"{'MuJoCo [ms]':>12} {'MJ/ours':>8} {'scipy [ms]':>11} {'scipy/ours':>10} {'|dq| ref':>9} {'|dt| ref':>9}")
    print(hdr)
    rows = []
    for k, (q, v) in enumerate(states):
        p = predict_stop(robot, brakes, q, v, tcp_frame=None)
        t_ours = median_time(lambda: predict_stop(robot, brakes, q, v), repeat)
        t_mj = median_time(lambda: mujoco_full_stop(mj_model, brakes, q, v, t_end=p.stop_time + 0.02, dt=2e-4),
                           max(3, repeat // 10))
        t0 = time.process_time()
        qr, stops_r, _ = scipy_reference(robot, brakes, q, v)
        t_sp = time.process_time() - t0
        dq = float(np.max(np.abs(qr - p.q_final)))
        dt = float(np.nanmax(np.abs(stops_r - p.joint_stop_times)))
        rows.append((p.stop_time, t_ours, t_mj, t_sp, dq, dt))
        print(f"{k:>5} {p.stop_time:>9.4f} {len(p.events):>6} {p.n_evaluations:>6} {t_ours * 1e3:>10.3f} "
              f"{p.stop_time / t_ours:>8.1f} {t_mj * 1e3:>12.2f} {t_mj / t_ours:>8.1f} {t_sp * 1e3:>11.1f} "
              f"{t_sp / t_ours:>10.1f} {dq:>9.1e} {dt:>9.1e}")
    r = np.array(rows)
    print(f"median: ours {np.median(r[:, 1]) * 1e3:.3f} ms per stop, {np.median(r[:, 0] / r[:, 1]):.0f}x faster than "
          f"real time, MuJoCo (frictionloss, 0.2 ms steps) {np.median(r[:, 2] / r[:, 1]):.1f}x slower, scipy "
          f"restart-at-events {np.median(r[:, 3] / r[:, 1]):.1f}x slower; worst |dq| {r[:, 4].max():.1e} rad, "
          f"worst |dt| {r[:, 5].max():.1e} s vs the scipy rtol 1e-12 reference")
    return rows


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
    args = ap.parse_args(argv)
    ur5 = RobotModel.from_urdf_file(example_robot_urdf(UR5))
    ur5_brakes = brakes_from_config(ur5, os.path.join(REPO, "config", "ur5_brakes.yaml"))
    ur5_states = moving_states(ur5, args.states, seed=1)
    bench_robot("UR5, calibrated brakes (config/ur5_brakes.yaml)", ur5, ur5_brakes,
                mujoco_model_from_urdf(example_robot_urdf(UR5)), ur5_states, args.repeat)
    panda = panda_model()
    bench_robot("Panda (fingers fixed), assumed brakes", panda, panda_brakes(panda),
                mujoco_model_from_urdf(example_robot_urdf(PANDA), fixed_joints=PANDA_FINGERS),
                moving_states(panda, args.states, seed=2), args.repeat)
    profile_summary(ur5, ur5_brakes, ur5_states)
    return 0


if __name__ == "__main__":
    sys.exit(main())
