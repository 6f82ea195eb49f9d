"""The output-error problem of the brake identification: predicted minus recorded joint angles of every recorded
stop for a vector of brake parameters, its finite-difference Jacobian, and the bounded least-squares fit from
several starts.

For brake parameters x (numeric :class:`~.brakes.JointBrake` fields of chosen joints, :class:`FitParameter`),
every stop is predicted from its recorded trigger state by the engine of this package
(:func:`~.prediction.predict_stop`, Müller 2026, eq. (3) with the stick/slip events located) and compared with
the recording at the recorded sample times:

    r(x) = [ q_pred(t_k; x) - q_rec(t_k) ]  over all stops, samples k and joints       [rad]

x minimises |r|^2 (``scipy.optimize.least_squares``, trust-region reflective). Parameters are scaled by their
starting values; the search stays within [lower, ``MAX_FACTOR`` x scale]. The problem is not convex (a brake
engaging earlier or later changes the order of the stick/slip events), so :func:`fit_from_starts` runs it from
several starts and counts how many reach the best optimum.

Every prediction the fit makes goes through :class:`StopPredictor` (``predict_many`` is the one call site, so a
batch engine can replace the loop). Units: s, rad, rad/s, N m, N m s/rad.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from vtm_dynamics.core.estop.brakes import BrakeSet, JointBrake
from vtm_dynamics.core.estop.inputs import StopSettings
from vtm_dynamics.core.estop.prediction import predict_stop
from vtm_dynamics.core.estop.recorded import RecordedStop
from vtm_dynamics.core.estop.results import StopPrediction
from vtm_dynamics.core.estop.series import configuration_of
from vtm_dynamics.core.robot.model import RobotModel

MAX_FACTOR = 10.0  # the search stays below this multiple of each parameter's scale
PENALTY = 1.0  # [rad] residual of every sample of a stop the engine cannot predict with trial parameters
RECORD_MARGIN = 0.02  # [s] predictions for residuals run this far past the last recorded sample
LOWER = {"stribeck_velocity": 0.005}  # [rad/s]
# where the prior leaves a Stribeck term off (None), the fit starts from a breakaway 20 % above the sliding torque
START_BREAKAWAY_FACTOR = 1.2
START_STRIBECK_VELOCITY = 0.05  # [rad/s]
# the typical size of each kind of field, used to scale a parameter whose start value is zero
TYPICAL = {"engage_delay": 0.01, "sliding_torque": 10.0, "holding_torque": 10.0, "viscous": 1.0,
           "breakaway_torque": 10.0, "stribeck_velocity": 0.05, "rise_time": 0.01, "armature": 0.1}


@dataclass(frozen=True)
class FitParameter:
    """One parameter: the ``field`` of :class:`~.brakes.JointBrake` of ``joint``."""

    joint: str
    field: str

    @property
    def name(self) -> str:
        return f"{self.joint}.{self.field}"


def interp_hermite(t: np.ndarray, q: np.ndarray, v: np.ndarray, tq: np.ndarray) -> np.ndarray:
    """Cubic Hermite interpolation of a prediction's (t, q, v) samples at times ``tq`` (constant past the end).
    Events appear twice in the samples (same t): the interval after them is used."""
    out = np.empty((tq.size, q.shape[1]))
    idx = np.clip(np.searchsorted(t, tq, side="right") - 1, 0, len(t) - 1)
    last = idx >= len(t) - 1
    out[last] = q[-1]
    k = idx[~last]
    h = t[k + 1] - t[k]
    s = np.where(h > 0, (tq[~last] - t[k]) / np.where(h > 0, h, 1.0), 1.0)[:, None]
    hh = h[:, None]
    h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
    out[~last] = h00 * q[k] + h10 * hh * v[k] + h01 * q[k + 1] + h11 * hh * v[k + 1]
    return out


def start_value(brake: JointBrake, field: str) -> float:
    """A field's starting value: the brake's, or for a Stribeck term it leaves off (None)
    ``START_BREAKAWAY_FACTOR`` x sliding torque and ``START_STRIBECK_VELOCITY``."""
    value = getattr(brake, field)
    if value is None and field == "breakaway_torque":
        return START_BREAKAWAY_FACTOR * brake.sliding_torque
    if value is None and field == "stribeck_velocity":
        return START_STRIBECK_VELOCITY
    return float(value) if value is not None else 0.0


def consistent_brake(b: JointBrake) -> JointBrake:
    """``b`` with its torques put in the order holding >= breakaway >= sliding (:func:`~.brakes.
    friction_order_problem`): a breakaway below the sliding torque is raised to it, a capacity below the friction
    at rest too. Every candidate of the fit and every file it writes passes through here."""
    if b.breakaway_torque is not None and b.breakaway_torque < b.sliding_torque:
        b = dataclasses.replace(b, breakaway_torque=b.sliding_torque)
    static = b.breakaway_torque if b.breakaway_torque is not None else b.sliding_torque
    if b.holding_torque < static:
        b = dataclasses.replace(b, holding_torque=static)
    return b


def brakes_with(base: Sequence[JointBrake], params: Sequence[FitParameter], values: np.ndarray) -> list[JointBrake]:
    """``base`` with each parameter set to its value, every brake made consistent (:func:`consistent_brake`)."""
    changes: dict[str, dict[str, float]] = {}
    for p, x in zip(params, values):
        changes.setdefault(p.joint, {})[p.field] = float(x)
    return [consistent_brake(dataclasses.replace(b, **changes.get(b.joint, {}))) for b in base]


class StopPredictor:
    """The fit's one door to the engine: predictions of recorded stops from their trigger states, counted.

    ``predict_many`` takes (brakes, stop) pairs and returns the predictions (None where the engine cannot
    simulate the trial brakes: an inconsistent stick/slip split or a refused input); the loop over the pairs is
    the place to call a batch engine instead."""

    def __init__(self, robot: RobotModel, settings: StopSettings) -> None:
        self.robot, self.settings = robot, settings
        self.count = 0

    def _settings(self, stop: RecordedStop, step: float | None, to_rest: bool) -> StopSettings:
        last = float(stop.t[-1]) if stop.t.size else 0.0
        # the residuals need the prediction up to the last recorded sample only: a trial brake that lets a joint
        # creep would otherwise be integrated for a second (a perturbed start's predictions took 80 ms each)
        horizon = max(last * 2.0 + 0.5, 1.0) if to_rest else last + RECORD_MARGIN
        settings = dataclasses.replace(self.settings, t_max=min(horizon, self.settings.t_max))
        return settings if step is None else dataclasses.replace(settings, step=step)

    def predict_many(self, pairs: Sequence[tuple[BrakeSet, RecordedStop]], tcp_frame: str | None = None,
                     step: float | None = None, to_rest: bool = False,
                     failures: list[str] | None = None) -> list[StopPrediction | None]:
        """Predictions of (brakes, stop) pairs up to the stop's last recorded sample (``to_rest``: until the arm
        is at rest, for stop times and distances); ``step`` [s]: a finer maximum step than the settings', where
        the caller reads a time series between events, not only the recorded samples. A pair the engine cannot
        predict gives None; ``failures``, if given, receives one entry per pair: the engine's reason, or ""."""
        out: list[StopPrediction | None] = []
        for brakes, stop in pairs:
            self.count += 1
            try:
                out.append(predict_stop(self.robot, brakes, configuration_of(self.robot, stop.q0), stop.v0,
                                        tcp_frame=tcp_frame,
                                        settings=self._settings(stop, step, to_rest)))
                reason = ""
            except (ValueError, RuntimeError) as err:
                out.append(None)
                reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            if failures is not None:
                failures.append(reason)
        return out

    def predict(self, brakes: BrakeSet, stop: RecordedStop, tcp_frame: str | None = None,
                to_rest: bool = False) -> StopPrediction | None:
        return self.predict_many([(brakes, stop)], tcp_frame, to_rest=to_rest)[0]


