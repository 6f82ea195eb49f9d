"""The results of a brake identification, per parameter and per brake set: the estimates with their intervals,
the capacities' estimates, the conservative brakes, the residual of exactly a brake set, and the leave-one-out
cross-validation.

* :func:`estimates`: each fitted value with its 1-sigma and its interval at the confidence z (value -+ z sigma,
  not below 0), or the reason it is not identifiable; its conservative value is the end of the interval that
  lengthens the stop (``LENGTHENING``: a later engagement, a longer torque rise and a heavier rotor lengthen it;
  less sliding, breakaway and viscous torque do too).
* :func:`widen_capacity`: a capacity interval's ends are demands (reactions, Müller 2026, eq. (3) with the
  joint-lock rows) at the fitted values and the recorded trigger state; their gradients over both by forward
  differences of the prediction that holds the joint, and sqrt(g^T C g + h^T P h), widen them.
* :func:`conservative_brakes`: the nominal brakes with every fitted value at its conservative end (a friction
  term the stops do not bound at its lower bound, 0 at 95 %) and every capacity at the smallest value the stops
  allow, kept consistent (holding >= breakaway >= sliding: an untested capacity at the file's own static
  friction).
* :func:`cross_validate`: each stop predicted by brakes refitted without it (:func:`~.fit_uncertainty.
  leave_out_refit`), nominal and conservative.

Units: as the parameters (s, N m, N m s/rad); residuals in rad.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from vtm_dynamics.core.estop.brakes import BrakeSet, JointBrake
from vtm_dynamics.core.estop.capacity_bounds import (
    STATE_STEPS, CapacityInterval, StateFreedom, demand_near, widened,
)
from vtm_dynamics.core.estop.fit_uncertainty import interval, leave_out_refit
from vtm_dynamics.core.estop.identifiability import SLIDE_MOTION, SLIDE_REASON, TEST_MOTION, UNSEEN_RELATIVE
from vtm_dynamics.core.estop.output_error import (
    TYPICAL, FitParameter, MultiStartFit, OutputError, brakes_with, consistent_brake, start_value,
)
from vtm_dynamics.core.estop.stop_comparison import compare_prediction

LENGTHENING = {"engage_delay": +1, "rise_time": +1, "armature": +1}  # others: a smaller value lengthens the stop


@dataclass(frozen=True)
class ParameterEstimate:
    """The result for one parameter: ``value`` [its unit] with ``sigma`` (1-sigma) and the interval [``lower``,
    ``upper``] at the identification's confidence (None / nan where the stops do not determine it), whether it
    is ``identifiable`` (else ``reason`` says why and ``test_motion`` what recording would identify it), the
    ``prior`` value, the value of the ``conservative`` file and the ``direct`` measurement with its 1-sigma (nan:
    not measured directly). A holding capacity's interval comes from the stick/slip decisions
    (:class:`~.capacity_bounds.CapacityInterval`), never from a single value."""

    joint: str
    field: str
    value: float | None
    sigma: float | None
    identifiable: bool
    prior: float
    reason: str = ""
    test_motion: str = ""
    lower: float = math.nan
    upper: float = math.nan
    conservative: float = math.nan
    direct: float = math.nan
    direct_sigma: float = math.nan


def estimates(problem, prior, direct, values, sigma, reasons, fit, z, max_relative_sigma):
    """Every smooth parameter's :class:`ParameterEstimate` and its conservative value by parameter index.

    A value with a finite interval goes to the end of it that lengthens the stop. A value without one (not fitted,
    or no 1-sigma) is not known from the stops: a friction term (``LENGTHENING`` -1: sliding, viscous, the
    breakaway's excess over the sliding torque, the Stribeck speed) goes to its lower bound, max(0, value - z
    ``UNSEEN_RELATIVE`` value) (0 at 95 %: the 50 % 1-sigma the uncertainty gives a friction no sample shows);
    one that lengthens the stop when larger (a delay, a rise time, an armature) has no upper bound the stops
    give: the conservative file keeps its value and its estimate's ``conservative`` is nan (not bounded)."""
    by_prior = {b.joint: b for b in prior}
    by_direct = {s.joint: s for s in direct.slides}
    reference = np.array([TYPICAL.get(p.field, 1.0) if p.field == "viscous" else 0.0 for p in problem.params])
    nominal = {b.joint: b for b in brakes_with(problem.base, problem.params, np.asarray(values, float))}
    keep = max(0.0, 1.0 - z * UNSEEN_RELATIVE)  # the lower bound of an unknown friction term, relative
    rows, conservative, excess = [], {}, {}
    active = set(fit.active) if fit is not None else set()
    for i, p in enumerate(problem.params):
        raw = getattr(by_prior[p.joint], p.field)
        prior_value = math.nan if raw is None else float(raw)
        d = by_direct.get(p.joint)
        dval, dsig = direct_value(d, p.field)
        value, sd = float(values[i]), float(sigma[i])
        reason = reasons.get(i, "")
        if i not in active:
            reason = reason or "not fitted"
        elif not reason and not (math.isfinite(sd) and sd <= max_relative_sigma * max(abs(value), reference[i])):
            # relative to the value, or for a value near zero (a brake without a viscous term) to the size the
            # parameter was scaled with: 0 +- 0.04 N m s/rad is a result, not an unknown
            reason = f"relative uncertainty {sd / max(abs(value), reference[i], 1e-300):.2g} above {max_relative_sigma:g}"
        lo, hi = interval(value, sd, z, 0.0) if i in active else (math.nan, math.nan)
        lengthening = LENGTHENING.get(p.field, -1) > 0
        if i in active and math.isfinite(lo):
            edge = hi if lengthening else lo
            conservative[i] = edge
        elif lengthening:
            edge = math.nan  # no upper bound known: the file keeps the value, and says it is not conservative
            conservative[i] = value
        elif p.field == "breakaway_torque":
            excess[i] = keep * max(value - float(nominal[p.joint].sliding_torque), 0.0)
            edge = math.nan  # set below, on the conservative sliding torque
        else:
            edge = keep * value
            conservative[i] = edge
        rows.append((i, p, prior_value, dval, dsig, value, sd, reason, lo, hi, edge))
    sliding = {p.joint: i for i, p in enumerate(problem.params) if p.field == "sliding_torque"}
    for i, e in excess.items():
        joint = problem.params[i].joint
        base = conservative[sliding[joint]] if joint in sliding else float(nominal[joint].sliding_torque)
        conservative[i] = base + e
    out = []
    for i, p, prior_value, dval, dsig, value, sd, reason, lo, hi, edge in rows:
        edge = conservative[i] if i in excess else edge
        motion = SLIDE_MOTION if reason.startswith(SLIDE_REASON) else TEST_MOTION.get(p.field, "a stop that exercises {j}")
        if reason and i not in active:
            out.append(ParameterEstimate(p.joint, p.field, None, None, False, prior_value, reason,
                                         motion.format(j=p.joint), conservative=edge, direct=dval, direct_sigma=dsig))
        else:
            out.append(ParameterEstimate(p.joint, p.field, value, sd, not reason, prior_value, reason,
                                         motion.format(j=p.joint) if reason else "", lo, hi, edge, dval, dsig))
    return out, conservative


