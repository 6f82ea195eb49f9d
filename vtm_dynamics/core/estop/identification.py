"""Brake identification from recorded stops: nonlinear least squares over every stop, with uncertainty and
identifiability.

A recorded category-0 stop (:class:`RecordedStop`) is the joint angles sampled after a trigger, together with the
state at the trigger instant. For brake parameters x (any numeric :class:`~.brakes.JointBrake` fields of chosen
joints, see :class:`FitParameter`) the stop is predicted from that state by the engine of this package
(:func:`~.prediction.predict_stop`, Müller 2026, eq. (3) with the stick/slip events located) and compared with the
recording at the recorded sample times (output error):

    r(x) = [ q_pred(t_k; x) - q_rec(t_k) ]  over all stops, samples k and joints       [rad]

x minimises |r|^2 (``scipy.optimize.least_squares``, trust-region reflective, bounds 0 <= x <= 10 x the starting
value (Stribeck speeds at least 0.005 rad/s, ``LOWER``), finite-difference Jacobian J = dr/dx). Parameters are scaled by their prior values so the problem is well conditioned.

Start: closed-form sliding and viscous estimates from the inverse dynamics of the smoothed recordings
(:func:`regression_start`), not the prior, so that a wrong prior does not lead the fit into a wrong minimum.

Thresholds: a holding capacity acts only through a stick/slip decision, so its finite-difference derivative is
zero even where the stops contradict it; it is probed by a finite change instead (:func:`_probe_thresholds`) and
reported as a lower bound, never as a value.

Uncertainty: each parameter's 1-sigma is the larger of the Gauss-Newton estimate s^2 (J^T J)^-1 at the optimum
(s^2 = |r|^2 / (m - n), m residuals, n parameters) and the sandwich estimate that takes the residuals of one stop
as one correlated cluster (:func:`_covariance`: each stop's start-state estimate shifts all its samples alike), plus
the effect of friction terms left at their start value because no sample shows them (:func:`_considered`).

Identifiability: a joint's friction terms are not fitted when the joint slides for less than two sample periods
after its brake engages in every stop (at the start and again at the fitted values, :func:`_unobservable_friction`):
no sample shows the brake acting on it. Then the Jacobian at the start is examined. A parameter whose column is zero (no
recorded stop is sensitive to it, e.g. a holding capacity that no stop ever loaded, or a joint that never moved)
is not identifiable; among the others the numerical rank of the scaled Jacobian
(:func:`~vtm_dynamics.core.numerics.numerical_rank`) finds combinations the data cannot separate; after the fit a
relative 1-sigma above ``max_relative_sigma``, or an optimum on the edge of the search range (where the
covariance of an interior optimum means nothing), also marks a parameter as not identifiable. Such a parameter keeps
its prior value in the brake model but is reported without a value, with the test motion that would identify it.

Size: about 810 lines: one module because the residual, the sensitivity screening, the bounded fit, the covariance and the
identifiability verdicts share the same scaled parameter vector and Jacobian; split, each part would re-derive the
scaling and the active set. The closed-form start and the threshold probe feed that same vector and residual
(the probe evaluates the fit's own residual). The comparison of recorded and predicted stops (:func:`compare_stops`) uses the same
prediction and interpolation as the residual, so that fitted and reported numbers cannot disagree.

Units: s, rad, rad/s, N m, N m s/rad.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import scipy.ndimage
import scipy.optimize
import scipy.signal

from vtm_dynamics.core.estop.brakes import BrakeSet, JointBrake
from vtm_dynamics.core.estop.inputs import StopSettings
from vtm_dynamics.core.estop.prediction import predict_stop
from vtm_dynamics.core.estop.recorded import RecordedStop
from vtm_dynamics.core.numerics import numerical_rank
from vtm_dynamics.core.robot.model import RobotModel

DEFAULT_FIELDS = ("engage_delay", "sliding_torque", "viscous", "holding_torque")
STRIBECK_FIELDS = ("breakaway_torque", "stribeck_velocity")  # opt-in: stops must reach low speeds slowly
# the fit stays within [LOWER, MAX_FACTOR x start value]: a trust-region step along a weakly sensitive direction
# must not ask the engine for a brake a hundred times stronger than any start value (a Stribeck breakaway of
# 1e5 N m made a prediction stall), and a Stribeck speed near zero is a discontinuous friction law
MAX_FACTOR = 10.0
PENALTY = 1.0  # [rad] residual of every sample of a stop the engine cannot predict with trial parameters
LOWER = {"stribeck_velocity": 0.005}  # [rad/s]
# where the prior leaves a Stribeck term off (None), the fit starts from a breakaway 20 % above the sliding torque
# and this characteristic speed, so that the data can show whether the term is there
START_BREAKAWAY_FACTOR = 1.2
START_STRIBECK_VELOCITY = 0.05  # [rad/s]
# the typical size of each kind of field, used to scale a parameter whose prior is zero
TYPICAL = {"engage_delay": 0.01, "sliding_torque": 10.0, "holding_torque": 10.0, "viscous": 1.0,
           "breakaway_torque": 10.0, "stribeck_velocity": 0.05, "rise_time": 0.01, "armature": 0.1}
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


# a joint's friction terms show in a recording only while the joint slides with its brake engaged; a joint that
# comes to rest within this many sample periods of its engagement in every stop shows them in no sample
MIN_SLIDE_SAMPLES = 2.0
SLIDE_FIELDS = ("sliding_torque", "viscous", "breakaway_torque", "stribeck_velocity")
SLIDE_MOTION = ("stops in which {j} slides well after its brake engages (several samples): {j} alone at its top "
                "speed, with the rated payload or the arm posed so that more inertia turns with {j}")


class IdentificationError(ValueError):
    """Inputs that cannot be identified from (no stops, wrong sizes, an unknown field); one line naming them."""


@dataclass(frozen=True)
class FitParameter:
    """One parameter: the ``field`` of :class:`~.brakes.JointBrake` of ``joint``."""

    joint: str
    field: str

    @property
    def name(self) -> str:
        return f"{self.joint}.{self.field}"


@dataclass(frozen=True)
class ParameterEstimate:
    """The result for one parameter. ``value``/``sigma`` (1-sigma) are None when not ``identifiable``; ``reason``
    says why and ``test_motion`` what recording would identify it. ``prior`` is the prior's value;
    ``lower_bound`` what the stops show a threshold to be at least (None: nothing shown)."""

    joint: str
    field: str
    value: float | None
    sigma: float | None
    identifiable: bool
    prior: float
    reason: str = ""
    test_motion: str = ""
    lower_bound: float | None = None  # a threshold (holding capacity) the stops show to be at least this


@dataclass(frozen=True)
class StopComparison:
    """Predicted vs recorded for one stop: stopping angles (nv) [rad] (rest minus trigger), stop times [s], TCP
    straight-line distances [m] (nan without a TCP frame) and the RMS angle residual [rad] over the samples."""

    label: str
    recorded_angles: np.ndarray
    predicted_angles: np.ndarray
    recorded_time: float
    predicted_time: float
    recorded_tcp: float
    predicted_tcp: float
    rms_residual: float
    predicted_t: np.ndarray
    predicted_q: np.ndarray


@dataclass(frozen=True)
class Identification:
    """Fitted brakes (:attr:`brakes`, unidentifiable fields at their prior), the per-parameter estimates, the
    residual RMS [rad], the number of predictions run, the wall time [s] and the solver's status message."""

    robot: str
    brakes: tuple[JointBrake, ...]
    estimates: tuple[ParameterEstimate, ...]
    residual_rms: float
    n_residuals: int
    n_predictions: int
    seconds: float
    message: str

    @property
    def not_identifiable(self) -> tuple[ParameterEstimate, ...]:
        return tuple(e for e in self.estimates if not e.identifiable)


