"""The global fit from several starts, with the holding capacities it runs with read again at its optimum.

The output-error problem (:mod:`.output_error`) is not convex: the order of the stick/slip events changes with
the delays. So it is minimised from several starts (:func:`start_list`: the direct measurement, the prior's
values, the direct measurement perturbed), the best optimum kept and the starts that reached it counted
(:func:`multi_start`). The capacities the fit runs with were read at the friction and delays of its start; at the
optimum the stops may accept others, and the fit runs again until they stay (:func:`fitted_with_capacities`).
Part of the brake identification (:mod:`.identification`; Müller 2026, eq. (3) for the stops predicted).

Units: scaled parameter vectors (value / scale); s, N m, N m s/rad where physical.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Mapping, Sequence

import numpy as np

from vtm_dynamics.core.estop.brakes import JointBrake
from vtm_dynamics.core.estop.capacity_bounds import CapacityInterval, capacity_intervals, moved
from vtm_dynamics.core.estop.fit_uncertainty import gauss_newton_covariance
from vtm_dynamics.core.estop.output_error import (
    MultiStartFit, OutputError, StartResult, damped_gauss_newton, same_optimum, search_box, start_value,
)

PERTURBATION = 0.2  # relative 1-sigma of the torques of a perturbed start (log-normal)
DELAY_PERTURBATION = 0.002  # [s] 1-sigma of the delays of a perturbed start
CAPACITY_ROUNDS = 2  # global fits, each with the capacities read at the optimum of the one before


def scaled_start(problem: OutputError, brakes: Sequence[JointBrake]) -> np.ndarray:
    by_joint = {b.joint: b for b in brakes}
    values = np.array([start_value(by_joint[p.joint], p.field) for p in problem.params])
    for i, k in problem.excess.items():
        values[i] = max(values[i] - values[k], 0.0)
    return values / problem.scale


def perturbed(x: np.ndarray, problem: OutputError, active: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    out = np.array(x, float)
    lower, upper = search_box(problem, active)
    for k, i in enumerate(active):
        if problem.params[i].field == "engage_delay":
            out[i] = x[i] + rng.normal(0.0, DELAY_PERTURBATION) / problem.scale[i]
        else:
            out[i] = x[i] * math.exp(rng.normal(0.0, PERTURBATION))
        out[i] = min(max(out[i], lower[k]), upper[k])
    return out


def start_list(problem: OutputError, prior: Sequence[JointBrake], x_direct: np.ndarray, active: list[int],
                starts: int, seed: int) -> list[tuple[str, np.ndarray]]:
    """The global fit's ``starts`` starts (scaled vectors, labelled): the direct measurement, the prior's values
    of the fitted columns (capacities as the stops bracket them), then the direct measurement perturbed
    (:func:`perturbed`, drawn with ``seed``)."""
    rng = np.random.default_rng(seed)
    start_list = [("direct measurement", x_direct)]
    if starts > 1:
        x_prior = x_direct.copy()
        x_prior[active] = scaled_start(problem, [dataclasses.replace(b, holding_torque=c.holding_torque)
                                                  for b, c in zip(prior, problem.base)])[active]
        start_list.append(("prior", x_prior))
    while len(start_list) < starts:
        start_list.append((f"perturbed {len(start_list) - 1}", perturbed(x_direct, problem, active, rng)))
    return start_list


def multi_start(problem: OutputError, starts: list[tuple[str, np.ndarray]], active: list[int], fd_step: float,
                 max_iterations: int, r0: np.ndarray | None, J0: np.ndarray | None, say) -> tuple[MultiStartFit, float]:
    """Every start run to its optimum; the best kept, the others compared with it."""
    runs = []
    target = None
    for n, (label, x0) in enumerate(starts):
        say(f"identification: start {n + 1} of {len(starts)} ({label})")
        run = damped_gauss_newton(problem, x0, active, fd_step, max_iterations, say, label,
                                  jac0=J0 if n == 0 else None, r0=r0 if n == 0 else None, target=target)
        runs.append((label, x0, run))
        best_run = min((item[2] for item in runs), key=lambda d: d.cost)
        if best_run is run:
            sd = np.sqrt(np.maximum(np.diag(gauss_newton_covariance(run.J, run.r)), 0.0))
            target = (run.x, np.full(run.x.size, np.inf), run.cost)
            target[1][active] = sd
    label, x0, best = min(runs, key=lambda item: item[2].cost)
    m, n = best.J.shape
    variance = float(best.r @ best.r) / max(m - n, 1)
    sigma = np.sqrt(np.maximum(np.diag(gauss_newton_covariance(best.J, best.r)), 0.0))
    best_result = StartResult(label, x0[active], best.x[active], best.cost, best.message, True)
    results = []
    for lab, s0, run in runs:
        mine = StartResult(lab, s0[active], run.x[active], run.cost, run.message)
        results.append(dataclasses.replace(mine, agrees=same_optimum(mine, best_result, sigma, variance)))
    return MultiStartFit(best.x, best.r, best.J, list(active), best.at_bound, tuple(results)), variance


def fitted_with_capacities(problem: OutputError, caps: dict[str, CapacityInterval],
                            start_list: list[tuple[str, np.ndarray]], active: list[int], capacity_joints: list[str],
                            fd_step: float, max_iterations: int, r0: np.ndarray | None, J0: np.ndarray | None,
                            say: Callable[[str], None]
                            ) -> tuple[OutputError, dict[str, CapacityInterval], MultiStartFit]:
    """The global fit from every start with the capacities of ``caps``, the capacities read again at its
    optimum, and the fit run again (up to ``CAPACITY_ROUNDS`` times) while they move; then polished. Returns the
    problem with the capacities the fit ran with, those capacities and the fit. ``r0``/``J0``: the residuals and
    Jacobian at the first start, if known."""
    fit: MultiStartFit | None = None
    for round_ in range(CAPACITY_ROUNDS):
        fit, variance = multi_start(problem, start_list, active, fd_step, max_iterations,
                                     r0 if round_ == 0 else None, J0 if round_ == 0 else None, say)
        if not capacity_joints:
            break
        say("identification: holding capacities at the optimum")
        new_caps = capacity_intervals(problem, problem.brakes(fit.x), capacity_joints, variance, say)
        shifted = [j for j in capacity_joints if moved(caps[j], new_caps[j])]
        caps = new_caps
        problem = problem.with_base(set_capacities(problem.base, caps))
        if not shifted:
            break
        if round_ + 1 < CAPACITY_ROUNDS:
            # the capacities the fit ran with were read at the direct measurement's friction: at the optimum
            # the stops accept another range, and the fit runs again from all its starts (a polish from the
            # optimum kept a basin where the friction had bent to fit the old capacities: J1 +2.4 %)
            say(f"identification: capacities moved ({', '.join(shifted)}); the global fit again from its starts")
        else:
            say(f"identification: capacities moved ({', '.join(shifted)}); polishing the fit")
            run = damped_gauss_newton(problem, fit.x, active, fd_step, max_iterations, say, "polish")
            fit = dataclasses.replace(fit, x=run.x, r=run.r, J=run.J, at_bound=run.at_bound)
    assert fit is not None
    return problem, caps, fit


def set_capacities(base: Sequence[JointBrake], caps: Mapping[str, CapacityInterval]) -> list[JointBrake]:
    return [dataclasses.replace(b, holding_torque=caps[b.joint].central) if b.joint in caps else b for b in base]