def direct_value(d, field: str) -> tuple[float, float]:
    if d is None:
        return math.nan, math.nan
    if field == "engage_delay":
        return d.engage_delay, d.delay_sigma
    if field == "sliding_torque":
        return d.sliding_torque, d.sliding_sigma
    if field == "viscous":
        return d.viscous, d.viscous_sigma
    return math.nan, math.nan


def conservative_brakes(problem: OutputError, nominal: Sequence[JointBrake], values: Mapping[int, float],
                         caps: Mapping[str, CapacityInterval]) -> tuple[JointBrake, ...]:
    """The nominal brakes with every fitted value at its conservative value (``values``, :func:`estimates`) and
    every capacity at the smallest value the stops allow (:attr:`~.capacity_bounds.CapacityInterval.
    conservative`), raised to this file's own static friction where that is larger (holding >= breakaway >=
    sliding): an untested capacity is written at the conservative static friction, not the nominal one."""
    vector = np.array([values[i] for i in range(len(problem.params))])
    out = brakes_with(nominal, problem.params, vector)
    out = [dataclasses.replace(b, holding_torque=caps[b.joint].conservative) if b.joint in caps else b for b in out]
    return tuple(consistent_brake(b) for b in out)


def capacity_estimates(prior: Sequence[JointBrake], caps: Mapping[str, CapacityInterval],
                        joints: Sequence[str], conservative: Sequence[JointBrake]) -> list[ParameterEstimate]:
    """Each capacity's :class:`ParameterEstimate`; its conservative value is the one the ``conservative`` file
    carries."""
    by_prior = {b.joint: b for b in prior}
    written = {b.joint: float(b.holding_torque) for b in conservative}
    out = []
    for joint in joints:
        c = caps[joint]
        reason = "" if c.tested else ("a threshold the stops bound from below only: " + c.describe() if c.loaded
                                      else c.describe())
        motion = "" if c.tested else TEST_MOTION["holding_torque"].format(j=joint)
        out.append(ParameterEstimate(joint, "holding_torque", c.nominal if c.tested else None, None, c.tested,
                                     float(by_prior[joint].holding_torque), reason, motion, c.lower, c.upper,
                                     written[joint]))
    return out