def _interp_hermite(t: np.ndarray, q: np.ndarray, v: np.ndarray, tq: np.ndarray) -> np.ndarray:
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


def _brakes_with(prior: Sequence[JointBrake], params: Sequence[FitParameter], values: np.ndarray) -> list[JointBrake]:
    by_joint = {b.joint: b for b in prior}
    changes: dict[str, dict[str, float]] = {}
    for p, x in zip(params, values):
        changes.setdefault(p.joint, {})[p.field] = float(x)
    out = []
    for b in by_joint.values():
        b = dataclasses.replace(b, **changes.get(b.joint, {}))
        if getattr(b, "breakaway_torque", None) is not None and b.breakaway_torque < b.sliding_torque:
            b = dataclasses.replace(b, breakaway_torque=b.sliding_torque)  # static friction >= sliding friction
        static = b.breakaway_torque if getattr(b, "breakaway_torque", None) is not None else b.sliding_torque
        if b.holding_torque < static:  # a brake holds at least the friction it meets when slipping from rest
            b = dataclasses.replace(b, holding_torque=static)
        out.append(b)
    return out


class _Problem:
    """Residuals of all stops for a parameter vector (scaled), counting the predictions."""

    def __init__(self, robot: RobotModel, prior: Sequence[JointBrake], params: Sequence[FitParameter],
                 stops: Sequence[RecordedStop], scale: np.ndarray, settings: StopSettings) -> None:
        self.robot, self.prior, self.params, self.stops, self.scale = robot, list(prior), list(params), stops, scale
        self.settings = settings
        self.n_predictions = 0
        self.excess = _excess_pairs(self.params)

    def values(self, x: np.ndarray) -> np.ndarray:
        """The physical parameter values of scaled coordinates ``x`` (see :func:`_excess_pairs`)."""
        out = x * self.scale
        for i, k in self.excess.items():
            out[i] = out[i] + out[k]
        return out

    def brake_set(self, x: np.ndarray) -> BrakeSet:
        return BrakeSet.from_brakes(self.robot, _brakes_with(self.prior, self.params, self.values(x)))

    def predict(self, brakes: BrakeSet, stop: RecordedStop, tcp_frame: str | None = None):
        horizon = max(float(stop.t[-1]) * 2.0 + 0.5, 1.0)
        settings = dataclasses.replace(self.settings, t_max=min(horizon, self.settings.t_max))
        self.n_predictions += 1
        return predict_stop(self.robot, brakes, stop.q0, stop.v0, tcp_frame=tcp_frame, settings=settings)

    def stop_residual(self, brakes: BrakeSet, stop: RecordedStop) -> np.ndarray:
        try:
            p = self.predict(brakes, stop)
        except (ValueError, RuntimeError):
            # parameters the engine cannot simulate (an inconsistent stick/slip split): a residual far worse than
            # any real fit, so the trust region steps back
            return np.full(stop.q.size, PENALTY)
        qp = _interp_hermite(p.t, _angles(self.robot, p.q), p.v, stop.t)
        return (qp - stop.q).ravel()

    def residuals(self, x: np.ndarray) -> np.ndarray:
        brakes = self.brake_set(x)
        return np.concatenate([self.stop_residual(brakes, s) for s in self.stops])

    def stop_costs(self, x: np.ndarray, only: Sequence[int] | None = None) -> dict[int, float]:
        """{stop index: sum of squared residuals [rad^2]} at ``x`` for the stops ``only`` (default all)."""
        brakes = self.brake_set(x)
        out = {}
        for k in (range(len(self.stops)) if only is None else only):
            r = self.stop_residual(brakes, self.stops[k])
            out[k] = float(r @ r)
        return out

    def longest_slides(self, x: np.ndarray) -> np.ndarray:
        """Per joint (nv), the longest time [s] over the stops that the joint slides after its brake engaged
        (its final rest minus its engage delay; 0 for a joint at rest when the brake engages, inf where a
        prediction fails or does not come to rest: nothing is concluded from it)."""
        brakes = self.brake_set(x)
        delay = np.asarray(brakes.engage_delay, float)
        longest = np.zeros(self.robot.nv)
        for stop in self.stops:
            try:
                p = self.predict(brakes, stop)
            except (ValueError, RuntimeError):
                return np.full(self.robot.nv, np.inf)
            ends = np.where(np.isfinite(p.joint_stop_times), p.joint_stop_times, np.inf)
            longest = np.maximum(longest, ends - delay)
        return np.maximum(longest, 0.0)


