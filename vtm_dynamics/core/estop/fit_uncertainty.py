"""Uncertainty of the fitted brake parameters and the leave-stops-out refits of the cross-validation.

**Covariance.** At the optimum x of the output-error fit (:mod:`.output_error`) with Jacobian J (m residuals, n
fitted columns) and residuals r:

    C = s^2 (J^T J)^-1  +  sum_k G J_k P_k J_k^T G^T,       s^2 = |r|^2 / (m - n),  G = (J^T J)^-1 J^T

The first term is the Gauss-Newton covariance of white sample noise. The second adds ("consider" covariance) the
effect of quantities the fit takes as known although they are only estimated, each with Jacobian columns J_k and
covariance P_k: every stop's trigger state (q0, v0), estimated from the samples before the trigger, whose error
shifts all samples of that stop alike (columns by finite differences, one stop at a time; P from the estimate's
own 1-sigma, :class:`~.recorded.RecordedStop`); and fields kept at a value that may be off (the friction of a
joint no sample shows sliding, fields the user states as uncertain). The trigger states' term is what the earlier
"larger of Gauss-Newton and the per-stop cluster sandwich" estimate tried to capture, but the sandwich has one
cluster per stop and so at most as many independent directions as stops: with 10 stops for 16 parameters it left
directions with no variance at all (values 5.5 sigma from the truth).

**Jackknife over stops.** The terms above assume the brake model and the plant agree; where they do not (the
residual above what the noise leaves, concentrated in a few stops), their errors are not white and C is too small.
Each parameter's 1-sigma is therefore at least that of the jackknife over stops,

    C_jack = (n - 1) / n  sum_k (x_(k) - xbar)(x_(k) - xbar)^T,

x_(k) the fit without stop k (the refits below), xbar their mean, n the number of stops: where the residual RMS
is above ``MISFIT`` times what the noise leaves, C is scaled per parameter (its correlations kept) so that no
1-sigma is below the jackknife's (:func:`jackknife_floor`). On a validation set a misfit concentrated in one stop
(residual 2.2 x the noise) had put values up to 8 sigma of C from the truth; at the noise level the jackknife is
not needed and overstates the spread of a value that few stops determine (a breakaway seen in the slow stops
only: its refits without one of them are the ones that lack it).

**Leave-stops-out refits.** The cross-validation predicts each stop from brakes fitted without it. The refit
starts at the full optimum and takes Gauss-Newton steps with the full fit's Jacobian restricted to the kept stops
(the chord method: one Jacobian, residuals re-evaluated), which is the refit's first-order answer near the
optimum without a new multi-start fit per fold.

Units: as the parameters (s, N m, N m s/rad); residuals in rad.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np

from vtm_dynamics.core.estop.brakes import JointBrake
from vtm_dynamics.core.estop.output_error import FitParameter, OutputError, search_box, stop_residual

MISFIT = 1.5  # a residual RMS this many times what the noise leaves: the covariance takes the jackknife's floor


def gauss_newton_covariance(J: np.ndarray, r: np.ndarray) -> np.ndarray:
    """s^2 (J^T J)^-1 (scaled parameters); s^2 = |r|^2 / (m - n)."""
    m, n = J.shape
    return float(r @ r) / max(m - n, 1) * np.linalg.pinv(J.T @ J)


def considered(J: np.ndarray, Jn: np.ndarray, covariance: np.ndarray) -> np.ndarray:
    """Covariance [scaled] that quantities taken as known (Jacobian columns ``Jn``, their ``covariance``) add to
    the fitted parameters (columns ``J``): the fit absorbs their error dn as dx = -(J^T J)^-1 J^T Jn dn."""
    gain = np.linalg.pinv(J.T @ J) @ (J.T @ Jn)
    return gain @ np.atleast_2d(covariance) @ gain.T


def trigger_state_covariance(problem: OutputError, x: np.ndarray, J: np.ndarray, step_q: float = 1e-5,
                             step_v: float = 1e-4) -> np.ndarray:
    """The covariance [scaled] the stops' trigger-state errors add to the fitted parameters: for every stop with
    a known 1-sigma of its trigger state, the finite-difference columns of its residuals with respect to q0 and
    v0 (steps ``step_q`` [rad], ``step_v`` [rad/s]; the other stops' residuals do not move), through
    :func:`considered` with the estimate's covariance (:meth:`~.recorded.RecordedStop.state_covariance`: with the
    correlation of the q0 and v0 errors where the estimator states it). Stops without a stated 1-sigma add
    nothing."""
    from dataclasses import replace

    brakes = problem.brake_set(x)
    sizes = problem.sizes
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    n = J.shape[1]
    total = np.zeros((n, n))
    base = problem.residuals_of(brakes)
    for k, stop in enumerate(problem.stops):
        P = stop.state_covariance()
        if P is None:
            continue
        nv = stop.v0.size
        trials = []
        for i in range(nv):
            q0 = stop.q0.copy()
            q0[i] += step_q
            trials.append(replace(stop, q0=q0))
        for i in range(nv):
            v0 = stop.v0.copy()
            v0[i] += step_v
            trials.append(replace(stop, v0=v0))
        preds = problem.predictor.predict_many([(brakes, s) for s in trials])
        cols = np.column_stack([(stop_residual(problem.robot, p, stop) - base[k]) / h
                                for p, h in zip(preds, [step_q] * nv + [step_v] * nv)])
        Jk = J[offsets[k]:offsets[k + 1]]
        # only stop k's rows move: J^T Jn = J_k^T cols
        gain = np.linalg.pinv(J.T @ J) @ (Jk.T @ cols)
        total += gain @ P @ gain.T
    return total


def assumed_covariance(problem: OutputError, prior: Sequence[JointBrake], x: np.ndarray, J: np.ndarray,
                       fd_step: float, assumed: Mapping[str, float] | None,
                       say: Callable[[str], None]) -> np.ndarray:
    """The effect of fields kept at the prior's value with a stated relative 1-sigma (``assumed``)."""
    n = J.shape[1]
    fixed = [FitParameter(b.joint, f) for b in prior for f in sorted(assumed or {})
             if FitParameter(b.joint, f) not in problem.params and getattr(b, f, None) is not None
             and float(getattr(b, f)) > 0]
    if not fixed:
        return np.zeros((n, n))
    say("identification: effect of the assumed values")
    by_joint = {b.joint: b for b in problem.base}
    extended = OutputError(problem.robot, problem.base, problem.params + fixed, problem.stops,
                           np.concatenate([problem.scale, [float(getattr(by_joint[f.joint], f.field)) for f in fixed]]),
                           problem.predictor)
    extended.excess = problem.excess  # an assumed breakaway stays a torque, not an excess
    xe = np.concatenate([x, np.ones(len(fixed))])
    columns = range(len(problem.params), len(problem.params) + len(fixed))
    Jf = extended.jacobian(xe, extended.residuals(xe), fd_step, columns)
    rel = np.array([float(assumed[f.field]) for f in fixed])
    return considered(J, Jf, np.diag(rel**2))


