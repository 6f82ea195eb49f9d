"""Benchmark: identification time for 20 recorded UR5 stops (target <= 30 s on this machine), fitted twice in the
same run: before (every friction term fitted, also of a joint that no sample shows sliding after its brake
engages) and after (those left out, as ``identify_brakes`` does by default), with the ratio of the times and of
the prediction counts, the ratio to one prediction of the same stops measured in the same run, the accuracy of
the fit against the known truth (error and error / 1-sigma), and the
cost the optional brake terms (Stribeck breakaway, brake torque rise, rotor armature) add per prediction, as a
ratio against the same stops with the Coulomb + viscous model, same run.

The recordings: stops of the independent fixed-step plant (step 2e-5 s) with known brakes (the earlier Coulomb + viscous
UR5 defaults with 20 % more sliding torque, changed viscous terms, 12 ms delays), seen through the default measurement model
(500 Hz, +-0.2 ms jitter, 19-bit encoder, 1e-4 rad noise), written as an MCAP bag and read back, as a user's bag
would be. Generating them takes about a minute (the plant is slow on purpose: it is the reference).

Run: python bench/bench_calibration.py [--stops 20]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from vtm_dynamics.core.estop import StopSettings, predict_stop  # noqa: E402
from vtm_dynamics.core.estop.brakes import BrakeSet, brakes_from_config  # noqa: E402
from vtm_dynamics.core.estop.identification import identify_brakes  # noqa: E402
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf  # noqa: E402
from vtm_dynamics.recordings.bag_files import read_recording  # noqa: E402
from vtm_dynamics.recordings.simulated import StopStart, simulate_stops, write_simulated_bag  # noqa: E402
from vtm_dynamics.recordings.stops import find_stops  # noqa: E402


def report(ident, truth: BrakeSet, t_one: float, n_stops: int) -> None:
    """Print the solver's result, the time and each parameter against the truth."""
    print(f"  solver: {ident.message}; residual RMS {ident.residual_rms:.3g} rad")
    print(f"  identification of {n_stops} stops: {ident.seconds:.1f} s ({ident.n_predictions} predictions); "
          f"target <= 30 s: {'met' if ident.seconds <= 30 else 'NOT met'}")
    print(f"  one prediction (same stops, same run): {1e3 * t_one:.1f} ms; identification / prediction = "
          f"{ident.seconds / t_one:.0f}; identification / (its predictions x one prediction) = "
          f"{ident.seconds / (ident.n_predictions * t_one):.2f}")
    tb = {b.joint: b for b in truth.brakes}
    for e in ident.estimates:
        true = getattr(tb[e.joint], e.field)
        value = (f"{e.value:10.4g} +- {e.sigma:.2g}  ({100 * (e.value - true) / true:+.1f} %, "
                 f"{(e.value - true) / e.sigma:+.1f} sigma)") if e.identifiable else f"{'-':>10}    ({e.reason})"
        print(f"    {e.joint:<20}{e.field:<16} truth {true:10.4g}  fit {value}")
    worst = {}
    for e in ident.estimates:
        if e.identifiable and e.field in ("sliding_torque", "viscous"):
            true = getattr(tb[e.joint], e.field)
            worst[e.field] = max(worst.get(e.field, 0.0), abs(e.value - true) / true)
        if e.identifiable and e.field == "engage_delay":
            worst["delay_ms"] = max(worst.get("delay_ms", 0.0), 1e3 * abs(e.value - tb[e.joint].engage_delay))
    print("  largest error of the identified terms against the truth: "
          + ", ".join(f"{k} {100 * v:.1f} %" if k != "delay_ms" else f"delay {v:.3f} ms" for k, v in worst.items())
          + f"; not identifiable: {len(ident.not_identifiable)} of {len(ident.estimates)}; largest |error| / "
          f"1-sigma of a reported value: "
          f"{max(abs(e.value - getattr(tb[e.joint], e.field)) / e.sigma for e in ident.estimates if e.identifiable):.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stops", type=int, default=20)
    ap.add_argument("--max-iterations", type=int, default=30, help="function evaluations of the solver")
    args = ap.parse_args()
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    # the prior: the Coulomb + viscous UR5 brakes shipped before the category-0 refit (kept with the tests)
    prior = brakes_from_config(robot, os.path.join(REPO, "test", "recordings", "data", "ur5_prior_brakes.yaml"))
    truth = BrakeSet.from_brakes(robot, [dataclasses.replace(
        b, sliding_torque=1.2 * b.sliding_torque, holding_torque=1.8 * b.sliding_torque,
        viscous=0.8 * b.viscous + 1.0, engage_delay=0.012) for b in prior.brakes])
    rng = np.random.default_rng(7)
    home = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
    starts = [StopStart(home + rng.uniform(-0.3, 0.3, 6), rng.choice([-1, 1], 6) * rng.uniform(0.4, 2.0, 6))
              for _ in range(args.stops)]
    t0 = time.perf_counter()
    samples = simulate_stops(robot, truth, starts, seed=8, plant_dt=2e-5)
    print(f"recorded {args.stops} stops with the fixed-step plant in {time.perf_counter() - t0:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        bag = write_simulated_bag(os.path.join(tmp, "bench"), samples, "mcap")
        t0 = time.perf_counter()
        stops = find_stops(read_recording(bag), robot)
        t_read = time.perf_counter() - t0
    print(f"read the bag and found {len(stops)} stops in {t_read:.2f} s")

    t0 = time.perf_counter()
    for s in stops:
        predict_stop(robot, prior, s.q0, s.v0, settings=StopSettings(step=0.01))
    t_one = (time.perf_counter() - t0) / len(stops)

    runs = {}
    for label, screen in (("before", False), ("after", True)):
        print(f"{label}: {'friction no sample shows left out' if screen else 'every friction term fitted'}")
        ident = identify_brakes(robot, prior.brakes, stops, max_iterations=args.max_iterations, screen_slides=screen,
                                progress=lambda text: print("  " + text, flush=True) if "Jacobian" not in text else None)
        runs[label] = ident
        report(ident, truth, t_one, len(stops))
    b, a = runs["before"], runs["after"]
    print(f"identification time after / before (same run): {a.seconds:.1f} s / {b.seconds:.1f} s = "
          f"x{a.seconds / b.seconds:.2f}; predictions {a.n_predictions} / {b.n_predictions} = "
          f"x{a.n_predictions / b.n_predictions:.2f}")

    full = BrakeSet.from_brakes(robot, [dataclasses.replace(
        b, breakaway_torque=1.3 * b.sliding_torque, stribeck_velocity=0.2, rise_time=0.005, armature=0.05)
        for b in truth.brakes])
    times = {}
    for label, brakes in (("Coulomb + viscous", truth), ("+ Stribeck, rise, armature", full)):
        t0 = time.perf_counter()
        for _ in range(3):
            for s in stops:
                predict_stop(robot, brakes, s.q0, s.v0)
        times[label] = (time.perf_counter() - t0) / (3 * len(stops))
        print(f"prediction with {label:<28} {1e3 * times[label]:.1f} ms per stop")
    a, b = times.values()
    print(f"cost of the new brake terms per prediction: x{b / a:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