def ordered(params: Sequence[FitParameter], estimates: Sequence[ParameterEstimate]) -> list[ParameterEstimate]:
    index = {(e.joint, e.field): e for e in estimates}
    return [index[(p.joint, p.field)] for p in params if (p.joint, p.field) in index]


def cross_validate(problem: OutputError, fit: MultiStartFit, x: np.ndarray, nominal: Sequence[JointBrake],
                    conservative: Sequence[JointBrake], tcp_frame: str | None):
    """Leave-one-out: each stop predicted by the nominal and the conservative brakes refitted without it (the
    conservative brakes move with the refit by the same change of the fitted values)."""
    robot = problem.robot
    values = problem.values(x)
    pairs_n, pairs_c = [], []
    for k, stop in enumerate(problem.stops):
        xk = leave_out_refit(problem, x, fit.active, fit.J, fit.r, [k])
        delta = problem.values(xk) - values
        refit = brakes_with(nominal, problem.params, values + delta)
        cons = _shifted(problem, conservative, delta)
        pairs_n.append((BrakeSet.from_brakes(robot, refit), stop))
        pairs_c.append((BrakeSet.from_brakes(robot, cons), stop))
    preds = problem.predictor.predict_many(pairs_n + pairs_c, tcp_frame, to_rest=True)
    n = len(problem.stops)
    cv = tuple(compare_prediction(robot, p, s, tcp_frame) for p, s in zip(preds[:n], problem.stops))
    cv_c = tuple(compare_prediction(robot, p, s, tcp_frame) for p, s in zip(preds[n:], problem.stops))
    return cv, cv_c


def _shifted(problem: OutputError, brakes: Sequence[JointBrake], delta: np.ndarray) -> list[JointBrake]:
    by_joint = {b.joint: b for b in brakes}
    current = np.array([float(start_value(by_joint[p.joint], p.field)) for p in problem.params])
    return brakes_with(list(brakes), problem.params, np.maximum(current + delta, 0.0))