def stop_residual(robot: RobotModel, prediction: StopPrediction | None, stop: RecordedStop) -> np.ndarray:
    """Predicted minus recorded angles at the recorded samples (``PENALTY`` everywhere without a prediction)."""
    if prediction is None:
        return np.full(stop.q.size, PENALTY)
    return (interp_hermite(prediction.t, prediction.q, prediction.v, stop.t) - stop.q).ravel()


class OutputError:
    """Residuals of all stops for scaled parameter vectors: value_i = x_i scale_i (a breakaway fitted with its
    joint's sliding torque is its excess over it, see :meth:`values`); ``base`` holds every other field."""

    def __init__(self, robot: RobotModel, base: Sequence[JointBrake], params: Sequence[FitParameter],
                 stops: Sequence[RecordedStop], scale: np.ndarray, predictor: StopPredictor) -> None:
        self.robot, self.base, self.params, self.stops = robot, list(base), list(params), list(stops)
        self.scale = np.asarray(scale, float)
        self.predictor = predictor
        sliding = {p.joint: k for k, p in enumerate(self.params) if p.field == "sliding_torque"}
        self.excess = {i: sliding[p.joint] for i, p in enumerate(self.params)
                       if p.field == "breakaway_torque" and p.joint in sliding}
        self.sizes = [s.q.size for s in self.stops]

    def with_base(self, base: Sequence[JointBrake]) -> "OutputError":
        return OutputError(self.robot, base, self.params, self.stops, self.scale, self.predictor)

    def values(self, x: np.ndarray) -> np.ndarray:
        """Physical values of scaled ``x``. A breakaway fitted together with its joint's sliding torque is its
        excess over it (>= 0): as a torque of its own, a step that raised the sliding torque past it switched the
        Stribeck term off and left a zero Jacobian column."""
        out = np.asarray(x, float) * self.scale
        for i, k in self.excess.items():
            out[i] = out[i] + out[k]
        return out

    def brakes(self, x: np.ndarray) -> list[JointBrake]:
        return brakes_with(self.base, self.params, self.values(x))

    def brake_set(self, x: np.ndarray) -> BrakeSet:
        return BrakeSet.from_brakes(self.robot, self.brakes(x))

    def predictions(self, x: np.ndarray, only: Sequence[int] | None = None, tcp_frame: str | None = None):
        brakes = self.brake_set(x)
        idx = range(len(self.stops)) if only is None else only
        return self.predictor.predict_many([(brakes, self.stops[k]) for k in idx], tcp_frame)

    def residuals(self, x: np.ndarray) -> np.ndarray:
        return np.concatenate([stop_residual(self.robot, p, s) for p, s in zip(self.predictions(x), self.stops)])

    def residuals_of(self, brakes: BrakeSet, only: Sequence[int] | None = None) -> list[np.ndarray]:
        """Per stop (``only``, default all), the residuals of a given brake set."""
        idx = list(range(len(self.stops))) if only is None else list(only)
        preds = self.predictor.predict_many([(brakes, self.stops[k]) for k in idx])
        return [stop_residual(self.robot, p, self.stops[k]) for p, k in zip(preds, idx)]

    def jacobian(self, x: np.ndarray, r0: np.ndarray, step: float, columns: Sequence[int]) -> np.ndarray:
        """Forward-difference Jacobian dr/dx of the given columns with step ``step`` on scaled x: one prediction
        per column and stop, all through one ``predict_many`` call."""
        cols = list(columns)
        pairs = []
        for j in cols:
            xp = np.array(x, float)
            xp[j] += step
            brakes = self.brake_set(xp)
            pairs.extend((brakes, s) for s in self.stops)
        preds = self.predictor.predict_many(pairs)
        J = np.empty((r0.size, len(cols)))
        n = len(self.stops)
        for k in range(len(cols)):
            r = np.concatenate([stop_residual(self.robot, p, s) for p, s in zip(preds[k * n:(k + 1) * n], self.stops)])
            J[:, k] = (r - r0) / step
        return J