def _excess_pairs(params: Sequence[FitParameter]) -> dict[int, int]:
    """{index of a breakaway torque: index of the same joint's sliding torque} for joints with both fitted.

    Such a breakaway is fitted as its excess over the sliding torque (>= 0), not as a torque of its own: the
    brake model takes a breakaway below the sliding torque as no Stribeck rise at all, so with the torque as the
    coordinate, a step that raises the sliding torque past the breakaway switches the term off, its column of
    the Jacobian becomes zero and the fit cannot bring it back. (This removes that trap only: on stops that do
    not cover low speeds the fit of a Stribeck truth can still end in a local minimum, 50 % above the truth's
    residual; docs/calibration.md says which stops identify the breakaway.)"""
    sliding = {p.joint: k for k, p in enumerate(params) if p.field == "sliding_torque"}
    return {i: sliding[p.joint] for i, p in enumerate(params) if p.field == "breakaway_torque" and p.joint in sliding}


def _angles(robot: RobotModel, q: np.ndarray) -> np.ndarray:
    if robot.nq != robot.nv:
        raise IdentificationError("robot: identification supports models with one-DOF joints only")
    return q


def _check(robot: RobotModel, prior: Sequence[JointBrake], stops: Sequence[RecordedStop],
           params: Sequence[FitParameter]) -> None:
    if not stops:
        raise IdentificationError("stops: no recorded stop to identify from")
    if robot.nq != robot.nv:
        raise IdentificationError("robot: identification supports models with one-DOF joints only")
    for s in stops:
        if s.q0.shape != (robot.nq,) or s.v0.shape != (robot.nv,) or s.q.ndim != 2 or s.q.shape[1] != robot.nv \
                or s.q.shape[0] != s.t.size or s.t.size == 0:
            raise IdentificationError(f"stops.{s.label}: sizes do not match the model {robot.name!r}")
        if not (np.all(np.isfinite(s.q)) and np.all(np.isfinite(s.t)) and np.all(np.isfinite(s.q0))
                and np.all(np.isfinite(s.v0))):
            raise IdentificationError(f"stops.{s.label}: not finite")
    names = {b.joint for b in prior}
    fields = {f.name for f in dataclasses.fields(JointBrake)}
    for p in params:
        if p.joint not in names:
            raise IdentificationError(f"parameters: joint {p.joint!r} has no brake in the prior configuration")
        if p.field not in fields or p.field in ("joint", "side", "gear_ratio", "pawl_delay", "pawl_holding_torque"):
            raise IdentificationError(f"parameters: {p.field!r} is not an identifiable brake field")


def default_parameters(prior: Sequence[JointBrake], fields: Sequence[str] = DEFAULT_FIELDS) -> list[FitParameter]:
    """Every listed field (those that :class:`~.brakes.JointBrake` has) of every braked joint."""
    have = {f.name for f in dataclasses.fields(JointBrake)}
    return [FitParameter(b.joint, f) for b in prior for f in fields if f in have]


def start_value(brake: JointBrake, field: str) -> float:
    """The fit's starting value of ``field``: the prior's, or for a Stribeck term the prior leaves off (None)
    ``START_BREAKAWAY_FACTOR`` x sliding torque and ``START_STRIBECK_VELOCITY``."""
    value = getattr(brake, field)
    if value is None and field == "breakaway_torque":
        return START_BREAKAWAY_FACTOR * brake.sliding_torque
    if value is None and field == "stribeck_velocity":
        return START_STRIBECK_VELOCITY
    return float(value) if value is not None else 0.0


REGRESSION_WINDOW = 0.02  # [s] Savitzky-Golay window (cubic) that smooths the recorded angles for q, v, a
REGRESSION_MIN_SPEED = 0.02  # [rad/s] a sample informs a joint's friction only while the joint slides faster
REGRESSION_MIN_ROWS = 5  # samples a joint needs before its closed-form estimate replaces the prior
DELAY_MARGIN = 1.5  # the brake is taken as engaged after this multiple of the prior delay (the prior may be short)


