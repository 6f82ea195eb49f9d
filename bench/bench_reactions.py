"""Joint-reaction formulations on the paper's examples: accuracy, order in Δt, energy, long runs and cost.

Formulations: Taylor (Huang et al., literal), Taylor + velocity projection, Taylor + Heun velocity update (+ projection),
and the joint-coordinate RK4 motion of Aghili's projection recipe with KKT reactions in absolute coordinates.
Reference: Pinocchio (aba / constraintDynamics, RNEA reactions) integrated by DOP853 at rtol = atol = 1e-11.
Errors: centre-of-mass positions [m], link rotations [rad], reactions [N, N m] (pair-frame components, max over
samples), constraint gap [m]. Orders are log2 of the error ratio between successive halvings of Δt.

Usage: ``python bench/bench_reactions.py [--quick]``. Prints tables; ~3-6 min on a loaded 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
import pinocchio as pin

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from reaction_reference import body_frames, rotation_error, simulate_reference  # noqa: E402
from vtm_dynamics.core.reactions.absolute_coordinates import assemble_loops, load_absolute_model  # noqa: E402
from vtm_dynamics.core.reactions.kkt_reactions import simulate_kkt  # noqa: E402
from vtm_dynamics.core.reactions.taylor_reactions import prepare_mechanism, simulate_taylor  # noqa: E402
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PENDULUM = read_urdf_file(os.path.join(ROOT, "urdf", "huang_double_pendulum.urdf"))
STEWART = read_urdf_file(os.path.join(ROOT, "urdf", "huang_stewart_platform.urdf"))
MOTORS = {"J7": 10.0, "J8": 10.0, "J9": 10.0}
FORMS = ("taylor", "taylor-projected", "taylor-heun", "taylor-heun/state", "kkt")


def setup(name: str):
    if name == "pendulum":
        model = load_absolute_model(PENDULUM, planar=True)
        q0 = np.array([1.0, 0.0, 1.0, 0.0])
        return PENDULUM, model, q0, np.zeros(2), (0.0, -9.81, 0.0), None
    model = load_absolute_model(STEWART)
    q0 = assemble_loops(model, pin.neutral(model.pin_model))
    return STEWART, model, q0, np.zeros(model.pin_model.nv), (0.0, 0.0, -9.81), MOTORS


def run(form: str, model, mech, q0, v0, dt, T, g, eff, sample):
    every = int(round(sample / dt))
    if form == "kkt":
        return simulate_kkt(model, q0, v0, dt, T, eff, gravity=g, every=every)[0]
    base, _, at = form.partition("/")
    corr = {"taylor": "none", "taylor-projected": "project", "taylor-heun": "heun"}[base]
    return simulate_taylor(mech, q0, v0, dt, T, eff, correction=corr, every=every, reactions_at=at or "step")


def errors(r, ref, xr, Rr, W):
    if r.x.shape != xr.shape or not np.all(np.isfinite(r.x)):
        return dict(x=np.inf, rot=np.inf, f=np.inf, gap=np.inf)
    ef = 0.0
    for name, (a, b) in r.columns.items():
        ef = max(ef, float(np.nanmax(np.abs(r.reactions[:, a:b] - ref.reactions[name] @ W[name]))))
    return dict(x=float(np.abs(r.x - xr).max()), rot=rotation_error(r.R, Rr), f=ef, gap=float(np.nanmax(r.gap_position)))


def order_table(example: str, T: float, dts, sample: float) -> None:
    urdf, model, q0, v0, g, eff = setup(example)
    mech = prepare_mechanism(model, q0, g)
    ref = simulate_reference(urdf, q0, v0, T, np.arange(0, T + 1e-9, sample), gravity=g, efforts=eff)
    xr, Rr = body_frames(urdf, ref.q, model.bodies)
    W = {p.name: p.wrench_basis for p in model.pairs}
    print(f"\n## {example}: errors at T = {T} s against the reference (max over samples every {sample} s)")
    print(f"{'formulation':<17} {'dt [s]':>7} {'pos [m]':>9} {'ord':>5} {'rot [rad]':>9} {'ord':>5} {'react [N]':>9} "
          f"{'ord':>5} {'gap [m]':>9} {'ord':>5} {'CPU/step [ms]':>13}")
    for form in FORMS:
        prev = None
        for dt in dts:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.process_time()
                try:
                    r = run(form, model, mech, q0, v0, dt, T, g, eff, sample)
                    e = errors(r, ref, xr, Rr, W)
                except (ValueError, np.linalg.LinAlgError):
                    e = dict(x=np.inf, rot=np.inf, f=np.inf, gap=np.inf)
                cpu = (time.process_time() - t0) / (T / dt)
            o = {k: (np.log2(prev[k] / e[k]) if prev and np.isfinite(e[k]) and e[k] > 0 else np.nan) for k in e}
            print(f"{form:<17} {dt:>7.0e} {e['x']:>9.2e} {o['x']:>5.2f} {e['rot']:>9.2e} {o['rot']:>5.2f} "
                  f"{e['f']:>9.2e} {o['f']:>5.2f} {e['gap']:>9.2e} {o['gap']:>5.2f} {1e3 * cpu:>13.2f}")
            prev = e


def energy_table(T: float, dt: float) -> None:
    urdf, model, q0, v0, g, eff = setup("pendulum")
    mech = prepare_mechanism(model, q0, g)
    print(f"\n## pendulum without input: energy change [J] over {T} s, dt = {dt} s (initial energy 0 J)")
    for form in FORMS:
        r = run(form, model, mech, q0, v0, dt, T, g, eff, 0.5)
        print(f"{form:<17} {'  '.join(f'{x:+.3g}' for x in r.energy - r.energy[0])}")


def long_run(T: float, dt: float) -> None:
    urdf, model, q0, v0, g, eff = setup("stewart")
    mech = prepare_mechanism(model, q0, g)
    sample = 0.25
    ref = simulate_reference(urdf, q0, v0, T, np.arange(0, T + 1e-9, sample), gravity=g, efforts=eff)
    xr, _ = body_frames(urdf, ref.q, model.bodies)
    print(f"\n## Stewart platform, motors 10 N m, {T} s, dt = {dt} s: position error [m] every {sample} s "
          f"(reference energy at the end {ref.energy[-1]:.0f} J)")
    for form in FORMS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                r = run(form, model, mech, q0, v0, dt, T, g, eff, sample)
                n = len(r.times)
                err = np.abs(r.x - xr[:n]).max(axis=(1, 2))
                end = (f"diverged at {r.diverged_at:.3f} s" if getattr(r, "diverged_at", None) is not None
                       else f"energy end {r.energy[-1]:.0f} J")
                print(f"{form:<17} {' '.join(f'{x:.1e}' for x in err)}  {end}")
            except (ValueError, np.linalg.LinAlgError) as exc:
                print(f"{form:<17} failed: {str(exc)[:60]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer step sizes and shorter runs")
    ap.add_argument("--long-only", action="store_true", help="only the long Stewart run")
    args = ap.parse_args()
    if args.long_only:
        long_run(3.0, 2e-3)
        return
    dts = (4e-3, 2e-3) if args.quick else (4e-3, 2e-3, 1e-3)
    order_table("pendulum", 1.0, dts, 0.1)
    order_table("stewart", 0.5 if args.quick else 1.0, dts, 0.1)
    energy_table(2.0 if args.quick else 5.0, 2e-3)
    long_run(1.5 if args.quick else 3.0, 2e-3)


if __name__ == "__main__":
    main()