def widen_capacity(problem: OutputError, x: np.ndarray, active: Sequence[int], cov: np.ndarray, c: CapacityInterval,
                   fd_step: float, z: float) -> CapacityInterval:
    """``c`` widened by the 1-sigma of the demands at its ends. A demand moves with the fitted values and with
    the trigger state the stop was predicted from: its gradients over both by forward differences of the
    prediction that holds the joint (capacity raised out of the way), then sqrt(g^T C g + h^T P h) with C the
    fitted values' covariance and P the trigger state's (its estimate's 1-sigma, where the stop states it)."""
    sigmas = []
    j = problem.robot.joint(c.joint).idx_v
    held_at = [dataclasses.replace(b, holding_torque=math.inf) if b.joint == c.joint else b for b in problem.brakes(x)]
    for end in (c.lower_source, c.upper_source):
        if end is None:
            sigmas.append(math.nan)
            continue
        k, instant = end
        stop = problem.stops[k]
        sets = []
        for i in [None, *active]:
            xx = np.array(x, float)
            if i is not None:
                xx[i] += fd_step
            held = [dataclasses.replace(b, holding_torque=math.inf) if b.joint == c.joint else b
                    for b in problem.brakes(xx)]
            sets.append((BrakeSet.from_brakes(problem.robot, held), stop))
        state_cov = stop.state_covariance()
        if state_cov is not None:
            nv = stop.v0.size
            for n in range(2 * nv):
                q0, v0 = stop.q0.copy(), stop.v0.copy()
                if n < nv:
                    q0[n] += STATE_STEPS[0]
                else:
                    v0[n - nv] += STATE_STEPS[1]
                sets.append((BrakeSet.from_brakes(problem.robot, held_at), dataclasses.replace(stop, q0=q0, v0=v0)))
        preds = problem.predictor.predict_many(sets)
        if any(p is None for p in preds):
            sigmas.append(math.inf)
            continue
        levels = np.array([demand_near(p, j, instant) for p in preds])
        g = (levels[1:1 + len(active)] - levels[0]) / fd_step
        variance = float(g @ cov @ g)
        if state_cov is not None:
            steps = np.array([STATE_STEPS[0]] * nv + [STATE_STEPS[1]] * nv)
            h = (levels[1 + len(active):] - levels[0]) / steps
            variance += float(h @ state_cov @ h)
        sigmas.append(math.sqrt(max(variance, 0.0)) if np.isfinite(variance) else math.inf)
    return widened(c, sigmas[0], sigmas[1], z)


def residual_rms_of(problem: OutputError, brakes: Sequence[JointBrake]) -> float:
    """The residual RMS [rad] over every sample of every stop of exactly ``brakes``."""
    r = np.concatenate(problem.residuals_of(BrakeSet.from_brakes(problem.robot, list(brakes))))
    return math.sqrt(float(r @ r) / max(r.size, 1))


def state_free_residual_rms(problem: OutputError, brakes: Sequence[JointBrake], noise: float) -> float | None:
    """The residual RMS [rad] of exactly ``brakes`` over every sample of every stop, each stop timed by positions
    (recorded without velocities) with the change of its trigger state that fits it best taken out, within that
    estimate's own uncertainty (:class:`~.capacity_bounds.StateFreedom`, residual variance ``noise``^2 [rad^2]
    per sample); stops with recorded velocities count as they are. None when no stop is timed by positions (the
    fit is then judged by :func:`residual_rms_of`, as it always was).

    Why: the state at the trigger of such a stop comes from a quadratic through the positions of the 50 ms before
    it, 9 times less certain in velocity than from recorded velocities (1e-2 against 1.1e-3 rad/s), and its error
    shifts every later sample of the stop alike (by up to 1e-3 rad). The true brakes then leave 9-11 times the
    noise in the residual: a fit of the right model was refused as inadequate. With the trigger state free
    within its covariance the residual of a perfect model is min_d |r + A d|^2 + s^2 d^T P^-1 d = s^2 r^T
    (s^2 I + A P A^T)^-1 r per stop, whose mean per sample is about s^2 (the noise of the samples and of the
    trigger state, whitened): a brake model that misfits the stop in a way no trigger state within its
    uncertainty explains still leaves more. Raising the noise by the trigger state's share instead (RMS of
    sqrt(tr(A P A^T) / m)) would have let brakes 15 % too strong pass (1.5 x that noise, 5.9 x here)."""
    if not any(stop.timed_by_positions for stop in problem.stops):
        return None
    brake_set = BrakeSet.from_brakes(problem.robot, list(brakes))
    residuals = problem.residuals_of(brake_set)
    total, count = 0.0, 0
    for stop, r in zip(problem.stops, residuals):
        count += r.size
        if stop.timed_by_positions and stop.state_covariance() is not None:
            total += max(StateFreedom(problem, brake_set, stop, r, noise**2).cost(r), 0.0)
        else:
            total += float(r @ r)
    return math.sqrt(total / max(count, 1))