def regression_start(robot: RobotModel, prior: Sequence[JointBrake], stops: Sequence[RecordedStop], *,
                     window: float = REGRESSION_WINDOW, min_speed: float = REGRESSION_MIN_SPEED) -> list[JointBrake]:
    """Closed-form estimates of every joint's sliding torque [N m] and viscous coefficient [N m s/rad] from the
    recorded stops, used as the starting point of the fit (the other fields keep their prior values).

    The recorded angles of each stop are smoothed by a cubic Savitzky-Golay filter over ``window`` [s], which
    also gives v and a; the inverse dynamics of the rigid arm (RNEA, plus the brakes' armatures times a) is the
    torque the brakes applied, tau = M(q) a + h(q, v) + I_a a. While joint j slides (|v_j| above ``min_speed``
    over the whole filter window, from ``DELAY_MARGIN`` x the prior delay plus half a window on, so that the
    brake is engaged and no stick, reversal or engagement falls inside the filter's support) the brake law says
    tau_j = -sign(v_j) sliding_j - viscous_j v_j: one linear least-squares problem with two unknowns per joint
    over all samples of all stops. A joint with fewer than ``REGRESSION_MIN_ROWS`` such samples, or a
    non-physical estimate (negative sliding torque), keeps its prior; a negative viscous coefficient is set to 0.
    The Stribeck rise and the torque rise are ignored here: the fit that follows models them. The slides of a
    UR5 stop last 10-100 ms, so the sliding torques come out within about 10 % and the viscous terms only
    roughly (within about 50 %); that is a start, not a result. A start near the data avoids the local minima
    that the output-error fit can reach from a wrong prior."""
    rows: dict[int, list[np.ndarray]] = {}
    rhs: dict[int, list[float]] = {}
    idx = {name: i for i, name in enumerate(robot.joint_names)}
    armature = np.zeros(robot.nv)
    delay = 0.0
    for b in prior:
        if b.joint in idx:
            armature[idx[b.joint]] = float(getattr(b, "armature", None) or 0.0)
            delay = max(delay, float(b.engage_delay) + float(getattr(b, "rise_time", None) or 0.0))
    for s in stops:
        if s.t.size < 8:
            continue
        dt = float(np.median(np.diff(s.t)))
        if not dt > 0:
            continue
        w = max(5, int(round(window / dt)) | 1)
        if s.t.size < w:
            continue
        q = scipy.signal.savgol_filter(s.q, w, 3, axis=0)
        v = scipy.signal.savgol_filter(s.q, w, 3, deriv=1, delta=dt, axis=0)
        a = scipy.signal.savgol_filter(s.q, w, 3, deriv=2, delta=dt, axis=0)
        late = s.t > DELAY_MARGIN * delay + 0.5 * w * dt
        use = late[:, None] & (scipy.ndimage.minimum_filter1d(np.abs(v), w, axis=0) > min_speed)
        for k in np.flatnonzero(use.any(axis=1)):
            tau = robot.inverse_dynamics(q[k], v[k], a[k]) + armature * a[k]
            for j in np.flatnonzero(use[k]):
                rows.setdefault(int(j), []).append(np.array([-np.sign(v[k, j]), -v[k, j]]))
                rhs.setdefault(int(j), []).append(float(tau[j]))
    out = []
    for b in prior:
        j = idx.get(b.joint)
        if j is None or len(rows.get(j, ())) < REGRESSION_MIN_ROWS:
            out.append(b)
            continue
        (sliding_torque, viscous), *_ = np.linalg.lstsq(np.array(rows[j]), np.array(rhs[j]), rcond=None)
        if not (math.isfinite(sliding_torque) and sliding_torque > 0 and math.isfinite(viscous)):
            out.append(b)
            continue
        out.append(dataclasses.replace(b, sliding_torque=float(sliding_torque), viscous=max(float(viscous), 0.0)))
    return out


def _scale(prior: Sequence[JointBrake], params: Sequence[FitParameter]) -> np.ndarray:
    by_joint = {b.joint: b for b in prior}
    out = []
    for p in params:
        v = abs(start_value(by_joint[p.joint], p.field))
        out.append(v if v > 0 and math.isfinite(v) else TYPICAL.get(p.field, 1.0))
    return np.array(out)


def _jacobian(problem: _Problem, x: np.ndarray, r0: np.ndarray, step: float,
              columns: Sequence[int] | None = None) -> np.ndarray:
    """Forward-difference Jacobian dr/dx of the given columns (default all) with step ``step`` on scaled x."""
    cols = list(range(x.size)) if columns is None else list(columns)
    J = np.empty((r0.size, len(cols)))
    for k, j in enumerate(cols):
        xp = x.copy()
        xp[j] += step
        J[:, k] = (problem.residuals(xp) - r0) / step
    return J


THRESHOLD_FIELDS = ("holding_torque",)  # enter the prediction only through a stick/slip decision
THRESHOLD_GAIN = 1e-3  # the bisection looks for the capacity that gives all but this fraction of the improvement
THRESHOLD_BISECTIONS = 10  # resolution: 9 x start / 2^10, under 1 % of the start


