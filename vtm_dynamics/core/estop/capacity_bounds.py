"""Holding capacities bracketed both ways by the stick/slip decisions the recorded stops show.

A holding capacity enters a prediction only through the decision whether a joint at rest stays stuck: it holds
while the torque its brake must supply (the demand lambda_j of Müller 2026, eq. (3) with the joint-lock rows)
stays within the capacity, and slips at the first instant the demand exceeds it. So for one stop, the prediction
as a function of the capacity c is fixed by the demand timeline D(t) of the joint held throughout (the capacity
raised out of the way): for c above the largest demand the joint holds; below, it slips when D first exceeds c.
Each stop's residual is therefore a step function of c with its steps at the running maxima of D (a continuous
function where D rises continuously).

The decision a stop records is read from the recording itself: the stop is predicted with the capacity just above
some of its demand levels (the running maxima of D: ``MAX_LEVELS`` of them first, then, wherever two neighbouring
ones fit the stop differently, the level between them, bisecting down to adjacent levels) and at the static friction
(the lowest capacity the friction-order rule allows), and the sum over the stops of the residuals' squares is
compared between capacities, each stop's with the change of its trigger state that fits it best taken out (within
that estimate's own uncertainty, :class:`StateFreedom`): the trigger state's error shifts every sample of a stop
alike, and without this a hold that the recording shows was read as a slip that merely absorbed that shift (a
validation set's elbow came out "between 67.6 and 68.1 N m" for a capacity of 74.4). A joint that slipped in a stop
makes every capacity above the demand at which it slipped fit that stop worse (an upper bound); one that held makes
every capacity below the largest demand it held fit worse (a lower bound). The reported interval is the set of
capacities whose total squared residual lies within ``DELTA_CHI2`` residual variances of the best (a profile at the
fitted friction and delays: 95 % for one parameter; each end a stop sets is then checked with the other values
fitted again, :mod:`.capacity_profile`), widened by the uncertainty of the demands that set its ends
(which move with the fitted friction and delays, :func:`widened`) and by ``MODEL_MARGIN`` (a decision at a demand
that close to the capacity is beyond what the model can tell): both ends where some stop slipped and some held, "at
least" where none slipped (the upper side not tested), "not tested" where no stop loaded the joint beyond its static
friction. A capacity is never a single value raised out of the way. The nominal file carries the smallest capacity
every stop accepts, whether the stops bound it both ways or from below only (a larger one would hold where a stop
that was not recorded slips: a held-out stop of a validation set was predicted 7 % short with the middle of an
interval, and another 7 % short in angle with the prior's capacity for a wrist the stops bounded at "at least 28
N m", truth 29.9): a capacity no recorded stop slipped is carried at the least value the stops accept (its static
friction where no stop loaded it), never raised to the prior's, which enters nothing here.

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

MAX_LEVELS = 12  # demand levels tried first per stop and joint
REFINEMENTS = 10  # rounds of trying a level between two that fit a stop differently (bisection over the levels)
DELTA_CHI2 = 3.84  # chi^2 quantile of one parameter at 95 %
LEVEL_MARGIN = 1e-6  # a capacity this much (relative) above a demand level holds it
DEMAND_WINDOW = 2e-3  # [s] around the instant of an end's demand level, when it is looked up again
STATE_STEPS = (1e-5, 1e-4)  # [rad], [rad/s] finite-difference steps of the trigger state
DEMAND_STEP = 1e-3  # [s] largest integration step of a prediction whose demand timeline gives the levels
MODEL_MARGIN = 1e-3  # a stick/slip decision at a demand this close (relative) to the capacity decides nothing
SWEEPS = 3  # passes over the joints, each reading one joint's capacity with the others' from the pass before
SHIFT = 0.2  # a capacity's value moved if its new one lies outside the old interval or this share of it away


@dataclass(frozen=True)
class CapacityInterval:
    """What the stops say about one joint's holding capacity [N m]: every value in [``lower``, ``upper``] fits
    them (``upper`` inf: no stop slipped the joint, so the stops bound it from below only); ``floor`` the static
    friction at the nominal values (breakaway, else sliding torque); ``nominal`` the value the fitted brake file
    carries (the least value the stops accept, also where they bound it from below only: never the prior's),
    ``conservative`` the one of the conservative file (the least the stops show: a weaker brake slips sooner).
    ``held`` and ``slipped`` name the stops that bound it from below and from above, ``undecided`` those that set
    an end which the other values, fitted again, did not confirm (:mod:`.capacity_profile`); ``steps`` are the
    capacities tried (the edges of the steps of the comparison's cost)."""

    joint: str
    lower: float
    upper: float
    floor: float
    nominal: float
    held: tuple[str, ...]
    slipped: tuple[str, ...]
    lower_source: tuple[int, float] | None = None  # (stop index, time [s]) of the demand level at the lower end
    upper_source: tuple[int, float] | None = None
    central: float = math.nan  # the value the fit runs with, in the best-fitting accepted range (inf: holding)
    undecided: tuple[str, ...] = ()  # stops that set an end the other values, fitted again, did not confirm
    steps: tuple[float, ...] = dataclasses.field(default=(), repr=False)  # the capacities tried, increasing

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
        """The least value the stops themselves show [N m]: ``lower`` where some stop loaded the joint beyond its
        static friction (a demand it held), else 0, which the conservative file raises to its own static friction
        (the nominal ``floor`` is the static friction at the nominal values, above the conservative one)."""
        return self.lower if self.lower > self.floor * (1.0 + 1e-9) else 0.0

    def describe(self) -> str:
        also = (f"; {', '.join(self.undecided)} undecided: with the other values fitted again a slip fits as well "
                "as a hold") if self.undecided else ""
        if self.tested:
            return (f"between {self.lower:.4g} and {self.upper:.4g} N m (held in {len(self.held)} stop(s), slipped "
                    f"in {len(self.slipped)}{also})")
        if self.loaded:
            return (f"at least {self.lower:.4g} N m (held in {len(self.held)} stop(s); no stop slipped it, so its "
                    f"upper side is not tested{also})")
        if self.undecided:
            return (f"not bounded (loaded beyond its static friction {self.floor:.4g} N m in "
                    f"{', '.join(self.undecided)}, but with the other values fitted again a slip fits those stops as "
                    "well as a hold)")
        return f"not tested (no stop loaded it beyond its static friction {self.floor:.4g} N m)"


def _static(b: JointBrake) -> float:
    return float(b.breakaway_torque) if b.breakaway_torque is not None else float(b.sliding_torque)


def _with_capacity(brakes: Sequence[JointBrake], joint: str, value: float) -> list[JointBrake]:
    return [dataclasses.replace(b, holding_torque=value) if b.joint == joint else b for b in brakes]


def _demand_levels(prediction, j: int, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """The running maxima of the held joint's demand |lambda_j| above ``floor`` (increasing) and the instants [s]
    they are reached."""
    held = prediction.locked[:, j]
    demand = np.where(held, np.abs(prediction.tau_brake[:, j]), 0.0)
    running = np.maximum.accumulate(demand)
    levels, first = np.unique(np.where((running > floor) & held, running, -1.0), return_index=True)
    keep = levels > floor
    return levels[keep], prediction.t[first[keep]]


def demand_near(prediction, j: int, instant: float, window: float = DEMAND_WINDOW) -> float:
    """The largest demand |lambda_j| [N m] of the held joint ``j`` within ``window`` [s] of ``instant`` (the level
    an end of an interval was read at, looked up again in a prediction with other parameters: events move a
    little, so a window, not a sample)."""
    sel = prediction.locked[:, j] & (np.abs(prediction.t - instant) <= window)
    return float(np.max(np.abs(prediction.tau_brake[sel, j]))) if sel.any() else math.nan


class StateFreedom:
    """What a stop's trigger-state estimate leaves free: the residual's directions for changes of (q0, v0)
    (finite differences of the prediction, ``STATE_STEPS``) and their prior weight (the inverse of the estimate's
    covariance, :meth:`~.recorded.RecordedStop.state_covariance`). :meth:`cost` [rad^2] is the squared residual
    with the best such change d taken out, min over d of |r + A d|^2 + s^2 d^T P^-1 d (a least-squares profile
    with that prior, s^2 the residual ``variance`` per sample): a slip that only mimics a trigger state off by
    its own uncertainty decides nothing. Also the adequacy test of a fit to recordings without velocities
    (:func:`~.brake_estimates.state_free_residual_rms`)."""

    def __init__(self, problem: OutputError, brakes: BrakeSet, stop, base: np.ndarray, variance: float) -> None:
        from dataclasses import replace

        nv = stop.v0.size
        trials = []
        for i in range(2 * nv):
            q0, v0 = stop.q0.copy(), stop.v0.copy()
            if i < nv:
                q0[i] += STATE_STEPS[0]
            else:
                v0[i - nv] += STATE_STEPS[1]
            trials.append((brakes, replace(stop, q0=q0, v0=v0)))
        steps = [STATE_STEPS[0]] * nv + [STATE_STEPS[1]] * nv
        preds = problem.predictor.predict_many(trials)
        self.A = np.column_stack([(stop_residual(problem.robot, p, stop) - base) / h for p, h in zip(preds, steps)])
        P = stop.state_covariance()
        if P is None:
            P = np.diag(np.array([1e-4] * nv + [1e-3] * nv) ** 2)  # [rad], [rad/s]: the size of a driver's estimate
        # minimise |r + A d|^2 / s^2 + d^T P^-1 d over the state change d (s^2 the residual variance per sample)
        self.P = P
        sigma = np.maximum(np.sqrt(np.diag(P)), 1e-12)
        self.H = self.A.T @ self.A + variance * np.linalg.pinv(P / np.outer(sigma, sigma)) / np.outer(sigma, sigma)

    def cost(self, r: np.ndarray) -> float:
        g = self.A.T @ r
        return float(r @ r - g @ np.linalg.solve(self.H, g))

    def whitener(self, variance: float) -> Callable[[np.ndarray], np.ndarray]:
        """A linear map W of the stop's residual with |W r|^2 = :meth:`cost` (r), = r^T (I + A P A^T / s^2)^-1 r:
        what a least-squares fit can minimise when the trigger state is free (the directions A held fixed)."""
        p, V = np.linalg.eigh(self.P)
        U, s, _ = np.linalg.svd(self.A @ (V * np.sqrt(np.maximum(p, 0.0))), full_matrices=False)  # A P A^T = U s^2 U^T
        shrink = 1.0 - 1.0 / np.sqrt(1.0 + s**2 / variance)
        return lambda r: r - U @ (shrink * (U.T @ r))


def capacity_intervals(problem: OutputError, brakes: Sequence[JointBrake], joints: Sequence[str], variance: float,
                       say: Callable[[str], None] = lambda _t: None) -> dict[str, CapacityInterval]:
    """The interval of each of ``joints``' holding capacities at the friction and delays of ``brakes`` (module
    docstring). ``variance`` [rad^2] is the residual variance per sample that the comparison of fits is measured
    in. No prior value enters (module docstring). The ends are demands at the given friction and delays;
    :func:`widened` adds their own uncertainty.

    The capacities interact (a joint that slips changes the demand on the others), so the joints are read one at a
    time with the others at their latest nominal values (those the file carries: so that the file's capacities fit
    the stops together, not each with the others held), in up to ``SWEEPS`` passes until none moves: read once, in
    joint order, the shoulder's capacity came out bounded above (it "slipped" to stand in for a wrist the model
    still held with the prior's capacity) although the shoulder never slipped."""
    out: dict[str, CapacityInterval] = {}
    current = list(brakes)
    for _ in range(SWEEPS):
        changed = False
        for joint in joints:
            interval = _one_capacity(problem, current, joint, variance, say)
            changed |= joint not in out or moved(out[joint], interval) \
                or not math.isclose(out[joint].nominal, interval.nominal, rel_tol=MODEL_MARGIN)
            out[joint] = interval
            current = _with_capacity(current, joint, interval.nominal)
        if not changed:
            break
    return out


def moved(old: CapacityInterval, new: CapacityInterval) -> bool:
    """Whether a capacity's value ``old.central`` is not the one the stops prefer now: outside the new interval,
    or more than ``SHIFT`` of its width from the new central value."""
    if not new.lower <= old.central <= new.upper:
        return True
    width = new.upper - new.lower
    return math.isfinite(width) and abs(new.central - old.central) > SHIFT * width


def _one_capacity(problem: OutputError, current: list[JointBrake], joint: str, variance: float,
                  say: Callable[[str], None]) -> CapacityInterval:
    """One joint's interval with the other joints' capacities at their ``current`` values (see
    :func:`capacity_intervals`)."""
    robot = problem.robot
    stops = problem.stops
    names = [s.label for s in stops]
    j = robot.joint(joint).idx_v
    b = next(x for x in current if x.joint == joint)
    floor = _static(b)
    # the stops that load it beyond its static friction with it held throughout and the others as they are now
    # (not all held: on held_out, a shoulder whose demand exceeded its friction only once the elbow slipped was
    # screened out, left "not tested" at its friction, and slipped in the file where the robot held: 9 x the
    # noise in that stop)
    held_set = BrakeSet.from_brakes(robot, _with_capacity(current, joint, math.inf))
    held_all = problem.predictor.predict_many([(held_set, s) for s in stops], step=DEMAND_STEP)
    candidates = [k for k, p in enumerate(held_all)
                  if p is not None and np.any(p.locked[:, j] & (np.abs(p.tau_brake[:, j]) > floor))]
    untested = CapacityInterval(joint, floor, math.inf, floor, floor, (), (), central=math.inf)
    if not candidates:
        return untested
    say(f"identification: {joint}: holding capacity from {len(candidates)} stop(s) that load it beyond "
        f"{floor:.4g} N m")
    held_runs = [held_all[k] for k in candidates]
    # per stop: the capacities tried (floor, each demand level, holding throughout) and the residual's squares
    per_stop: dict[int, dict[float, float]] = {}
    levels_of: dict[int, np.ndarray] = {}
    freedom: dict[int, StateFreedom] = {}
    source: dict[float, tuple[int, float]] = {}
    todo: list[tuple[int, float]] = []
    for k, p in zip(candidates, held_runs):
        if p is None:
            continue
        levels, times = _demand_levels(p, j, floor)
        if not levels.size:
            continue
        caps = levels * (1.0 + LEVEL_MARGIN)
        levels_of[k] = caps
        source.update({float(c): (k, float(t)) for c, t in zip(caps, times)})
        r = stop_residual(robot, p, stops[k])
        freedom[k] = StateFreedom(problem, held_set, stops[k], r, variance)
        per_stop[k] = {float(caps[-1]): freedom[k].cost(r)}  # above its largest demand it holds throughout
        first = np.unique(np.linspace(0, caps.size - 2, min(MAX_LEVELS, caps.size - 1)).round().astype(int)) \
            if caps.size > 1 else np.zeros(0, int)
        todo += [(k, floor)] + [(k, float(caps[i])) for i in first]
    threshold = DELTA_CHI2 * variance
    for _ in range(REFINEMENTS + 1):
        if not todo:
            break
        sets = [(BrakeSet.from_brakes(robot, _with_capacity(current, joint, c)), stops[k]) for k, c in todo]
        for (k, c), p in zip(todo, problem.predictor.predict_many(sets)):
            per_stop[k][c] = freedom[k].cost(stop_residual(robot, p, stops[k]))
        # where two neighbouring tried capacities of a stop fit it differently, try a demand level between them
        todo = []
        for k, tried in per_stop.items():
            caps = levels_of[k]
            points = sorted(tried)
            for a, b in zip(points[:-1], points[1:]):
                if abs(tried[a] - tried[b]) > threshold:
                    between = caps[(caps > a) & (caps < b)]
                    if between.size:
                        todo.append((k, float(between[between.size // 2])))
    if not per_stop:  # no stop loads it beyond its static friction once held throughout
        return untested
    return _interval(joint, {k: sorted(v.items()) for k, v in per_stop.items()}, names, source, variance, floor)


def _interval(joint: str, per_stop: dict[int, list[tuple[float, float]]], names: list[str],
              source: dict[float, tuple[int, float]], variance: float, floor: float) -> CapacityInterval:
    """The interval of ``joint``'s capacity from each stop's cost at the capacities tried (``per_stop``: stop
    index -> sorted (capacity, cost) steps, the cost holding from one tried capacity to the next): the capacities
    whose total cost is within ``DELTA_CHI2 * variance`` of the best, widened by ``MODEL_MARGIN``; the stops that
    bound it from below (held) and above (slipped), with the demands ``source`` that set the ends."""
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
    accepted = float(grid[allowed[0]])
    # the boundary lies between the last refused and the first accepted capacity tried (the levels are the
    # demand every DEMAND_STEP at most; where no stop has a level between them, at the accepted one), and a
    # decision at a demand within MODEL_MARGIN of the capacity is beyond what the model can tell: the
    # reference plant held the elbow at an arrival demand the engine puts 0.02 % above its true capacity
    refused = float(grid[allowed[0] - 1]) if allowed[0] > 0 else -math.inf
    lo = max(refused, accepted * (1.0 - MODEL_MARGIN))
    hi = float(grid[allowed[-1] + 1]) * (1.0 + MODEL_MARGIN) if allowed[-1] + 1 < len(grid) else math.inf
    # which stops bound it: those whose own cost rises outside the interval
    held, slipped = [], []
    for k in per_stop:
        own = [cost_at(k, c) for c in grid]
        inside = min(own[i] for i in allowed)
        if any(own[i] > inside + DELTA_CHI2 * variance for i in range(len(grid)) if grid[i] < accepted):
            held.append(names[k])
        if any(own[i] > inside + DELTA_CHI2 * variance for i in range(len(grid)) if grid[i] >= hi):
            slipped.append(names[k])
    # the nominal capacity: near the smallest one every stop accepts, whether or not some stop slipped the joint
    # (a larger one would hold where a stop that was not recorded slips), MODEL_MARGIN inside (at most halfway to
    # the next level tried), so that no stop's decision sits on its knife edge: there the finite-difference
    # Jacobian of the friction flipped the decision and its 1-sigma came out five times too small
    step_in = min(MODEL_MARGIN * accepted, 0.5 * (float(grid[allowed[0] + 1]) - accepted)
                  if allowed[0] + 1 < len(grid) else math.inf)
    nominal = accepted + step_in
    lo_source = source.get(accepted) if held else None
    hi_source = source.get(float(grid[allowed[-1] + 1])) if math.isfinite(hi) else None
    k_best = int(np.argmin(totals))
    run_start, run_end = k_best, k_best
    while run_start - 1 in allowed:
        run_start -= 1
    while run_end + 1 in allowed:
        run_end += 1
    if run_end + 1 < len(grid):
        # the widest gap between neighbouring levels tried in that range: the farthest from every stop's
        # decision (the stops' decisions may still change inside the range, by less than the threshold)
        edges = np.asarray(grid[run_start:run_end + 2], float)
        widest = int(np.argmax(np.diff(edges)))
        central = 0.5 * (edges[widest] + edges[widest + 1])
    else:
        # no stop slipped it (or the best range runs above every level): the fit holds it throughout, as far from
        # every stop's decision as the range allows; the least value stays the nominal one. Run at the least
        # value, a fit on tuning_b ended with its starts in two optima ("no step lowers the cost": the residual
        # not smooth where a stop's decision sits 1 % from the capacity)
        central = math.inf
    lo = max(lo, floor)
    return CapacityInterval(joint, lo, hi, floor, max(nominal, lo), tuple(held), tuple(slipped), lo_source,
                            hi_source, max(central, lo), steps=tuple(grid))


def widened(interval: CapacityInterval, lower_sigma: float, upper_sigma: float, z: float) -> CapacityInterval:
    """``interval`` with its ends moved out by ``z`` times the 1-sigma [N m] of the demands that set them (the
    demands move with the fitted friction and delays of the joints whose reactions load the held one); the lower
    end stays at least the static friction."""
    lo = interval.lower - z * lower_sigma if interval.lower_source is not None and math.isfinite(lower_sigma) \
        else interval.lower
    hi = interval.upper + z * upper_sigma if interval.upper_source is not None and math.isfinite(upper_sigma) \
        else interval.upper
    lo = max(lo, interval.floor)
    return dataclasses.replace(interval, lower=lo, upper=hi, nominal=min(max(interval.nominal, lo), hi),
                               central=min(max(interval.central, lo), hi))
