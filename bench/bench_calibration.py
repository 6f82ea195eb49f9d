"""Benchmark: a ten-stop brake identification, before and after, in the same run (target <= 30 s on this machine).

The stops: the realistic validation set ``tuning_a`` (``vtm_dynamics.recordings.validation_sets``: per-joint delays
of 13-24 ms, viscous terms on J0-J2, capacities 1.15-1.3 x sliding that decide slips in about half of the stops,
5 kg at tool0, 500 Hz with timestamp jitter, encoder quantisation, noise and lost messages), simulated by the
independent fixed-step plant (step 2e-5 s), written as an MCAP bag and read back as a user's bag would be; ten
stops fitted, four held out. Both fits start from the shipped prior without the extended terms
(config/ur5_brakes_coulomb_viscous.yaml), default fields, as docs/calibration.md tells a user.

"before": the identification as it was before this work (``vtm_dynamics/core/estop/identification.py`` at commit
``BEFORE``, loaded from the repository's history with ``git show``; its closed-form start, upward capacity probe
and single start). "after": ``identify_brakes`` now (direct measurement, capacity intervals, three starts,
uncertainty, leave-one-out cross-validation). Printed for each: wall time, predictions made, time per prediction,
residual RMS, the errors of J0-J2 sliding and viscous and of every delay against the truth, the elbow capacity,
and the held-out stops' errors; then the ratios after / before. The machine is shared by other work: the times
vary by 2x between runs, the prediction counts do not.

Both run on the compiled E-stop engine (the default of ``predict_stop``); the same "after" fit is then run again
on the Python engine it ran on before the compiled one existed, to show what the cheaper predictions pay for.

Run: python bench/bench_calibration.py [--before COMMIT] [--no-python-engine]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import types


HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from vtm_dynamics.core.estop import StopSettings, predict_stop  # noqa: E402
from vtm_dynamics.core.estop.brakes import BrakeSet, brakes_from_config  # noqa: E402
from vtm_dynamics.core.estop.identification import compare_stops, identify_brakes  # noqa: E402
from vtm_dynamics.recordings.bag_files import read_recording  # noqa: E402
from vtm_dynamics.recordings.simulated import plant_stops, sample_stops, write_simulated_bag  # noqa: E402
from vtm_dynamics.recordings.stops import find_stops  # noqa: E402
from vtm_dynamics.recordings.validation_sets import TUNING_A  # noqa: E402

BEFORE = "7245975"  # the branch point of this work
PRIOR = os.path.join(REPO, "config", "ur5_brakes_coulomb_viscous.yaml")
MAIN = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")


def load_before(commit: str) -> types.ModuleType | None:
    """The identification module as it was at ``commit`` (None if git or the commit is not available)."""
    try:
        text = subprocess.run(["git", "-C", REPO, "show", f"{commit}:vtm_dynamics/core/estop/identification.py"],
                              check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    spec = importlib.util.spec_from_loader("identification_before", loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    exec(compile(text, f"identification.py@{commit}", "exec"), module.__dict__)
    return module


def report(label: str, brakes, seconds: float, predictions: int, residual: float, robot, truth, held,
           elbow: str) -> dict:
    tb = {b.joint: b for b in truth.brakes}
    fitted = {b.joint: b for b in brakes}
    sliding = max(abs(fitted[j].sliding_torque / tb[j].sliding_torque - 1) for j in MAIN)
    viscous = max(abs(fitted[j].viscous / tb[j].viscous - 1) for j in MAIN)
    delay = max(abs(fitted[j].engage_delay - tb[j].engage_delay) for j in tb)
    comps = compare_stops(robot, BrakeSet.from_brakes(robot, list(brakes)), held, "tool0")
    worst = {w: min(c.relative(w) for c in comps) for w in ("time", "angle", "tcp")}
    print(f"{label}: {seconds:.1f} s, {predictions} predictions ({1e3 * seconds / max(predictions, 1):.1f} ms each); "
          f"residual RMS {residual:.3g} rad; target <= 30 s: {'met' if seconds <= 30 else 'NOT met'}")
    print(f"  J0-J2 sliding within {100 * sliding:.1f} %, viscous within {100 * viscous:.1f} %, every delay within "
          f"{1e3 * delay:.2f} ms of the truth; elbow capacity {elbow} (truth {tb['elbow_joint'].holding_torque:.1f})")
    print(f"  held-out stops ({len(held)}), most negative error: time {100 * worst['time']:+.1f} %, angle "
          f"{100 * worst['angle']:+.1f} %, TCP distance {100 * worst['tcp']:+.1f} %")
    return {"seconds": seconds, "predictions": predictions}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=BEFORE, help="commit of the previous identification (default %(default)s)")
    ap.add_argument("--no-python-engine", dest="python_engine", action="store_false",
                    help="skip the same fit on the Python engine (the engine of the fit before the compiled one)")
    args = ap.parse_args()
    print("the machine is shared by other work: times vary with its load; prediction counts do not")
    vs = TUNING_A
    robot = vs.robot()
    truth = vs.truth(robot)
    t0 = time.perf_counter()
    plant = plant_stops(robot, truth, vs.starts(robot), plant_dt=2e-5)
    samples = sample_stops(plant, robot.joint_names, sensor=vs.sensor, seed=11)
    print(f"simulated {len(plant)} stops with the fixed-step plant in {time.perf_counter() - t0:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        bag = write_simulated_bag(os.path.join(tmp, "bench"), samples, "mcap")
        t0 = time.perf_counter()
        stops = find_stops(read_recording(bag), robot)
        print(f"read the bag and found {len(stops)} stops in {time.perf_counter() - t0:.2f} s")
    fit, held = stops[:vs.stops], stops[vs.stops:]
    prior = brakes_from_config(robot, PRIOR)

    predict_stop(robot, prior, fit[0].q0, fit[0].v0, settings=StopSettings(step=0.01))  # loads the kernels
    t_one = {}
    for engine in ("compiled", "python"):
        t0 = time.perf_counter()
        for s in fit:
            predict_stop(robot, prior, s.q0, s.v0, settings=StopSettings(step=0.01, engine=engine))
        t_one[engine] = (time.perf_counter() - t0) / len(fit)
    print(f"one prediction of these stops with the prior (same run): {1e3 * t_one['compiled']:.1f} ms with the "
          f"compiled engine (the default), {1e3 * t_one['python']:.1f} ms with the Python engine")

    runs = {}
    old = load_before(args.before)
    if old is None:
        print(f"before: the identification at {args.before} is not available (no git history): skipped")
    else:
        t0 = time.perf_counter()
        ident = old.identify_brakes(robot, prior.brakes, fit)
        seconds = time.perf_counter() - t0
        est = {(e.joint, e.field): e for e in ident.estimates}
        elbow = est[("elbow_joint", "holding_torque")]
        text = elbow.reason.split(":")[0] if not elbow.identifiable else f"{elbow.value:.1f}"
        if getattr(elbow, "lower_bound", None) is not None:
            text = f"'at least {elbow.lower_bound:.1f}'"
        runs["before"] = report(f"before ({args.before})", ident.brakes, seconds, ident.n_predictions,
                                ident.residual_rms, robot, truth, held, text)
    t0 = time.perf_counter()
    ident = identify_brakes(robot, prior.brakes, fit, tcp_frame="tool0")
    seconds = time.perf_counter() - t0
    cap = {c.joint: c for c in ident.capacities}["elbow_joint"]
    runs["after"] = report("after", ident.brakes, seconds, ident.n_predictions, ident.residual_rms, robot, truth,
                           held, f"[{cap.lower:.1f}, {cap.upper:.1f}]")
    print(f"  {ident.agreeing} of {len(ident.starts)} starts reached the best optimum")
    if args.python_engine:
        t0 = time.perf_counter()
        slow = identify_brakes(robot, prior.brakes, fit, tcp_frame="tool0",
                               settings=StopSettings(step=0.01, engine="python"))
        cap = {c.joint: c for c in slow.capacities}["elbow_joint"]
        runs["python"] = report("after, on the Python engine", slow.brakes, time.perf_counter() - t0,
                                slow.n_predictions, slow.residual_rms, robot, truth, held,
                                f"[{cap.lower:.1f}, {cap.upper:.1f}]")
    if "before" in runs:
        b, a = runs["before"], runs["after"]
        print(f"after / before (same run): time {a['seconds']:.1f} s / {b['seconds']:.1f} s = "
              f"x{a['seconds'] / b['seconds']:.2f}; predictions {a['predictions']} / {b['predictions']} = "
              f"x{a['predictions'] / b['predictions']:.2f}")
    if "python" in runs:
        a, p = runs["after"], runs["python"]
        print(f"compiled / Python engine (same fit, same run): time {a['seconds']:.1f} s / {p['seconds']:.1f} s = "
              f"x{a['seconds'] / p['seconds']:.2f}")
    share = ident.n_predictions * t_one["compiled"] / ident.seconds
    print(f"identification after: its {ident.n_predictions} predictions at the prior's time per prediction would take "
          f"{100 * share:.0f} % of its time (the rest: longer trial stops, the solver, the covariances, the capacity "
          f"bookkeeping)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
