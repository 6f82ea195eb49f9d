"""What recorded stops can and cannot identify, decided before the fit (and checked again after it).

* **No sample shows it.** The brake acts on a joint only between its engagement and its arrival at rest; a joint
  that comes to rest within ``MIN_SLIDE_SAMPLES`` sample periods of its brake engaging in every stop shows its
  friction in no sample, only through the few microradians it travels between two samples and the reactions on
  the other joints (a fit still finds a sensitivity there, resting on the model's exact shape between samples and
  on each stop's trigger-state estimate: on 20 UR5 stops it reported wrist 3's sliding torque 49 % low with a 9 %
  1-sigma). Its friction terms are not fitted (:func:`unobservable_friction`).
* **Sensitivity** (:func:`sensitivity_screen`): a parameter no stop is sensitive to (zero Jacobian column), one
  whose sensitivity cannot beat the noise (doubling it moves the samples by less than 10 x the noise allows to
  resolve, the Cramer-Rao bound alone), or one the stops cannot separate from others (numerical rank of the scaled
  Jacobian, :func:`~vtm_dynamics.core.numerics.numerical_rank`) is not fitted.

Each verdict names the test motion that would identify the parameter (``TEST_MOTION``). Units: s.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from vtm_dynamics.core.estop.output_error import FitParameter, OutputError
from vtm_dynamics.core.estop.recorded import RecordedStop
from vtm_dynamics.core.numerics import numerical_rank
from vtm_dynamics.core.robot.model import RobotModel

SLIDE_FIELDS = ("sliding_torque", "viscous", "breakaway_torque", "stribeck_velocity")

MIN_SLIDE_SAMPLES = 2.0  # a joint sliding for less than this many sample periods shows its friction nowhere

UNSEEN_RELATIVE = 0.5  # 1-sigma of a friction term no sample shows, relative to its start value

SLIDE_REASON = "no sample shows it"

SLIDE_MOTION = ("stops in which {j} slides well after its brake engages (several samples): {j} alone at its top "
                "speed, with the rated payload or the arm posed so that more inertia turns with {j}")

TEST_MOTION = {
    "engage_delay": "a stop with {j} moving at speed (>= 0.5 rad/s) when the trigger fires",
    "sliding_torque": "a stop with {j} moving at speed (>= 0.5 rad/s) when the trigger fires",
    "viscous": "stops of {j} from at least two clearly different speeds (e.g. 0.5 and 2 rad/s)",
    "holding_torque": "a stop that leaves {j} loaded beyond its holding capacity: stretch the arm so gravity on {j} "
                      "is largest, add the rated payload, stop from speed in that pose (or a static hold test with "
                      "increasing load)",
    "breakaway_torque": "slow stops of {j} (speed within a few Stribeck velocities) or a breakaway test from rest",
    "stribeck_velocity": "stops of {j} from several low speeds (0.05-0.5 rad/s)",
    "rise_time": "a stop of {j} from high speed with the arm light (payload off)",
    "armature": "stops of {j} from high speed in two poses with different link inertia about {j}",
}


def longest_slides(problem: OutputError, x: np.ndarray) -> np.ndarray:
    """Per joint, the longest time [s] over the stops that it slides after its brake engaged (inf where a
    prediction fails or does not come to rest: nothing is concluded from it)."""
    brakes = problem.brake_set(x)
    delay = np.asarray(brakes.engage_delay, float)
    longest = np.zeros(problem.robot.nv)
    for p in problem.predictions(x):
        if p is None:
            return np.full(problem.robot.nv, np.inf)
        ends = np.where(np.isfinite(p.joint_stop_times), p.joint_stop_times, np.inf)
        longest = np.maximum(longest, ends - delay)
    return np.maximum(longest, 0.0)


def unobservable_friction(robot: RobotModel, params: Sequence[FitParameter], slides: np.ndarray,
                           sample: float) -> dict[int, str]:
    """The friction parameters of joints that slide for less than ``MIN_SLIDE_SAMPLES`` sample periods after
    their brake engages in every stop: the brake acts on such a joint only between two samples, so no sample
    shows its friction (a fit still finds a sensitivity there, resting on the model's exact shape between samples
    and on each stop's trigger-state estimate; on 20 UR5 stops it reported wrist 3's sliding torque 49 % low
    with a 9 % 1-sigma)."""
    out: dict[int, str] = {}
    index = {name: k for k, name in enumerate(robot.joint_names)}
    for i, p in enumerate(params):
        j = index.get(p.joint)
        if p.field in SLIDE_FIELDS and j is not None and slides[j] < MIN_SLIDE_SAMPLES * sample:
            out[i] = (f"{SLIDE_REASON}: {p.joint} slides at most {1e3 * slides[j]:.2g} ms after its brake engages "
                      f"in any stop, less than {MIN_SLIDE_SAMPLES:g} sample periods ({1e3 * sample:.2g} ms each)")
    return out


def sample_period(stops: Sequence[RecordedStop]) -> float:
    periods = [float(np.median(np.diff(s.t))) for s in stops if s.t.size > 1]
    return float(np.median(periods)) if periods else math.inf


def sensitivity_screen(problem: OutputError, x: np.ndarray, candidates: list[int], fd_step: float, noise: float,
                       max_relative_sigma: float, reasons: dict[int, str],
                       say: Callable[[str], None]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Sensitivity at the start: columns no stop is sensitive to, too little sensitive to beat the noise, or
    not separable from others are not fitted. Returns (active, r0, J0 of the active columns)."""
    say("identification: sensitivity at the start")
    r0 = problem.residuals(x)
    J0 = problem.jacobian(x, r0, fd_step, candidates)
    norms = np.linalg.norm(J0, axis=0)
    top = float(norms.max()) if norms.size else 0.0
    keep = []
    for k, i in enumerate(candidates):
        if not norms[k] > 1e-9 * max(top, 1e-300):
            reasons[i] = "no recorded stop is sensitive to it"
        elif noise / norms[k] > max_relative_sigma:
            reasons[i] = f"the stops are too little sensitive to it (1-sigma at least {noise / norms[k]:.2g} relative)"
        else:
            keep.append(k)
    if keep:
        Js = J0[:, keep] / norms[keep]
        rank = numerical_rank(Js, rtol=1e-6)
        if rank < len(keep):
            _, _, vt = np.linalg.svd(Js)
            for null in vt[rank:]:
                worst = int(np.argmax(np.abs(null)))
                partners = [problem.params[candidates[keep[k]]].name for k in np.argsort(-np.abs(null))[:3]
                            if k != worst]
                reasons[candidates[keep[worst]]] = f"not separable from {', '.join(partners)} with these stops"
            keep = [k for k in keep if candidates[k] not in reasons]
    return [candidates[k] for k in keep], r0, J0[:, keep]
