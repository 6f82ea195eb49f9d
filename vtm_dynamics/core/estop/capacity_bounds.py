"""Holding capacities bracketed both ways by the stick/slip decisions the recorded stops show.

A holding capacity enters a prediction only through the decision whether a joint at rest stays stuck: it holds
while the torque its brake must supply (the demand lambda_j of Müller 2026, eq. (3) with the joint-lock rows)
stays within the capacity, and slips at the first instant the demand exceeds it. So for one stop, the prediction
as a function of the capacity c is fixed by the demand timeline D(t) of the joint held throughout (the capacity
raised out of the way): for c above the largest demand the joint holds; below, it slips when D first exceeds c.
Each stop's residual is therefore a step function of c with its steps at the running maxima of D (a continuous
function where D rises continuously).

The decision a stop records is read from the recording itself: the stop is predicted with the capacity just
above each of its demand levels (the running maxima of D, at most ``MAX_LEVELS``) and at the static friction
(the lowest capacity the friction-order rule allows), and the sum over the stops of the residuals' squares is
compared between capacities. A joint that slipped in a stop makes every capacity above the demand at which it
slipped fit that stop worse (an upper bound); one that held makes every capacity below the largest demand it held
fit worse (a lower bound). The reported interval is the set of capacities whose total squared residual lies
within ``DELTA_CHI2`` residual variances of the best (a profile at the fitted friction and delays: 95 % for one
parameter), widened by the uncertainty of the demands that set its ends (which move with the fitted friction and
delays, :func:`widened`): both ends where some stop slipped and some held, "at least" where none slipped (the upper side not
tested), "not tested" where no stop loaded the joint beyond its static friction. A capacity is never a single
value raised out of the way.

Units: N m.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from vtm_dynamics.core.estop.brakes import BrakeSet, JointBrake
from vtm_dynamics.core.estop.output_error import OutputError, stop_residual

MAX_LEVELS = 12  # demand levels tried per stop and joint
DELTA_CHI2 = 3.84  # chi^2 quantile of one parameter at 95 %
LEVEL_MARGIN = 1e-6  # a capacity this much (relative) above a demand level holds it
DEMAND_WINDOW = 2e-3  # [s] around the instant of an end's demand level, when it is looked up again


@dataclass(frozen=True)
class CapacityInterval:
    """What the stops say about one joint's holding capacity [N m]: every value in [``lower``, ``upper``] fits
    them (``upper`` inf: no stop slipped the joint, so the stops bound it from below only); ``floor`` the static
    friction it can never be below (breakaway, else sliding torque); ``nominal`` the value the fitted brake file
    carries, ``conservative`` the one of the conservative file (``lower``: a weaker brake slips sooner). ``held``
    and ``slipped`` name the stops that bound it from below and from above."""

    joint: str
    lower: float
    upper: float
    floor: float
    nominal: float
    held: tuple[str, ...]
    slipped: tuple[str, ...]
    lower_source: tuple[int, float] | None = None  # (stop index, time [s]) of the demand level at the lower end
    upper_source: tuple[int, float] | None = None

    @property
    def tested(self) -> bool:
        """Whether some stop slipped the joint (so the capacity is bounded from above too)."""
        return math.isfinite(self.upper)

    @property
    def loaded(self) -> bool:
        """Whether some stop loaded the joint beyond its static friction while it held."""
        return self.lower > self.floor * (1.0 + 1e-9) or self.tested

    @property
    def conservative(self) -> float:
        return max(self.lower, self.floor)

    def describe(self) -> str:
        if self.tested:
            return (f"between {self.lower:.4g} and {self.upper:.4g} N m (held in {len(self.held)} stop(s), slipped "
                    f"in {len(self.slipped)})")
        if self.loaded:
            return (f"at least {self.lower:.4g} N m (held in {len(self.held)} stop(s); no stop slipped it, so its "
                    "upper side is not tested)")
        return f"not tested (no stop loaded it beyond its static friction {self.floor:.4g} N m)"


def _static(b: JointBrake) -> float:
    return float(b.breakaway_torque) if b.breakaway_torque is not None else float(b.sliding_torque)


def _with_capacity(brakes: Sequence[JointBrake], joint: str, value: float) -> list[JointBrake]:
    return [dataclasses.replace(b, holding_torque=value) if b.joint == joint else b for b in brakes]


def _demand_levels(prediction, j: int, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """The running maxima of the held joint's demand |lambda_j| above ``floor`` (increasing, at most
    ``MAX_LEVELS``: the first, the last and evenly spaced ones between) and the instants [s] they are reached."""
    held = prediction.locked[:, j]
    demand = np.where(held, np.abs(prediction.tau_brake[:, j]), 0.0)
    running = np.maximum.accumulate(demand)
    levels, first = np.unique(np.where((running > floor) & held, running, -1.0), return_index=True)
    keep = levels > floor
    levels, times = levels[keep], prediction.t[first[keep]]
    if levels.size > MAX_LEVELS:
        pick = np.unique(np.linspace(0, levels.size - 1, MAX_LEVELS).round().astype(int))
        levels, times = levels[pick], times[pick]
    return levels, times


def demand_near(prediction, j: int, instant: float, window: float = DEMAND_WINDOW) -> float:
    """The largest demand |lambda_j| [N m] of the held joint ``j`` within ``window`` [s] of ``instant`` (the level
    an end of an interval was read at, looked up again in a prediction with other parameters: events move a
    little, so a window, not a sample)."""
    sel = prediction.locked[:, j] & (np.abs(prediction.t - instant) <= window)
    return float(np.max(np.abs(prediction.tau_brake[sel, j]))) if sel.any() else math.nan


def capacity_intervals(problem: OutputError, brakes: Sequence[JointBrake], joints: Sequence[str], variance: float,
                       prior: dict[str, float], say: Callable[[str], None] = lambda _t: None
                       ) -> dict[str, CapacityInterval]:
    """The interval of each of ``joints``' holding capacities at the friction and delays of ``brakes`` (module
    docstring). ``variance`` [rad^2] is the residual variance per sample that the comparison of fits is measured
    in; ``prior`` {joint: capacity} gives the nominal value where the stops leave the capacity free above.
    The ends are demands at the given friction and delays; :func:`widened` adds their own uncertainty."""
    robot = problem.robot
    stops = problem.stops
    names = [s.label for s in stops]
    unlimited = [dataclasses.replace(b, holding_torque=math.inf) for b in brakes]
    screen = problem.predictor.predict_many([(BrakeSet.from_brakes(robot, unlimited), s) for s in stops])
    out: dict[str, CapacityInterval] = {}
    current = list(brakes)
    for joint in joints:
        j = robot.joint(joint).idx_v
        b = next(x for x in current if x.joint == joint)
        floor = _static(b)
        candidates = [k for k, p in enumerate(screen)
                      if p is not None and np.any(p.locked[:, j] & (np.abs(p.tau_brake[:, j]) > floor))]
        if not candidates:
            nominal = max(prior.get(joint, floor), floor)
            out[joint] = CapacityInterval(joint, floor, math.inf, floor, nominal, (), ())
            continue
        say(f"identification: {joint}: holding capacity from {len(candidates)} stop(s) that load it beyond "
            f"{floor:.4g} N m")
        held_set = BrakeSet.from_brakes(robot, _with_capacity(current, joint, math.inf))
        held_runs = problem.predictor.predict_many([(held_set, stops[k]) for k in candidates])
        trials: list[tuple[int, float]] = []
        per_stop: dict[int, list[tuple[float, float]]] = {}
        source: dict[float, tuple[int, float]] = {}
        for k, p in zip(candidates, held_runs):
            if p is None:
                continue
            levels, times = _demand_levels(p, j, floor)
            r = stop_residual(robot, p, stops[k])
            top = levels[-1] * (1.0 + LEVEL_MARGIN) if levels.size else floor
            per_stop[k] = [(top, float(r @ r))]
            source.update({float(c) * (1.0 + LEVEL_MARGIN): (k, float(t)) for c, t in zip(levels, times)})
            trials.append((k, floor))
            trials.extend((k, float(c) * (1.0 + LEVEL_MARGIN)) for c in levels[:-1])
        sets = [(BrakeSet.from_brakes(robot, _with_capacity(current, joint, c)), stops[k]) for k, c in trials]
        for (k, c), p in zip(trials, problem.predictor.predict_many(sets)):
            r = stop_residual(robot, p, stops[k])
            per_stop[k].append((c, float(r @ r)))
        for k in per_stop:
            per_stop[k].sort()
        grid = sorted({c for steps in per_stop.values() for c, _ in steps})

        def cost_at(k: int, c: float) -> float:
            steps = per_stop[k]
            value = steps[0][1]
            for level, cost in steps:
                if level <= c:
                    value = cost
            return value

        totals = np.array([sum(cost_at(k, c) for k in per_stop) for c in grid])
        best = float(totals.min())
        allowed = np.flatnonzero(totals <= best + DELTA_CHI2 * variance)
        lo = float(grid[allowed[0]])
        hi = float(grid[allowed[-1] + 1]) if allowed[-1] + 1 < len(grid) else math.inf
        # which stops bound it: those whose own cost rises outside the interval
        held, slipped = [], []
        for k in per_stop:
            own = [cost_at(k, c) for c in grid]
            inside = min(own[i] for i in allowed)
            if any(own[i] > inside + DELTA_CHI2 * variance for i in range(len(grid)) if grid[i] < lo):
                held.append(names[k])
            if any(own[i] > inside + DELTA_CHI2 * variance for i in range(len(grid)) if grid[i] >= hi):
                slipped.append(names[k])
        k_best = int(np.argmin(totals))
        piece_hi = grid[k_best + 1] if k_best + 1 < len(grid) else math.inf
        if math.isfinite(hi):
            nominal = 0.5 * (grid[k_best] + piece_hi) if math.isfinite(piece_hi) else 0.5 * (lo + hi)
        else:
            nominal = max(prior.get(joint, lo), lo)
        nominal = max(nominal, lo)
        lo_source = source.get(lo) if held else None
        hi_source = source.get(hi) if math.isfinite(hi) else None
        lo = max(lo, floor)
        out[joint] = CapacityInterval(joint, lo, hi, floor, max(nominal, lo), tuple(held), tuple(slipped),
                                      lo_source, hi_source)
        current = _with_capacity(current, joint, out[joint].nominal)
    return out


def widened(interval: CapacityInterval, lower_sigma: float, upper_sigma: float, z: float) -> CapacityInterval:
    """``interval`` with its ends moved out by ``z`` times the 1-sigma [N m] of the demands that set them (the
    demands move with the fitted friction and delays of the joints whose reactions load the held one); the lower
    end stays at least the static friction."""
    lo = interval.lower - z * lower_sigma if interval.lower_source is not None and math.isfinite(lower_sigma) \
        else interval.lower
    hi = interval.upper + z * upper_sigma if interval.upper_source is not None and math.isfinite(upper_sigma) \
        else interval.upper
    lo = max(lo, interval.floor)
    return dataclasses.replace(interval, lower=lo, upper=hi, nominal=min(max(interval.nominal, lo), hi))
