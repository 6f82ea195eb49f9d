"""Brake identification from recorded stops: direct measurement, a global output-error fit from several starts,
capacities bracketed both ways, honest uncertainty, and leave-stops-out cross-validation.

The steps (each in its own module):

1. **Direct measurement** (:mod:`.stop_measurement`): each joint's engage instant from the onset of its
   deceleration in the twice-integrated momentum balance of that joint alone (Müller 2026, eq. (3); the joints
   decouple there), per stop with its profile interval and over all stops; the sliding torque and viscous
   coefficient from the same decelerating segments; the stick/slip record of every joint in every stop. No prior
   value enters.
2. **Capacities** (:mod:`.capacity_bounds`): each holding capacity's interval from the stick/slip decisions the
   stops show, at the current friction and delays; the fit runs with each capacity inside its interval, so that
   every candidate can reproduce the recorded slips.
3. **Global fit** (:mod:`.output_error`, :mod:`.multi_start`): predicted minus recorded angles at every sample of every stop
   (``scipy.optimize.least_squares``, trust-region reflective) from several starts: the direct measurement, the
   prior, and the direct measurement perturbed (``starts``); the best optimum is kept and the starts that reached
   it are counted. The capacities are bracketed again at the optimum, and the fit polished if they moved. When
   the best optimum leaves more than ``INADEQUATE_MISFIT`` times the noise (every start in one wrong basin, because
   capacities read at a direct measurement that is off were read wrong), the fit restarts: the friction refined
   first with the delays held at their direct measurement and every capacity at its static friction, the
   capacities read there, the global fit again from that start; the better of the two fits is kept. Then every
   end of a capacity's interval that a stop sets is checked with the other values fitted again
   (:mod:`.capacity_profile`), and the fit polished with the capacities the file carries where one moved.
4. **Uncertainty** (:mod:`.fit_uncertainty`): Gauss-Newton covariance plus the effect of the trigger-state
   estimates and of fields held at uncertain values, under a misfit no 1-sigma below the jackknife's over stops;
   each fitted value is reported with its 1-sigma and the interval at ``confidence``.
5. **Cross-validation** (:mod:`.stop_comparison`): each stop predicted by brakes refitted without it (leave one
   out), with the nominal and with the conservative parameters; a predicted stop time or TCP distance shorter
   than recorded is a non-conservative result.

Two brake sets come out: the nominal fit and the **conservative** one (every fitted value at the end of its
interval that lengthens the stop: later engagement, less sliding and viscous torque, the smallest capacity the
stops allow). Both obey holding >= breakaway >= sliding >= 0 (:func:`~.brakes.friction_order_problem`), and the
residual RMS stated with each is that of exactly those brakes.

What the data cannot determine is said so: the friction of a joint no sample shows sliding (it comes to rest
within two sample periods of its brake engaging), a parameter no stop is sensitive to or that the stops cannot
separate from others, a relative 1-sigma above ``max_relative_sigma``: such a value is reported as not
identifiable, with the test motion that would identify it.

Units: s, rad, rad/s, N m, N m s/rad.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import scipy.stats

from vtm_dynamics.core.estop import brake_estimates as results
from vtm_dynamics.core.estop import output_error
from vtm_dynamics.core.estop.brake_estimates import ParameterEstimate
from vtm_dynamics.core.estop.brakes import JointBrake
from vtm_dynamics.core.estop.capacity_bounds import CapacityInterval, capacity_intervals
from vtm_dynamics.core.estop.capacity_profile import with_confirmed_capacities
from vtm_dynamics.core.estop.fit_uncertainty import (
    assumed_covariance, considered, gauss_newton_covariance, jackknife_floor as jackknife, physical_covariance,
    trigger_state_covariance as trigger_states,
)
from vtm_dynamics.core.estop.identifiability import (
    SLIDE_REASON, UNSEEN_RELATIVE, longest_slides, sample_period, sensitivity_screen, unobservable_friction,
)
from vtm_dynamics.core.estop.inputs import StopSettings
from vtm_dynamics.core.estop.multi_start import fitted_with_capacities, scaled_start, set_capacities, start_list
from vtm_dynamics.core.estop.output_error import (
    LOWER, TYPICAL, FitParameter, MultiStartFit, OutputError, StartResult, StopPredictor, consistent_brake,
    damped_gauss_newton, search_box, start_value,
)
from vtm_dynamics.core.estop.recorded import RecordedStop, settle_time
from vtm_dynamics.core.estop.stop_comparison import StopComparison, compare_stops
from vtm_dynamics.core.estop.stop_measurement import DirectMeasurement, measure_stops
from vtm_dynamics.core.robot.model import RobotModel

__all__ = [
    "DEFAULT_FIELDS", "FitParameter", "Identification", "IdentificationError", "ParameterEstimate", "RecordedStop",
    "StopComparison", "compare_stops", "default_parameters", "identify_brakes", "settle_time",
]

DEFAULT_FIELDS = ("engage_delay", "sliding_torque", "viscous", "holding_torque")
STRIBECK_FIELDS = ("breakaway_torque", "stribeck_velocity")  # opt-in: stops must reach low speeds slowly
THRESHOLD_FIELDS = ("holding_torque",)  # enter the prediction only through a stick/slip decision
DEFAULT_STARTS = 3
INADEQUATE_MISFIT = 3.0  # a residual this many times the noise is no fit to use: the fit restarts (the starts
#                          share a wrong basin), and if it stays there, vtm-calibrate refuses it
MODEL_MISFIT = 2.0  # a converged fit leaving this many times the noise misses an effect: vtm-calibrate refuses it


class IdentificationError(ValueError):
    """Inputs that cannot be identified from (no stops, wrong sizes, an unknown field); one line naming them."""


@dataclass(frozen=True)
class Identification:
    """The result: nominal ``brakes`` and ``conservative_brakes`` (each with the residual RMS [rad] of exactly those
    brakes over the fitted stops), the per-parameter ``estimates``, the ``capacities``, the multi-start record
    ``starts``, the ``direct`` measurement, the residual RMS [rad] a perfect model would leave on these recordings
    (``noise``: position noise and timestamp jitter, estimated from them), the leave-one-out ``cross_validation``
    (nominal) and ``conservative_cross_validation``, the number of predictions run, the wall time [s] and the
    solver's message; ``confidence`` is that of the intervals; ``state_free_residual_rms`` [rad]: where some stop
    was recorded without velocities, the residual RMS of the nominal brakes with those stops' trigger states free
    within their uncertainty (None: every stop has recorded velocities), see :attr:`adequacy_residual`."""

    robot: str
    brakes: tuple[JointBrake, ...]
    conservative_brakes: tuple[JointBrake, ...]
    estimates: tuple[ParameterEstimate, ...]
    capacities: tuple[CapacityInterval, ...]
    residual_rms: float
    conservative_residual_rms: float
    n_residuals: int
    n_predictions: int
    seconds: float
    message: str
    starts: tuple[StartResult, ...]
    noise: float
    confidence: float
    cross_validation: tuple[StopComparison, ...] = ()
    conservative_cross_validation: tuple[StopComparison, ...] = ()
    direct: DirectMeasurement | None = None
    state_free_residual_rms: float | None = None

    @property
    def adequacy_residual(self) -> float:
        """The residual RMS [rad] of the nominal brakes that the noise is compared with to judge the fit: with
        the trigger state of each stop recorded without velocities free within its estimate's uncertainty
        (``state_free_residual_rms``, :func:`~.brake_estimates.state_free_residual_rms`), else ``residual_rms``."""
        return self.residual_rms if self.state_free_residual_rms is None else self.state_free_residual_rms

    @property
    def not_identifiable(self) -> tuple[ParameterEstimate, ...]:
        return tuple(e for e in self.estimates if not e.identifiable)

    @property
    def agreeing(self) -> int:
        """How many starts reached the best optimum."""
        return sum(s.agrees for s in self.starts)

    @property
    def converged(self) -> bool:
        """Whether the best optimum is confirmed: reached by at least two starts (or the only start finished)."""
        return self.agreeing >= min(2, len(self.starts)) if self.starts else True


def _check(robot: RobotModel, prior: Sequence[JointBrake], stops: Sequence[RecordedStop],
           params: Sequence[FitParameter], assumed: Mapping[str, float] | None, confidence: float,
           starts: int) -> None:
    for field, rel in (assumed or {}).items():
        if field not in TYPICAL or not (math.isfinite(rel) and rel > 0):
            raise IdentificationError(f"assumed.{field}: not a numeric brake field with a relative 1-sigma > 0")
    if not 0.5 <= confidence < 1.0:
        raise IdentificationError(f"confidence: {confidence} is not in [0.5, 1)")
    if starts < 1:
        raise IdentificationError(f"starts: {starts} is not at least 1")
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


def _direct_start(prior: Sequence[JointBrake], direct: DirectMeasurement) -> list[JointBrake]:
    """The prior with every directly measured delay, sliding torque and viscous coefficient put in."""
    by_joint = {s.joint: s for s in direct.slides}
    out = []
    for b in prior:
        s = by_joint.get(b.joint)
        change: dict[str, float] = {}
        if s is not None and s.delay_measured:
            change["engage_delay"] = s.engage_delay
        if s is not None and s.friction_measured:
            change["sliding_torque"] = s.sliding_torque
            change["viscous"] = s.viscous
        out.append(consistent_brake(dataclasses.replace(b, **change)))
    return out


def _scale(brakes: Sequence[JointBrake], params: Sequence[FitParameter]) -> np.ndarray:
    by_joint = {b.joint: b for b in brakes}
    out = []
    for p in params:
        v = abs(start_value(by_joint[p.joint], p.field))
        out.append(v if v > 0 and math.isfinite(v) else TYPICAL.get(p.field, 1.0))
    scale = np.array(out)
    sliding = {p.joint: k for k, p in enumerate(params) if p.field == "sliding_torque"}
    for i, p in enumerate(params):
        if p.field == "breakaway_torque" and p.joint in sliding:
            excess = scale[i] - scale[sliding[p.joint]]
            fallback = (output_error.START_BREAKAWAY_FACTOR - 1.0) * scale[sliding[p.joint]]
            scale[i] = excess if excess > 0 else fallback or TYPICAL["breakaway_torque"]
    return scale


def identify_brakes(
    robot: RobotModel, prior: Sequence[JointBrake], stops: Sequence[RecordedStop],
    params: Sequence[FitParameter] | None = None, *, settings: StopSettings = StopSettings(step=0.01),
    noise: float | None = None, max_relative_sigma: float = 0.1, fd_step: float = 1e-4, max_iterations: int = 20,
    progress: Callable[[str], None] | None = None, starts: int = DEFAULT_STARTS, seed: int = 0,
    assumed: Mapping[str, float] | None = None, tcp_frame: str | None = None, confidence: float = 0.95,
    cross_validate: bool = True,
) -> Identification:
    """Fit ``params`` (default: :func:`default_parameters` of ``prior``) to ``stops`` (module docstring).

    ``prior`` names the braked joints, the form of their brake model and the values of every field not fitted;
    no fitted value depends on it beyond what the stops leave free (it is one of the starts). ``noise`` [rad] is
    the RMS residual a perfect model would leave (default: estimated from the recordings, position noise and
    timestamp jitter, :func:`~.stop_measurement.expected_residual`). ``starts`` is the number of
    starts of the global fit (the direct measurement, the prior, then perturbed direct values, drawn with
    ``seed``). ``assumed`` maps fields that are not fitted but kept at the prior's value to that value's relative
    1-sigma (e.g. ``{"stribeck_velocity": 0.25}``): their possible error enters every fitted value's
    uncertainty. ``tcp_frame`` names the frame whose stopping distance the cross-validation compares;
    ``confidence`` is that of the reported intervals and of the conservative file. ``max_iterations`` bounds
    each start's function evaluations; ``fd_step`` is the finite-difference step on the scaled parameters.
    """
    started = time.perf_counter()
    say = progress or (lambda _text: None)
    prior = list(prior)
    params = list(params) if params is not None else default_parameters(prior)
    _check(robot, prior, stops, params, assumed, confidence, starts)
    z = float(scipy.stats.norm.ppf(0.5 + 0.5 * confidence))
    predictor = StopPredictor(robot, settings)

    say(f"identification: {len(stops)} stops; direct measurement (engage instants, sliding laws, stick/slip)")
    direct = measure_stops(robot, prior, stops)
    noise_rms = float(noise) if noise is not None else direct.residual
    start_brakes = _direct_start(prior, direct)
    capacity_joints = [p.joint for p in params if p.field in THRESHOLD_FIELDS]
    smooth = [FitParameter(p.joint, p.field) for p in params if p.field not in THRESHOLD_FIELDS]
    scale = _scale(start_brakes, smooth)
    problem = OutputError(robot, start_brakes, smooth, stops, scale, predictor)
    x_direct = scaled_start(problem, start_brakes)

    caps: dict[str, CapacityInterval] = {}
    if capacity_joints:
        say("identification: holding capacities at the direct measurement")
        caps = capacity_intervals(problem, problem.brakes(x_direct), capacity_joints, noise_rms**2, say)
        problem = problem.with_base(set_capacities(problem.base, caps))

    sample = sample_period(stops)
    reasons: dict[int, str] = unobservable_friction(robot, smooth, longest_slides(problem, x_direct), sample)
    candidates = [i for i in range(len(smooth)) if i not in reasons]
    active, r0, J0 = sensitivity_screen(problem, x_direct, candidates, fd_step, noise_rms, max_relative_sigma,
                                        reasons, say) if candidates else ([], problem.residuals(x_direct),
                                                                         np.zeros((0, 0)))

    x = x_direct.copy()
    fit: MultiStartFit | None = None
    message = "nothing to fit"
    if active:
        begin = start_list(problem, prior, x_direct, active, starts, seed)
        first = fitted_with_capacities(problem, caps, begin, active, capacity_joints, fd_step, max_iterations,
                                        r0, J0, say)
        misfit = _rms(first[2].r) / noise_rms
        if capacity_joints and misfit > INADEQUATE_MISFIT:
            # every start shares a basin far from the data: the capacities read at the direct measurement can be
            # read wrong where its values are off (on fresh, a wrist's sliding torque from 10 ms of deceleration,
            # 17 % low, made slips it showed read as holds, and every start then ran the wrist's sliding torque
            # to the edge of its search and its delay 11 ms late: residual 32 x the noise). So the friction is
            # refined first with the delays held at their direct measurement and every capacity at its joint's
            # static friction (each joint free to slip as soon as its demand exceeds it: no capacity read from
            # the misfit, no prior), the capacities are read there, and the global fit runs again from that start
            say(f"identification: residual {misfit:.0f} x the noise at the best optimum; a restart: the friction "
                "first (delays held at the direct measurement, every capacity at its static friction), the "
                "capacities read there, the global fit again")
            held = [i for i in active if smooth[i].field != "engage_delay"]
            slipping = problem.with_base([dataclasses.replace(b, holding_torque=0.0) if b.joint in caps else b
                                          for b in problem.base])  # raised to the static friction by each trial
            staged = damped_gauss_newton(slipping, x_direct, held, fd_step, max_iterations, say, "friction first")
            base = capacity_intervals(problem, problem.brakes(staged.x), capacity_joints, noise_rms**2, say)
            again = problem.with_base(set_capacities(problem.base, base))
            restart = [("direct measurement, friction first", staged.x)] + begin[1:]
            second = fitted_with_capacities(again, base, restart, active, capacity_joints, fd_step,
                                             max_iterations, None, None, say)
            if second[2].r @ second[2].r < first[2].r @ first[2].r:
                first = second
        problem, caps, fit = with_confirmed_capacities(*first, fd_step, max_iterations, say)
        x = fit.x
        message = _best_message(fit)
        say("identification: slides at the fitted values")
        late = unobservable_friction(robot, smooth, longest_slides(problem, x), sample)
        for i in active:
            if i in late:
                reasons[i] = late[i] + " (at the fitted values)"

    sigma = np.full(len(smooth), math.nan)
    cov = None
    if fit is not None and fit.J.size:
        sigma, cov = _uncertainty(problem, fit, x, reasons, prior, fd_step, assumed, noise_rms, say)

    if caps and fit is not None and fit.J.size:
        say("identification: uncertainty of the demands that bound the capacities")
        caps = {j: results.widen_capacity(problem, x, fit.active, cov, c, fd_step, z) for j, c in caps.items()}
    values = problem.values(x)
    fitted, conservative_values = results.estimates(problem, prior, direct, values, sigma, reasons, fit, z,
                                                    max_relative_sigma)
    # the file carries each capacity's nominal value (the fit ran with the central one; both are accepted)
    nominal = tuple(consistent_brake(dataclasses.replace(b, holding_torque=caps[b.joint].nominal)
                                     if b.joint in caps else b) for b in problem.brakes(x))
    conservative = results.conservative_brakes(problem, nominal, conservative_values, caps)
    estimates = results.ordered(params, fitted + results.capacity_estimates(prior, caps, capacity_joints, conservative))

    say("identification: residuals of the brakes written")
    residual, residual_c = (results.residual_rms_of(problem, brakes) for brakes in (nominal, conservative))
    cv: tuple[StopComparison, ...] = ()
    cv_c: tuple[StopComparison, ...] = ()
    if cross_validate and fit is not None and len(stops) > 1:
        say(f"identification: leave-one-out cross-validation ({len(stops)} folds)")
        cv, cv_c = results.cross_validate(problem, fit, x, nominal, conservative, tcp_frame)
    return Identification(
        robot.name, nominal, conservative, tuple(estimates), tuple(caps[j] for j in capacity_joints), residual,
        residual_c, sum(s.q.size for s in stops), predictor.count, time.perf_counter() - started, message,
        fit.starts if fit is not None else (), noise_rms, confidence, cv, cv_c, direct,
        results.state_free_residual_rms(problem, nominal, noise_rms),  # None: every stop has recorded velocities
    )


def _rms(r: np.ndarray) -> float:
    return float(np.sqrt(np.mean(r * r))) if r.size else 0.0


def _uncertainty(problem: OutputError, fit: MultiStartFit, x: np.ndarray, reasons: dict[int, str],
                 prior: Sequence[JointBrake], fd_step: float, assumed: Mapping[str, float] | None, noise: float,
                 say: Callable[[str], None]) -> tuple[np.ndarray, np.ndarray]:
    """The 1-sigma of every parameter (physical units; nan where not fitted) and the covariance of the fitted
    scaled columns (:mod:`.fit_uncertainty`); a fitted value on the edge of its search range gets its reason in
    ``reasons`` (the covariance of an interior optimum means nothing there)."""
    J, r = fit.J, fit.r
    cov = gauss_newton_covariance(J, r)
    say("identification: effect of the trigger-state estimates")
    cov = cov + trigger_states(problem, x, J)
    unseen = [i for i in reasons if reasons[i].startswith(SLIDE_REASON)]
    if unseen:
        say("identification: effect of the friction no sample shows")
        Jn = problem.jacobian(x, problem.residuals(x), fd_step, unseen)
        cov = cov + considered(J, Jn, np.diag(np.full(len(unseen), UNSEEN_RELATIVE**2)))
    cov = cov + assumed_covariance(problem, prior, x, J, fd_step, assumed, say)
    say("identification: jackknife over stops")
    cov = jackknife(problem, x, fit.active, J, r, cov, noise)
    sigma = np.sqrt(np.maximum(np.diag(physical_covariance(problem, fit.active, cov)), 0.0))
    _, upper = search_box(problem, fit.active)
    for k, i in enumerate(fit.active):
        field = problem.params[i].field
        # a value at 0 is on its physical bound (a brake without a viscous term), not on the search's edge
        on_edge = x[i] >= upper[k] - 1e-12 or (field in LOWER and x[i] * problem.scale[i] <= LOWER[field] + 1e-12)
        if on_edge and i not in reasons:
            reasons[i] = "the fit ran to the edge of its search range (the stops do not bound it)"
    return sigma, cov


def _best_message(fit: MultiStartFit) -> str:
    best = min(fit.starts, key=lambda s: s.cost)
    return f"{best.message} ({fit.agreeing} of {len(fit.starts)} starts reached the best optimum)"
