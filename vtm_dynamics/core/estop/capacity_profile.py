"""Holding-capacity bounds checked with the other fitted values free: a profile over them, not a slice.

:func:`~.capacity_bounds.capacity_intervals` compares capacities with the friction and delays fixed at one set of
values, and the fit found those values with each capacity where it ran (a joint held throughout, say). A stop
whose decision is driven by a small excess of the demand over the sliding torque can then look decisive only
because the friction was fitted to the other decision. On stops recorded from MuJoCo (test/cli/
test_calibrate_mujoco.py) the fit ran with wrist 1 held, read so at the direct measurement's sliding torque (21.5
N m, 14 % low); at the fitted values (sliding 24.30 N m, viscous 0.41 N m s/rad; MuJoCo's 25 and 0) a slip in
stop 4 fitted that stop 95 residual variances worse than a hold, so its capacity was reported "at least 26.4 N m"
(truth 25), and the file carried 26.6. With the fitted values fitted again (each stop's trigger state free, as in
the comparison) the slip fits within 1.5 residual variances of the hold (1.6 at the wrist's static friction):
the stop does not decide it. Setting only the sliding torque to MuJoCo's left the slip 45 worse: the delay and
viscous term move with it.

So each end of an interval that a stop's demand sets is put to that test (:func:`confirmed_capacities`): the
fitted values are fitted again (damped Gauss-Newton, :func:`~.output_error.damped_gauss_newton`) on the residuals
with each stop's trigger state profiled out (:meth:`~.capacity_bounds.StateFreedom.whitener`, the comparison's
own measure), once with every capacity where the fit runs and once with the joint's capacity just beyond the end
(in the middle of the next step of the comparison's cost). Unless the second is worse by more than
``DELTA_CHI2`` residual variances, the end moves out, bisecting over the steps beyond it (assuming a capacity
farther out fits no better), to the first capacity tried that is refused (the static friction, or no upper bound,
where none is); the stops that set it are named ``undecided``, and a lower end that moved puts the value the file
carries at the least capacity that fitted, with the fit polished there (:func:`with_confirmed_capacities`). An
end the stops decide costs one re-fit (the realistic validation set's elbow: 15 and 19 500 residual variances
beyond its ends). The stops are predicted by the engine (Müller 2026, eq. (3)).

Units: N m for capacities; rad^2 for costs.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import numpy as np

from vtm_dynamics.core.estop.brakes import JointBrake
from vtm_dynamics.core.estop.capacity_bounds import (
    DELTA_CHI2, MODEL_MARGIN, CapacityInterval, StateFreedom,
)
from vtm_dynamics.core.estop.multi_start import set_capacities
from vtm_dynamics.core.estop.output_error import MultiStartFit, OutputError, damped_gauss_newton


class StateFreeError(OutputError):
    """The output error with each stop's residual whitened by its trigger-state freedom (:class:`StateFreedom`
    built once, at the brakes of ``base`` and the values ``x``): |residuals|^2 is the sum of the stops'
    :meth:`StateFreedom.cost`, which a least-squares fit then minimises."""

    def __init__(self, problem: OutputError, x: np.ndarray, variance: float) -> None:
        super().__init__(problem.robot, problem.base, problem.params, problem.stops, problem.scale,
                         problem.predictor)
        brakes = self.brake_set(x)
        raw = problem.residuals_of(brakes)
        self.whiten = [StateFreedom(problem, brakes, s, r, variance).whitener(variance)
                       for s, r in zip(self.stops, raw)]

    def _whitened(self, r: np.ndarray) -> np.ndarray:
        parts = np.split(r, np.cumsum(self.sizes)[:-1])
        return np.concatenate([w(part) for w, part in zip(self.whiten, parts)])

    def residuals(self, x: np.ndarray) -> np.ndarray:
        return self._whitened(super().residuals(x))

    def jacobian(self, x: np.ndarray, r0: np.ndarray, step: float, columns: Sequence[int]) -> np.ndarray:
        J = super().jacobian(x, super().residuals(x), step, columns)
        return np.column_stack([self._whitened(J[:, k]) for k in range(J.shape[1])]) if J.size else J


def profiled_cost(problem: OutputError, brakes: Sequence[JointBrake], x: np.ndarray, active: Sequence[int],
                  variance: float, fd_step: float, max_iterations: int, say: Callable[[str], None],
                  label: str) -> float:
    """The least sum over the stops of the squared residual [rad^2], each stop's trigger state free within its
    uncertainty, over the ``active`` fitted values from ``x``, with every other field as in ``brakes``."""
    free = StateFreeError(problem.with_base(brakes), x, variance)
    run = damped_gauss_newton(free, x, active, fd_step, max_iterations, say, label)
    return 2.0 * run.cost


def _variance(fit: MultiStartFit) -> float:
    m, n = fit.J.shape
    return float(fit.r @ fit.r) / max(m - n, 1)


def _farthest(candidates: Sequence[float], accepted: Callable[[float], bool]) -> int:
    """The index of the farthest of ``candidates`` (ordered from the end outwards) that ``accepted`` accepts,
    assuming that a capacity farther from the end fits no better (bisection; -1: not even the nearest)."""
    if not candidates or not accepted(candidates[0]):
        return -1
    if accepted(candidates[-1]):
        return len(candidates) - 1
    good, bad = 0, len(candidates) - 1
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if accepted(candidates[mid]) else (good, mid)
    return good


def confirmed_capacities(problem: OutputError, fit: MultiStartFit, caps: dict[str, CapacityInterval],
                         fd_step: float, max_iterations: int, say: Callable[[str], None]
                         ) -> dict[str, CapacityInterval]:
    """``caps`` (read at ``fit``'s optimum, before :func:`~.capacity_bounds.widened`) with every end that a stop
    sets checked with the fitted values fitted again (module docstring). Where the capacity just beyond an end
    fits within ``DELTA_CHI2`` residual variances of the capacities the fit runs with, the end moves out to the
    first capacity tried beyond it that does not (the static friction, or no upper bound, where none), the stop
    that set it is named ``undecided``, and a moved lower end puts the nominal value (and the one the fit is to
    run with) at the least capacity that fitted."""
    variance = _variance(fit)
    x = fit.x
    base = problem.brakes(x)
    inside: list[float] = []
    out = dict(caps)
    for joint, c in caps.items():
        def accepted(value: float, joint: str = joint) -> bool:
            if not inside:
                say("identification: the capacities' ends with the fitted values fitted again")
                inside.append(profiled_cost(problem, base, x, fit.active, variance, fd_step, max_iterations, say,
                                            "capacities where the fit runs"))
            trial = [dataclasses.replace(b, holding_torque=value) if b.joint == joint else b for b in base]
            worse = (profiled_cost(problem, trial, x, fit.active, variance, fd_step, max_iterations, say,
                                   f"{joint} at {value:.4g} N m") - inside[0]) / variance
            say(f"identification: {joint} at {value:.4g} N m with the other values fitted again: {worse:.3g} "
                "residual variances worse than where the fit runs")
            return worse <= DELTA_CHI2

        # each capacity tried is the middle of a step of the comparison's cost (from one capacity tried to the
        # next; above every demand level, a hold throughout): at a step's edge the re-fit moves the demand across
        # it (a shoulder's capacity at the level it slipped at fitted 1.2 residual variances worse, every value
        # inside that step 676 worse)
        edges = np.asarray(c.steps, float)
        middles = np.append(0.5 * (edges[:-1] + edges[1:]), math.inf)
        new = c
        if c.lower_source is not None and c.lower > c.floor * (1.0 + 1e-9):
            below = middles[edges <= c.lower][::-1]  # from the end down to the static friction
            k = _farthest(list(below), accepted)
            if k >= 0:
                name = problem.stops[c.lower_source[0]].label
                lower = float(below[k + 1]) if k + 1 < below.size else c.floor
                # every stop that held it did so at a demand above the least value that fitted
                new = dataclasses.replace(new, lower=lower, lower_source=None, nominal=float(below[k]),
                                          central=float(below[k]), held=(),
                                          undecided=tuple(dict.fromkeys((name, *c.held))))
        if c.upper_source is not None and math.isfinite(c.upper):
            above = middles[edges >= c.upper / (1.0 + MODEL_MARGIN) * (1.0 - 1e-12)]  # from the end up to a hold
            k = _farthest(list(above), accepted)
            if k >= 0:
                name = problem.stops[c.upper_source[0]].label
                upper = float(above[k + 1]) if k + 1 < above.size else math.inf
                new = dataclasses.replace(new, upper=upper, upper_source=None, slipped=(),
                                          undecided=tuple(dict.fromkeys((*new.undecided, name, *c.slipped))))
        if new is not c:
            say(f"identification: {joint}: an end set by {', '.join(new.undecided)} is not decided once the other "
                f"values are fitted again: {new.describe()}")
        out[joint] = new
    return out


def with_confirmed_capacities(problem: OutputError, caps: dict[str, CapacityInterval], fit: MultiStartFit,
                              fd_step: float, max_iterations: int, say: Callable[[str], None]
                              ) -> tuple[OutputError, dict[str, CapacityInterval], MultiStartFit]:
    """:func:`confirmed_capacities` (nothing to check without capacities or fitted values); where a capacity the
    fit runs with moved, the fit polished with the new ones (its values then fit the capacities the file
    carries) and each interval's static friction taken from the polished values. Returns the problem with the
    capacities the fit runs with, the capacities and the fit."""
    if not caps or not fit.J.size:
        return problem, caps, fit
    checked = confirmed_capacities(problem, fit, caps, fd_step, max_iterations, say)
    if all(checked[j].central == caps[j].central for j in caps):
        return problem, checked, fit
    problem = problem.with_base(set_capacities(problem.base, checked))
    run = damped_gauss_newton(problem, fit.x, fit.active, fd_step, max_iterations, say, "polish")
    fit = dataclasses.replace(fit, x=run.x, r=run.r, J=run.J, at_bound=run.at_bound)
    out = {}
    for b in problem.brakes(fit.x):
        if b.joint in checked:
            c = checked[b.joint]
            floor = float(b.breakaway_torque if b.breakaway_torque is not None else b.sliding_torque)
            at_floor = c.lower <= c.floor * (1.0 + 1e-9)
            lower = floor if at_floor else max(c.lower, floor)
            # a value the stops put at the static friction follows it (the least they accept); one the check
            # found (the capacity moved) stays, at least the static friction
            nominal = floor + (c.nominal - c.floor) if at_floor and c.central == caps[b.joint].central \
                else max(c.nominal, lower)
            out[b.joint] = dataclasses.replace(c, floor=floor, lower=lower, nominal=max(nominal, lower),
                                               central=max(c.central, lower))
    return problem, out, fit
