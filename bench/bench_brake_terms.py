"""Benchmark: the cost the extended brake terms (Stribeck friction, brake torque rise, armature) add per prediction.

The same UR5 category-0 stops are predicted with the Coulomb + viscous brake set (the model before the extension,
test data ur5_coulomb_viscous_brakes.yaml), then with the same set plus each new term alone, plus all of them, and
with the shipped defaults (config/ur5_brakes.yaml, all terms). Prints the median wall time per prediction, the
right-hand-side evaluations and the ratio against the Coulomb + viscous set measured in the same run, for the
compiled engine (the default) and the Python engine (``StopSettings(engine="python")``, the path before it).

Run: python bench/bench_brake_terms.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time

import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from vtm_dynamics.core.estop import StopSettings, predict_stop  # noqa: E402
from vtm_dynamics.core.estop.brakes import brakes_from_config  # noqa: E402
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf  # noqa: E402

BASE = os.path.join(REPO, "test", "core", "estop", "data", "ur5_coulomb_viscous_brakes.yaml")
DEFAULTS = os.path.join(REPO, "config", "ur5_brakes.yaml")
STATES = [  # (q, v): a moving demo state and the three stretched-arm tests
    ([0.3, -1.2, 1.5, -0.8, 0.5, 0.2], [2.0, -2.5, 2.8, 1.5, -2.0, 3.0]),
    ([0.0] * 6, [3.14, 0, 0, 0, 0, 0]),
    ([0.0] * 6, [0, 3.14, 0, 0, 0, 0]),
    ([0.0] * 6, [0, 0, 3.14, 0, 0, 0]),
]


def with_terms(base: dict, *, stribeck=False, rise=False, armature=False) -> dict:
    cfg = copy.deepcopy(base)
    if rise:
        cfg["brakes"]["defaults"]["rise_time"] = 0.005
    for k, entry in enumerate(cfg["brakes"]["joints"].values()):
        if stribeck:
            entry["breakaway_torque"] = 1.2 * entry["sliding_torque"]
            entry["stribeck_velocity"] = 0.05
            entry["holding_torque"] = max(entry["holding_torque"], entry["breakaway_torque"])
        if armature:
            entry["armature"] = (2.0, 2.0, 0.5, 0.15, 0.15, 0.15)[k]
    return cfg


def time_set(robot, brakes, repeat: int, settings=StopSettings()) -> tuple[float, float]:
    """(median CPU time per prediction [s] over all states, mean evaluations per prediction)."""
    times, evals = [], []
    for q, v in STATES:
        predict_stop(robot, brakes, q, v, settings=settings)  # warm the caches as a running predictor would
        for _ in range(repeat):
            t0 = time.process_time()
            p = predict_stop(robot, brakes, q, v, settings=settings)
            times.append(time.process_time() - t0)
            evals.append(p.n_evaluations)
    return float(np.median(times)), float(np.mean(evals))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30, help="predictions per state and brake set")
    args = ap.parse_args(argv)
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    with open(BASE, encoding="utf-8") as fh:
        base = yaml.safe_load(fh)
    sets = [
        ("coulomb + viscous (before)", base),
        ("+ stribeck", with_terms(base, stribeck=True)),
        ("+ rise 5 ms", with_terms(base, rise=True)),
        ("+ armature", with_terms(base, armature=True)),
        ("+ all three", with_terms(base, stribeck=True, rise=True, armature=True)),
        ("shipped defaults", DEFAULTS),
    ]
    load = os.getloadavg()[0]
    print(f"UR5, {len(STATES)} states x {args.repeat} predictions per brake set (median CPU time; load average "
          f"{load:.1f} on {os.cpu_count()} cores)")
    print(f"{'brake set':<28s}{'ms/prediction':>15s}{'evaluations':>13s}{'ratio':>8s}"
          f"{'python engine ms':>18s}{'evaluations':>13s}{'ratio':>8s}{'python/compiled':>17s}")
    ref = ref_py = None
    for k, (name, cfg) in enumerate(sets):
        print(f"  measuring {name} ({k + 1}/{len(sets)})", file=sys.stderr, flush=True)
        brakes = brakes_from_config(robot, cfg)
        t, n = time_set(robot, brakes, args.repeat)
        t_py, n_py = time_set(robot, brakes, max(3, args.repeat // 3), StopSettings(engine="python"))
        ref = ref or t
        ref_py = ref_py or t_py
        print(f"{name:<28s}{1e3 * t:>15.3f}{n:>13.1f}{t / ref:>8.2f}{1e3 * t_py:>18.3f}{n_py:>13.1f}"
              f"{t_py / ref_py:>8.2f}{t_py / t:>17.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