def _probe_thresholds(problem: "_Problem", params: Sequence[FitParameter], x0: np.ndarray, noise: float,
                      say: Callable[[str], None], only: Sequence[int] | None = None,
                      bisect: bool = True) -> dict[int, float]:
    """Lower bounds [N m] of the holding capacities that the stops show to be too low at the start.

    A holding capacity enters a prediction only through the decision whether a joint at rest stays stuck
    (|reaction| <= capacity), so its finite-difference derivative is zero almost everywhere, and a Jacobian
    screening calls it "not sensitive" even when the stops contradict the start value: in a category-0 stop a
    joint that has come to rest must hold the reaction torques of the joints still braking, which exceed the
    gravity load. Left at a too low value, the fit raises that joint's sliding torque instead (the capacity is
    never below the static friction) and lowers its viscous term to compensate: a wrong answer that looks
    identified. Each capacity is therefore probed with a finite change: raised to ``MAX_FACTOR`` x its start,
    and if that lowers the residual sum of squares by more than the whole noise budget of the data
    (m x ``noise``^2 for m residuals: far more than one free parameter explains by chance; a capacity that does
    not matter changes nothing at all), the smallest capacity that gives all but ``THRESHOLD_GAIN`` of the
    improvement is found by bisection. Without ``bisect`` the raised value itself is returned: the fit runs with
    the capacity out of the way (the stops showed that the joint held), because a bound found at the start
    parameters is not the bound at the fitted ones (on the benchmark's stops: 78 N m at the start, 84 needed at
    the truth, and the fit went wrong again). ``only`` restricts the probe to those indices (the probe at the
    fitted values). Returns {parameter index: bound or raised value}."""
    out: dict[int, float] = {}
    probed = [i for i, p in enumerate(params) if p.field in THRESHOLD_FIELDS and (only is None or i in only)]
    if not probed:
        return out
    budget = sum(s.q.size for s in problem.stops) * noise**2
    base = problem.stop_costs(x0)
    # every capacity raised at once first: a stop whose residual that leaves unchanged is not decided by any
    # capacity (none of its joints at rest was ever loaded up to its capacity), and is left out of the probes
    # of the single capacities and their bisections (on the benchmark's 20 stops from the prior: one stop remains)
    xa = x0.copy()
    xa[probed] = x0[probed] * MAX_FACTOR
    raised = problem.stop_costs(xa)
    affected = [k for k in base if raised[k] != base[k]]
    for i in probed:
        p = params[i]
        if not affected:
            break
        xh = x0.copy()
        xh[i] = x0[i] * MAX_FACTOR
        single = problem.stop_costs(xh, affected) if len(probed) > 1 else {k: raised[k] for k in affected}
        changed = [k for k in affected if single[k] != base[k]]
        c0 = sum(base[k] for k in changed)
        ch = sum(single[k] for k in changed)
        if not c0 - ch > budget:
            continue
        lo, hi = x0[i], xh[i]
        if not bisect:
            out[i] = float(hi * problem.scale[i])
            say(f"identification: {p.name}: the stops need more than its start value "
                f"{x0[i] * problem.scale[i]:.4g}; fitting with it raised to {out[i]:.4g}")
            continue
        target = ch + THRESHOLD_GAIN * (c0 - ch)
        for _ in range(THRESHOLD_BISECTIONS):
            mid = 0.5 * (lo + hi)
            xm = x0.copy()
            xm[i] = mid
            if sum(problem.stop_costs(xm, changed).values()) <= target:
                hi = mid
            else:
                lo = mid
        out[i] = float(hi * problem.scale[i])
        say(f"identification: {p.name} must be at least {out[i]:.4g} (it is {x0[i] * problem.scale[i]:.4g} at the "
            f"start)")
    return out


SLIDE_REASON = "no sample shows it"


def _sample_period(stops: Sequence[RecordedStop]) -> float:
    """The recordings' typical sample period [s] (median over the stops)."""
    periods = [float(np.median(np.diff(s.t))) for s in stops if s.t.size > 1]
    return float(np.median(periods)) if periods else math.inf


def _unobservable_friction(robot: RobotModel, params: Sequence[FitParameter], slides: np.ndarray,
                           sample: float) -> dict[int, str]:
    """The friction parameters of joints that slide for less than ``MIN_SLIDE_SAMPLES`` sample periods after
    their brake engages in every stop (``slides`` [s] per joint from :meth:`_Problem.longest_slides`, ``sample``
    [s]): the brake torque acts on such a joint only between two samples, so the recorded angles carry its effect
    only through the few microradians it travels meanwhile and through the reactions on the other joints. A fit
    still finds a sensitivity there (and a 1-sigma that looks small), but it rests on the exact shape of the
    model between samples and on each stop's start-state estimate, not on anything measured: on 20 UR5 stops it
    reported wrist 3's sliding torque 49 % low with a 9 % 1-sigma."""
    out: dict[int, str] = {}
    index = {name: k for k, name in enumerate(robot.joint_names)}
    for i, p in enumerate(params):
        j = index.get(p.joint)
        if p.field in SLIDE_FIELDS and j is not None and slides[j] < MIN_SLIDE_SAMPLES * sample:
            out[i] = (f"{SLIDE_REASON}: {p.joint} slides at most {1e3 * slides[j]:.2g} ms after its brake engages "
                      f"in any stop, less than {MIN_SLIDE_SAMPLES:g} sample periods ({1e3 * sample:.2g} ms each)")
    return out


UNSEEN_RELATIVE = 0.5  # 1-sigma of a friction term no sample shows, relative to its start value


def _considered(J: np.ndarray, Jn: np.ndarray, relative: np.ndarray) -> np.ndarray:
    """Covariance [scaled] that parameters left at a value that may be off (columns ``Jn`` of the residual's
    Jacobian, scaled by that value, each with a 1-sigma of ``relative`` times it) add to the fitted ones
    (columns ``J``): the fitted values absorb such an error as dx = -(J^T J)^-1 J^T Jn dn, so their covariance
    gains (J^T J)^-1 J^T Jn P Jn^T J (J^T J)^-1 with P = diag(relative^2) (a "consider" covariance)."""
    gain = np.linalg.pinv(J.T @ J) @ (J.T @ Jn) * np.asarray(relative, float)[None, :]
    return gain @ gain.T