@dataclass(frozen=True)
class StartResult:
    """One start of the fit: its ``label``, start and end (scaled, fitted columns), the cost 0.5 |r|^2 [rad^2],
    the solver's message and whether it reached the best optimum (``agrees``)."""

    label: str
    x0: np.ndarray
    x: np.ndarray
    cost: float
    message: str
    agrees: bool = False


@dataclass(frozen=True)
class MultiStartFit:
    """The best optimum (``x``: full scaled vector, ``r`` residuals, ``J`` Jacobian of the fitted columns
    ``active``, ``at_bound`` per active column) and every start (``starts``); ``agreeing`` counts those that
    reached the best optimum."""

    x: np.ndarray
    r: np.ndarray
    J: np.ndarray
    active: list[int]
    at_bound: np.ndarray
    starts: tuple[StartResult, ...]

    @property
    def agreeing(self) -> int:
        return sum(s.agrees for s in self.starts)


def search_box(problem: OutputError, active: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of the fitted (scaled) columns: [LOWER / scale, MAX_FACTOR] (scale is the start value)."""
    lower = np.array([LOWER.get(problem.params[i].field, 0.0) / problem.scale[i] for i in active])
    upper = np.maximum(np.full(len(active), MAX_FACTOR), lower + MAX_FACTOR)
    return lower, upper


@dataclass(frozen=True)
class Descent:
    """The end of one damped Gauss-Newton run: full scaled ``x``, residuals ``r`` there, Jacobian ``J`` of the
    fitted columns (at the last point where one was computed: at most one negligible step before ``x``), cost
    0.5 |r|^2, which fitted columns ended on a bound (``at_bound``), the number of Jacobians and a message."""

    x: np.ndarray
    r: np.ndarray
    J: np.ndarray
    cost: float
    at_bound: np.ndarray
    jacobians: int
    message: str


STOP_CHI2 = 0.01  # a run ends when the next Gauss-Newton step would change chi^2 by less than this
REFRESH = 4  # accepted steps on a Broyden-updated Jacobian before it is computed afresh


def damped_gauss_newton(problem: OutputError, x_full: np.ndarray, active: Sequence[int], fd_step: float,
                        max_iterations: int, say: Callable[[str], None], label: str,
                        jac0: np.ndarray | None = None, r0: np.ndarray | None = None,
                        target: tuple[np.ndarray, np.ndarray, float] | None = None) -> Descent:
    """Levenberg-Marquardt over the ``active`` columns from ``x_full``, within the search box (a column on a
    bound whose gradient points out of the box is held there for the step).

    The Jacobian (one prediction per column and stop) is the cost of an iteration, so after an accepted step it
    is updated by Broyden's rank-one formula from the change of the residuals (no new prediction) and computed
    afresh every ``REFRESH`` steps, after a step the updated one failed to predict, and before the run may end.
    It ends when the Gauss-Newton step of a fresh Jacobian would change chi^2 = |r|^2 / s^2 by less than
    ``STOP_CHI2`` (s^2 the residual variance): a tolerance in units of what the data can tell (a relative
    tolerance on the cost made the solver spend five to ten more Jacobians on changes far below one sigma).
    ``jac0``/``r0``: the Jacobian and residuals at the start if already known. ``target`` (full scaled x, its
    scaled 1-sigma (full length), cost) is an optimum already found: the run ends as soon as it has
    reached it (every value within one sigma, the cost within half a residual variance, i.e. chi^2 within 1),
    since a descent that close follows the target's own quadratic model to it."""
    sub = np.asarray(active, int)
    lower, upper = search_box(problem, active)
    x = np.array(x_full, float)
    x[sub] = np.clip(x[sub], lower, upper)
    same = np.array_equal(x[sub], np.asarray(x_full)[sub])
    r = r0 if r0 is not None and same else problem.residuals(x)
    J = jac0 if jac0 is not None and r0 is not None and same else None
    fresh = J is not None
    cost = 0.5 * float(r @ r)
    m, n = r.size, sub.size
    damping = 1e-3
    jacobians = 0
    since_fresh = 0
    message = f"stopped after {max_iterations} steps"

    def fresh_jacobian() -> np.ndarray:
        nonlocal jacobians
        say(f"identification: {label}: Jacobian {jacobians + 1} ({problem.predictor.count} predictions so far)")
        jacobians += 1
        return problem.jacobian(x, r, fd_step, sub)

    steps = 0
    while steps < max_iterations and jacobians <= max_iterations:
        if J is None or (not fresh and since_fresh >= REFRESH):
            J, fresh, since_fresh = fresh_jacobian(), True, 0
        g = J.T @ r
        H = J.T @ J
        variance = 2.0 * cost / max(m - n, 1)
        z = x[sub]
        pinned = ((z <= lower + 1e-12) & (g > 0)) | ((z >= upper - 1e-12) & (g < 0))
        free = np.flatnonzero(~pinned)
        Hf = H[np.ix_(free, free)]
        newton = 0.5 * float(g[free] @ np.linalg.lstsq(Hf, g[free], rcond=None)[0]) if free.size else 0.0
        if not newton > 0.5 * STOP_CHI2 * variance:
            if not fresh:
                J, fresh, since_fresh = fresh_jacobian(), True, 0
                continue
            message = f"converged: the Gauss-Newton step would change chi^2 by less than {STOP_CHI2:g}"
            break
        accepted = False
        for _ in range(12):
            step = np.zeros(n)
            step[free] = np.linalg.solve(Hf + damping * np.diag(np.maximum(np.diag(Hf), 1e-300)), -g[free])
            x_new = x.copy()
            x_new[sub] = np.clip(z + step, lower, upper)
            r_new = problem.residuals(x_new)
            cost_new = 0.5 * float(r_new @ r_new)
            if cost_new < cost:
                accepted = True
                break
            damping *= 4.0
            if not fresh:
                break  # the updated Jacobian mispredicted: compute it afresh before damping further
        if not accepted:
            if not fresh:
                J = None
                continue
            message = "stopped: no step lowers the cost (the residual is not smooth here)"
            break
        steps += 1
        dz = x_new[sub] - z
        J = J + np.outer((r_new - r) - J @ dz, dz) / float(dz @ dz)  # Broyden's update
        fresh = False
        since_fresh += 1
        x, r, cost = x_new, r_new, cost_new
        damping = max(damping / 3.0, 1e-9)
        if target is not None and reached(target, x[sub], cost, variance, sub):
            message = "reached the optimum of an earlier start"
            break
    if not fresh and not message.startswith("reached"):
        J = fresh_jacobian()
    at_bound = (x[sub] <= lower + 1e-12) | (x[sub] >= upper - 1e-12)
    return Descent(x, r, J, cost, at_bound, jacobians, message)


def reached(target: tuple[np.ndarray, np.ndarray, float], z: np.ndarray, cost: float, variance: float,
            sub: np.ndarray) -> bool:
    """Whether active values ``z`` with ``cost`` lie at the ``target`` optimum (see :func:`damped_gauss_newton`)."""
    x_t, sigma, cost_t = target
    sigma = sigma[sub]
    tol = np.where(np.isfinite(sigma) & (sigma > 0), sigma, 1e-3)
    return bool(cost - cost_t <= 0.5 * variance and np.all(np.abs(z - x_t[sub]) <= tol))


def same_optimum(a: StartResult, best: StartResult, sigma_scaled: np.ndarray, variance: float) -> bool:
    """Whether start ``a`` reached the optimum of ``best``: its cost within half a residual variance (chi^2 within
    1: a difference no data could tell) and every fitted value within one 1-sigma (scaled) of the best."""
    close_cost = a.cost - best.cost <= max(0.5 * variance, 1e-9 * best.cost)
    tol = np.where(np.isfinite(sigma_scaled) & (sigma_scaled > 0), sigma_scaled, 1e-3)
    return bool(close_cost and np.all(np.abs(a.x - best.x) <= tol))
