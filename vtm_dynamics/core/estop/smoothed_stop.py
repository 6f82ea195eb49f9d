"""A recorded stop smoothed for the direct measurement: the trigger state prepended, positions and velocities
through a cubic Savitzky-Golay filter, the twice-integrated momentum balance of every joint, and the noise of the
recording (position noise and timestamp jitter) read from the smoother's residual.

The momentum balance of one joint (Müller 2026, eq. (3) with M' = C + C^T): with the drives off the only
generalized force on joint j is its brake tau_j, and dp/dt = tau + C(q, v)^T v - g(q) for p = M(q) v holds row by
row whatever the other joints do. Integrated twice from the trigger (t = 0, state (q0, v0)):

    Y_j(t) = int_0^t p_j dt' - p_j(0) t - int_0^t int_0^t' (C^T v - g)_j = int_0^t int_0^t' tau_j          [N m s^2]

The first term is sum_i M(q_mid,i) (q_{i+1} - q_i) over the recorded samples: positions, not their derivatives,
so the encoder noise enters Y once and is not amplified; M, C and g are evaluated on the smoothed recording, where
smoothing does no harm. :mod:`.stop_measurement` reads the brakes from Y. Units: s, rad, rad/s, N m s^2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pinocchio as pin
import scipy.signal

from vtm_dynamics.core.estop.recorded import RecordedStop
from vtm_dynamics.core.robot.model import RobotModel

SMOOTHING_WINDOW = 0.016  # [s] cubic Savitzky-Golay window for the smoothed state (9 samples at 500 Hz)
REST_SPEED_SIGMAS = 4.0  # a joint moves while its smoothed speed exceeds this many sigmas of its noise
MIN_REST_SPEED = 0.02  # [rad/s] ... and at least this


@dataclass(frozen=True)
class SmoothedStop:
    """One stop with the trigger state prepended: ``t`` (K+1) [s] from the trigger, raw ``q`` [rad] (row 0 is the
    state estimated at the trigger), smoothed ``qs`` [rad] and ``vs`` [rad/s], the twice-integrated momentum
    balance ``Y`` (K+1 x nv) [N m s^2] (module docstring) and the sample period ``dt`` [s]."""

    label: str
    t: np.ndarray
    q: np.ndarray
    qs: np.ndarray
    vs: np.ndarray
    Y: np.ndarray
    dt: float


def window_samples(dt: float, window: float) -> int:
    return max(5, int(round(window / dt)) | 1)


def smooth_stop(robot: RobotModel, stop: RecordedStop, armature: np.ndarray,
                window: float = SMOOTHING_WINDOW) -> SmoothedStop:
    """The stop's samples with the trigger state prepended, smoothed, and the momentum balance Y (module
    docstring). ``armature`` [kg m^2] per velocity index is added to M (the rotors turn with the joints)."""
    model, data = robot.model, robot.data
    t = np.concatenate(([0.0], stop.t))
    q = np.vstack([stop.q0, stop.q])
    dt = float(np.median(np.diff(stop.t))) if stop.t.size > 1 else 1.0
    w = window_samples(dt, window)
    if stop.t.size >= w:
        qs = np.vstack([stop.q0, scipy.signal.savgol_filter(stop.q, w, 3, axis=0)])
        vs = np.vstack([stop.v0, scipy.signal.savgol_filter(stop.q, w, 3, deriv=1, delta=dt, axis=0)])
    else:
        qs = q.copy()
        vs = np.vstack([stop.v0, np.gradient(stop.q, stop.t, axis=0) if stop.t.size > 1 else stop.q * 0.0])
    n = t.size
    rotor = np.diag(armature)
    force = np.empty((n, robot.nv))
    for k in range(n):
        C = pin.computeCoriolisMatrix(model, data, qs[k], vs[k])
        force[k] = C.T @ vs[k] - pin.computeGeneralizedGravity(model, data, qs[k])
    P = np.zeros((n, robot.nv))
    for k in range(n - 1):
        M = robot.mass_matrix(0.5 * (qs[k] + qs[k + 1])) + rotor
        P[k + 1] = P[k] + M @ (q[k + 1] - q[k])
    p0 = (robot.mass_matrix(stop.q0) + rotor) @ stop.v0
    h = np.diff(t)[:, None]
    F1 = np.vstack([np.zeros(robot.nv), np.cumsum(0.5 * h * (force[1:] + force[:-1]), axis=0)])
    F2 = np.vstack([np.zeros(robot.nv), np.cumsum(0.5 * h * (F1[1:] + F1[:-1]), axis=0)])
    return SmoothedStop(stop.label, t, q, qs, vs, P - np.outer(t, p0) - F2, dt)


def position_noise(smoothed: Sequence[SmoothedStop], window: float = SMOOTHING_WINDOW) -> tuple[np.ndarray, float]:
    """(per joint position noise [rad], timing noise [s]), both 1-sigma, from the smoother's residual scaled by
    1 / sqrt(1 - h) (h its central weight). A sample taken off its stamp by u errs by v u, so the residual's
    variance grows with the speed: sigma^2(v) = sigma_q^2 + sigma_t^2 v^2. sigma_q is the robust (median absolute
    deviation) spread of the samples at rest; sigma_t the least-squares slope of the binned robust variances
    against v^2 over all joints (timestamps are shared by the joints). Robust spreads, because the smoother
    misfits the few samples around an abrupt change of acceleration."""
    resid, speed = [], []
    for s in smoothed:
        w = window_samples(s.dt, window)
        if s.t.size - 1 >= w:
            h = scipy.signal.savgol_coeffs(w, 3)[w // 2]
            resid.append((s.q[1:] - s.qs[1:]) / math.sqrt(1.0 - h))
            speed.append(np.abs(s.vs[1:]))
    nv = smoothed[0].q.shape[1] if smoothed else 0
    if not resid:
        return np.full(nv, math.nan), math.nan
    r, v = np.vstack(resid), np.vstack(speed)

    def robust(x: np.ndarray) -> float:
        return float(1.4826 * np.median(np.abs(x - np.median(x)))) if x.size >= 10 else math.nan

    at_rest = v < 0.05
    sigma_q = np.array([robust(r[at_rest[:, j], j]) if at_rest[:, j].sum() >= 10 else robust(r[:, j])
                        for j in range(nv)])
    edges = np.array([0.2, 0.5, 1.0, 2.0, 4.0])
    rows, rhs = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        for j in range(nv):
            sel = (v[:, j] >= lo) & (v[:, j] < hi)
            if sel.sum() >= 20:
                mean_v2 = float(np.mean(v[sel, j] ** 2))
                rows.append(mean_v2)
                rhs.append(robust(r[sel, j]) ** 2 - sigma_q[j] ** 2)
    sigma_t = math.sqrt(max(float(np.dot(rows, rhs) / np.dot(rows, rows)), 0.0)) if rows else 0.0
    return sigma_q, sigma_t


def expected_residual(smoothed: Sequence[SmoothedStop], sigma_q: np.ndarray, sigma_t: float) -> float:
    """The RMS [rad] of a perfect model's residual over every sample of these stops: sqrt(mean(sigma_q^2 +
    sigma_t^2 v^2)) with v the smoothed velocities (the noise of :func:`position_noise`)."""
    v2 = np.vstack([s.vs[1:] ** 2 for s in smoothed])
    return float(np.sqrt(np.mean(sigma_q[None, :] ** 2 + sigma_t**2 * v2)))


def rest_speed(smoothed: Sequence[SmoothedStop], noise: float, window: float = SMOOTHING_WINDOW) -> float:
    """The speed [rad/s] below which a joint counts as at rest: ``REST_SPEED_SIGMAS`` x the noise of the smoothed
    velocity (the position noise through the filter's derivative weights), at least ``MIN_REST_SPEED``."""
    dt = float(np.median([s.dt for s in smoothed])) if smoothed else 1.0
    w = window_samples(dt, window)
    gain = float(np.linalg.norm(scipy.signal.savgol_coeffs(w, 3, deriv=1, delta=dt)))
    sigma = noise * gain if math.isfinite(noise) else 0.0
    return max(REST_SPEED_SIGMAS * sigma, MIN_REST_SPEED)