def jackknife_floor(problem: OutputError, x: np.ndarray, active: Sequence[int], J: np.ndarray, r: np.ndarray,
                    cov: np.ndarray, noise: float) -> np.ndarray:
    """``cov`` (scaled, active columns) scaled per parameter so that no 1-sigma is below that of the jackknife over
    stops (module docstring), where the residual RMS of ``r`` is above ``MISFIT`` times ``noise`` [rad]; with fewer
    than three stops, or a residual the noise explains, ``cov`` unchanged."""
    n = len(problem.stops)
    if n < 3 or not len(active) or math.sqrt(float(r @ r) / max(r.size, 1)) <= MISFIT * noise:
        return cov
    sub = np.asarray(active, int)
    refits = np.array([leave_out_refit(problem, x, active, J, r, [k])[sub] for k in range(n)])
    spread = refits - refits.mean(axis=0)
    jack = np.sqrt((n - 1) / n * np.sum(spread**2, axis=0))
    model = np.sqrt(np.maximum(np.diag(cov), 0.0))
    factor = np.where(model > 0, np.maximum(jack / np.where(model > 0, model, 1.0), 1.0), 1.0)
    scaled = cov * np.outer(factor, factor)
    bare = model <= 0  # a column without model variance takes the jackknife's alone
    scaled[bare, bare] = jack[bare] ** 2
    return scaled


def physical_covariance(problem: OutputError, active: Sequence[int], cov: np.ndarray) -> np.ndarray:
    """The covariance of the physical values (all parameters) from that of the scaled active columns: value =
    G x with G the scales (a breakaway fitted as excess is sliding + excess)."""
    n = len(problem.params)
    G = np.zeros((n, len(active)))
    for k, i in enumerate(active):
        G[i, k] = problem.scale[i]
    for i, k in problem.excess.items():
        if k in active:
            G[i, list(active).index(k)] = problem.scale[k]
    return G @ cov @ G.T


def leave_out_refit(problem: OutputError, x: np.ndarray, active: Sequence[int], J: np.ndarray, r: np.ndarray,
                    left_out: Sequence[int], iterations: int = 2) -> np.ndarray:
    """The scaled parameters refitted without the stops ``left_out``: Gauss-Newton (chord) steps from the full
    optimum ``x`` with the full Jacobian ``J`` restricted to the kept stops, residuals re-evaluated on them
    (module docstring), kept within the fit's search box."""
    sizes = problem.sizes
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    keep = [k for k in range(len(problem.stops)) if k not in set(left_out)]
    rows = np.concatenate([np.arange(offsets[k], offsets[k + 1]) for k in keep]) if keep else np.zeros(0, int)
    Jk = J[rows]
    lower, upper = search_box(problem, active)
    sub = np.asarray(active, int)
    xx = np.array(x, float)
    rk = r[rows]
    H = Jk.T @ Jk
    for it in range(iterations):
        g = Jk.T @ rk
        z = xx[sub]
        free = np.ones(z.size, dtype=bool)
        for _ in range(z.size):  # a value on a bound whose step leaves the box is held there, the rest re-solved
            step = np.zeros(z.size)
            step[free] = -np.linalg.pinv(H[np.ix_(free, free)]) @ g[free]
            out = free & (((z <= lower + 1e-12) & (step < 0)) | ((z >= upper - 1e-12) & (step > 0)))
            if not out.any():
                break
            free &= ~out
        xx[sub] = np.clip(z + step, lower, upper)
        if it + 1 < iterations:
            rk = np.concatenate(problem.residuals_of(problem.brake_set(xx), keep))
    return xx


def interval(value: float, sigma: float, z: float, lower: float = 0.0) -> tuple[float, float]:
    """value -+ z sigma, the lower end not below ``lower`` (a physical bound)."""
    if not (math.isfinite(value) and math.isfinite(sigma)):
        return math.nan, math.nan
    return max(value - z * sigma, lower), value + z * sigma