def _covariance(J: np.ndarray, r: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Covariance of the fitted (scaled) parameters from two estimates: Gauss-Newton, s^2 (J^T J)^-1, and the
    sandwich estimate with the residuals of each stop as one correlated cluster,
    (J^T J)^-1 [sum_stops J_s^T r_s r_s^T J_s] (J^T J)^-1 x G / (G - 1) for G stops. The result has the
    sandwich's correlations and, for each parameter, the larger of the two variances.

    The Gauss-Newton covariance takes every residual as independent. The residuals of one stop are not: the state
    at the trigger is estimated from the samples before it, and its error (a few 1e-5 rad and 1e-3 rad/s) shifts
    every sample of that stop alike, as does any model error the stop exposes. On the benchmark's 20 stops the
    Gauss-Newton 1-sigma put fitted values up to 10 sigma from the truth; the cluster estimate 3 to 5 times
    larger puts every one within 2 sigma. The larger of the two is used, because with few stops the cluster
    estimate itself is uncertain."""
    n = J.shape[1]
    m = r.size
    try:
        inv = np.linalg.pinv(J.T @ J)
    except np.linalg.LinAlgError:
        return np.full((n, n), math.nan)
    gauss_newton = float(r @ r) / max(m - n, 1) * inv
    meat = np.zeros((n, n))
    start = 0
    for size in sizes:
        g = J[start:start + size].T @ r[start:start + size]
        meat += np.outer(g, g)
        start += size
    groups = len(sizes)
    if groups < 2:
        return gauss_newton
    cluster = inv @ meat @ inv * (groups / (groups - 1))
    # the cluster estimate's correlations with each variance raised to the larger of the two estimates
    var = np.maximum(np.diag(gauss_newton), np.diag(cluster))
    d = np.sqrt(np.maximum(np.diag(cluster), 0.0))
    dd = np.outer(d, d)
    corr = np.divide(cluster, dd, out=np.zeros_like(cluster), where=dd > 0)
    np.fill_diagonal(corr, 1.0)
    return corr * np.sqrt(np.outer(var, var))


def identify_brakes(
    robot: RobotModel, prior: Sequence[JointBrake], stops: Sequence[RecordedStop],
    params: Sequence[FitParameter] | None = None, *, settings: StopSettings = StopSettings(step=0.01),
    noise: float = 1e-4, max_relative_sigma: float = 0.1, fd_step: float = 1e-4, max_iterations: int = 30,
    progress: Callable[[str], None] | None = None, start: str = "regression", screen_slides: bool = True,
    assumed: Mapping[str, float] | None = None,
) -> Identification:
    """Fit ``params`` (default: :func:`default_parameters` of ``prior``) to ``stops`` starting from ``prior``.

    ``noise`` [rad] is the recording's position noise (1-sigma), used to screen out parameters the stops are too
    little sensitive to before fitting. See the module docstring for the residual, the uncertainty and the identifiability tests. ``fd_step`` is the
    finite-difference step on the scaled parameters (relative to the prior value). ``start`` is where the fit
    starts: ``"regression"`` (default) the closed-form sliding and viscous estimates of
    :func:`regression_start` for the fitted fields, ``"prior"`` the prior itself. ``screen_slides`` False fits
    the friction of joints that no sample shows sliding too (and reports it not identifiable afterwards): the
    slower way, kept for comparison. ``assumed`` maps fields that are not fitted but kept at the prior's value
    to that value's relative 1-sigma (e.g. ``{"stribeck_velocity": 0.25}`` for a Stribeck speed taken from a
    data sheet): their possible error is added to the uncertainty of every fitted parameter it would move, so
    that a value that hinges on the assumption is not reported as identified (a field the prior leaves unset or
    at zero has no relative error and is skipped). Returns an
    :class:`Identification`; parameters that the stops cannot identify keep their prior value in ``brakes`` and
    have ``value`` None in ``estimates``; a holding capacity the stops needed above its start carries the lower
    bound they show in ``lower_bound`` and in ``brakes``.

    Size: about 180 lines: the screening, the bounded fit, the threshold probe, the covariance and the verdicts
    run in this order on one scaled parameter vector and its Jacobian (module docstring).
    """
    started = time.perf_counter()
    say = progress or (lambda _text: None)
    params = list(params) if params is not None else default_parameters(prior)
    _check(robot, prior, stops, params)
    if start not in ("regression", "prior"):
        raise IdentificationError(f"start: {start!r} is neither 'regression' nor 'prior'")
    for field, rel in (assumed or {}).items():
        if field not in TYPICAL or not (math.isfinite(rel) and rel > 0):
            raise IdentificationError(f"assumed.{field}: not a numeric brake field with a relative 1-sigma > 0")
    first = regression_start(robot, prior, stops) if start == "regression" else list(prior)
    scale = _scale(first, params)
    firsts = np.array([start_value({b.joint: b for b in first}[p.joint], p.field) for p in params])
    for i, k in _excess_pairs(params).items():
        excess = firsts[i] - firsts[k]
        if not excess > 0:
            excess = (START_BREAKAWAY_FACTOR - 1.0) * firsts[k]
        scale[i] = excess if excess > 0 else TYPICAL["breakaway_torque"]
        firsts[i] = excess
    problem = _Problem(robot, prior, params, stops, scale, settings)
    x0 = firsts / scale
    say(f"identification: {len(stops)} stops, {len(params)} parameters; holding capacities")
    bounds = _probe_thresholds(problem, params, x0, noise, say, bisect=False)
    for i, value in bounds.items():
        x0[i] = value / scale[i]
    say("identification: how long each joint slides after its brake engages")
    sample = _sample_period(stops)
    reasons: dict[int, str] = _unobservable_friction(robot, params, problem.longest_slides(x0), sample) \
        if screen_slides else {}
    say("identification: sensitivity at the start")
    r0 = problem.residuals(x0)
    # a threshold's finite-difference column is zero by construction (see _probe_thresholds): not computed; nor
    # is the column of a friction term no sample can show
    smooth = [i for i, p in enumerate(params) if p.field not in THRESHOLD_FIELDS and i not in reasons]
    J0 = np.zeros((r0.size, len(params)))
    J0[:, smooth] = _jacobian(problem, x0, r0, fd_step, smooth)
    norms = np.linalg.norm(J0, axis=0)
    top = float(norms.max()) if norms.size else 0.0
    for i, n in enumerate(norms):
        if i in reasons:
            continue
        if not n > 1e-9 * max(top, 1e-300):
            reasons[i] = "no recorded stop is sensitive to it"
        elif noise / n > max_relative_sigma:
            # Cramer-Rao bound alone (no correlation): doubling the value moves the samples by less than the noise
            # allows to resolve
            reasons[i] = f"the stops are too little sensitive to it (1-sigma at least {noise / n:.2g} relative)"
    active = [i for i in range(len(params)) if i not in reasons]
    if active:
        Js = J0[:, active] / np.linalg.norm(J0[:, active], axis=0)
        rank = numerical_rank(Js, rtol=1e-6)
        if rank < len(active):
            _, _, vt = np.linalg.svd(Js)
            for null in vt[rank:]:
                worst = int(np.argmax(np.abs(null)))
                partners = [params[active[k]].name for k in np.argsort(-np.abs(null))[:3] if k != worst]
                reasons[active[worst]] = f"not separable from {', '.join(partners)} with these stops"
            active = [i for i in active if i not in reasons]
    x = x0.copy()
    message = "nothing to fit"
    J = np.zeros((r0.size, 0))
    r = r0
    at_bound = np.zeros(0, dtype=bool)
    if active:
        sub = np.array(active)

        cache: dict[bytes, np.ndarray] = {x0[sub].tobytes(): r0}

        def fun(z: np.ndarray) -> np.ndarray:
            key = z.tobytes()
            if key not in cache:
                xx = x0.copy()
                xx[sub] = z
                cache.clear()
                cache[key] = problem.residuals(xx)
            return cache[key]

        def jac(z: np.ndarray) -> np.ndarray:
            if np.array_equal(z, x0[sub]):
                return J0[:, sub]  # the sensitivity study already computed it
            xx = x0.copy()
            xx[sub] = z
            say("identification: Jacobian")
            return _jacobian(problem, xx, fun(z), fd_step, sub)

        say(f"identification: fitting {len(active)} parameters")
        lower = np.array([LOWER.get(params[i].field, 0.0) / scale[i] for i in active])
        upper = np.maximum(x0[sub] * MAX_FACTOR, lower + MAX_FACTOR)
        sol = scipy.optimize.least_squares(fun, np.clip(x0[sub], lower, upper), jac=jac, bounds=(lower, upper),
                                           method="trf",
                                           x_scale="jac", max_nfev=max_iterations, xtol=1e-6, ftol=1e-6)
        x[sub] = sol.x
        message = str(sol.message)
        r = sol.fun
        J = sol.jac
        at_bound = sol.active_mask != 0
    if bounds:
        # the fit ran with the flagged capacities out of the way; the lower bound each stop set needs is found at
        # the fitted friction and delays, from the start value up
        xb = x.copy()
        for i in bounds:
            xb[i] = firsts[i] / scale[i]
        say("identification: holding capacities at the fitted values")
        bounds = _probe_thresholds(problem, params, xb, noise, say, only=list(bounds))
        for i, value in bounds.items():
            x[i] = value / scale[i]
    m, n = r.size, len(active)
    sigma = np.full(len(params), math.nan)
    if n:
        cov = _covariance(J, r, [s.q.size for s in stops])
        unseen = [i for i in reasons if reasons[i].startswith(SLIDE_REASON)]
        if unseen:
            # the friction no sample shows stays at its start value, which may be off: its effect on the fitted
            # parameters (the joint's delay above all) is added to their uncertainty
            say("identification: effect of the friction no sample shows")
            Jn = _jacobian(problem, x, problem.residuals(x), fd_step, unseen)
            cov = cov + _considered(J, Jn, np.full(len(unseen), UNSEEN_RELATIVE))
        fixed = [FitParameter(b.joint, f) for b in prior for f in sorted(assumed or {})
                 if FitParameter(b.joint, f) not in params and getattr(b, f, None) is not None
                 and float(getattr(b, f)) > 0]
        if fixed:
            # parameters kept at an assumed value with a stated relative 1-sigma: their effect likewise
            say("identification: effect of the assumed values")
            extended = _Problem(robot, prior, params + fixed, stops, np.concatenate(
                [scale, [float(getattr({b.joint: b for b in prior}[f.joint], f.field)) for f in fixed]]), settings)
            extended.excess = problem.excess  # an assumed breakaway stays a torque, not an excess
            xe = np.concatenate([x, np.ones(len(fixed))])
            Jf = _jacobian(extended, xe, extended.residuals(xe), fd_step, range(len(params), len(params) + len(fixed)))
            problem.n_predictions += extended.n_predictions
            cov = cov + _considered(J, Jf, np.array([float(assumed[f.field]) for f in fixed]))
        # the physical values are linear in the scaled coordinates: value = G x (a breakaway is sliding + excess)
        G = np.zeros((len(params), n))
        for k, i in enumerate(active):
            G[i, k] = scale[i]
        for i, k in problem.excess.items():
            if k in active:
                G[i, active.index(k)] = scale[k]
        sigma = np.sqrt(np.maximum(np.diag(G @ cov @ G.T), 0.0))
        sigma[[i for i in range(len(params)) if i not in active]] = math.nan
        # at the fitted values: a joint that no longer slides after its brake engages shows its friction nowhere
        say("identification: slides at the fitted values")
        late = _unobservable_friction(robot, params, problem.longest_slides(x), sample)
        for i in active:
            if i in late:
                reasons[i] = late[i] + " (at the fitted values)"
        for k, i in enumerate(active):
            if k < at_bound.size and at_bound[k] and i not in reasons:
                # the optimum lies on the edge of the search range: the stops do not hold the value inside, and
                # the covariance of an interior optimum says nothing about it
                reasons[i] = "the fit ran to the edge of its search range (the stops do not bound it)"
    by_joint = {b.joint: b for b in prior}
    estimates = []
    fitted_values = problem.values(x)
    keep: dict[tuple[str, str], object] = {}
    for i, p in enumerate(params):
        raw_prior = getattr(by_joint[p.joint], p.field)
        prior_value = math.nan if raw_prior is None else float(raw_prior)
        value, sd = fitted_values[i], sigma[i]
        reason = reasons.get(i, "")
        if not reason:
            col = float(np.linalg.norm(J[:, active.index(i)])) if i in active else 0.0
            if not noise < max_relative_sigma * col:
                # e.g. a breakaway that the fit pushed below the sliding torque switches the Stribeck term off
                reason = "the stops are not sensitive to it at the fitted values"
        if not reason and not (math.isfinite(sd) and sd <= max_relative_sigma * max(abs(value), 1e-12)):
            reason = f"relative uncertainty {sd / max(abs(value), 1e-300):.2g} above {max_relative_sigma:g}"
        if i in bounds:
            reason = (f"a threshold, not a value: the stops show it is at least {bounds[i]:.4g} (a joint at rest "
                      f"held the reaction of the others; below that it slips and the fit fails); the brakes carry "
                      f"this lower bound")
        if reason:
            keep[(p.joint, p.field)] = bounds.get(i, raw_prior)
            motion = SLIDE_MOTION if reason.startswith(SLIDE_REASON) else \
                TEST_MOTION.get(p.field, "a stop that exercises {j}")
            estimates.append(ParameterEstimate(p.joint, p.field, None, None, False, prior_value, reason,
                                               motion.format(j=p.joint), bounds.get(i)))
        else:
            estimates.append(ParameterEstimate(p.joint, p.field, float(value), float(sd), True, prior_value))
    brakes = tuple(dataclasses.replace(b, **{f: v for (j, f), v in keep.items() if j == b.joint})
                   for b in _brakes_with(prior, params, fitted_values))
    return Identification(robot.name, brakes, tuple(estimates), math.sqrt(float(r @ r) / max(m, 1)), m,
                          problem.n_predictions, time.perf_counter() - started, message)


def settle_time(t: np.ndarray, v: np.ndarray, rest_speed: float) -> float:
    """The time [s] after which every joint speed stays below ``rest_speed`` [rad/s]: the last crossing of the
    threshold, linearly interpolated between the samples around it (0 if never above). Recorded stops and
    predictions are compared by this same rule, because a recording cannot show the instant a joint reaches
    exactly zero speed through its velocity noise."""
    speed = np.max(np.abs(v), axis=1)
    above = np.flatnonzero(speed > rest_speed)
    if above.size == 0:
        return 0.0
    k = int(above[-1])
    if k + 1 >= t.size:
        return float(t[k])
    s0, s1 = speed[k], speed[k + 1]
    frac = (s0 - rest_speed) / (s0 - s1) if s0 != s1 else 1.0
    return float(t[k] + frac * (t[k + 1] - t[k]))


def compare_stops(robot: RobotModel, brakes: BrakeSet, stops: Sequence[RecordedStop], tcp_frame: str | None = None,
                  settings: StopSettings = StopSettings(step=0.01), rest_speed: float = 0.01) -> list[StopComparison]:
    """Predicted vs recorded stopping angle, time and TCP distance for each stop (see :class:`StopComparison`).
    The predicted time is :func:`settle_time` of the prediction with ``rest_speed`` [rad/s], the rule by which
    the recorded stop time was read (``RecordedStop.stop_time``)."""
    problem = _Problem(robot, [], [], stops, np.zeros(0), settings)
    out = []
    for s in stops:
        p = problem.predict(brakes, s, tcp_frame)
        qp = _interp_hermite(p.t, _angles(robot, p.q), p.v, s.t)
        rec_tcp = pred_tcp = math.nan
        if tcp_frame is not None:
            a = robot.frame_placement(s.q0, tcp_frame).translation
            b = robot.frame_placement(s.q[-1], tcp_frame).translation
            rec_tcp = float(np.linalg.norm(b - a))
            pred_tcp = p.tcp_straight_distance
        out.append(StopComparison(
            s.label, s.q[-1] - s.q0, p.stopping_angles, s.stop_time,
            settle_time(p.t, p.v, rest_speed) if p.stopped else math.nan, rec_tcp, pred_tcp,
            float(np.sqrt(np.mean((qp - s.q) ** 2))), p.t, p.q,
        ))
    return out
