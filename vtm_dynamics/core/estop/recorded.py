"""A stop as a recording shows it: the data type that recordings produce and the brake identification consumes,
and the one rule by which recorded and predicted stops are timed.

:class:`RecordedStop` is built from a rosbag2 recording by ``vtm_dynamics.recordings.stops`` (or by hand) and fitted
by :mod:`.identification`; it lives here, beside both, so that neither depends on the other for it: the state
estimated at the trigger instant with its 1-sigma, and the joint angles sampled after it. Units: s, rad, rad/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RecordedStop:
    """One recorded stop: ``q0`` [rad] and ``v0`` [rad/s] (nv each: one position per joint, a continuous joint's
    angle rather than its (cos, sin); :func:`~.series.configuration_of` gives the configuration) at the trigger
    instant, samples ``t`` (K) [s] after the trigger and the recorded angles ``q`` (K x nv) [rad], model order
    (m, m/s for prismatic joints). ``stop_time`` [s] is when the
    recording shows the last joint come to rest (nan if unknown); ``label`` names it in reports.
    ``q0_sigma`` [rad] / ``v0_sigma`` [rad/s] (nv each, or None: unknown) are the 1-sigma of the trigger state's
    estimate, whose error shifts every sample of the stop alike. ``rest_speed`` [rad/s; m/s for a prismatic joint]
    is the speed threshold of the stop-time rule :func:`settle_time` the stop was timed with, one value or one per
    joint (predictions of it are timed alike).
    ``timed_by_positions``: the recording has no velocities, so the speeds it was timed by are its positions'
    :func:`position_velocities` at its sample instants ``t``, and predictions of it are timed from their positions
    at the same instants (False: by recorded velocities, and predictions by their velocities at the same instants).
    ``state_correlation`` [-] (nv, or None: uncorrelated) is, per joint, the correlation of the errors of q0 and
    v0: both come from one fit to the same samples (about 0.87 for a quadratic through the positions of the
    50 ms before the trigger), and an error of the position and one of the velocity in the same direction add up
    in every sample after the trigger."""

    label: str
    q0: np.ndarray
    v0: np.ndarray
    t: np.ndarray
    q: np.ndarray
    stop_time: float = math.nan
    trigger_time: float = math.nan
    q0_sigma: np.ndarray | None = None
    v0_sigma: np.ndarray | None = None
    rest_speed: float | np.ndarray = 0.01
    timed_by_positions: bool = False
    state_correlation: np.ndarray | None = None

    def state_covariance(self) -> np.ndarray | None:
        """The covariance (2 nv x 2 nv; order q0, then v0) [rad^2, rad^2/s, rad^2/s^2] of the trigger state's
        estimate, from its 1-sigma and ``state_correlation``; None when the 1-sigma is unknown."""
        if self.q0_sigma is None or self.v0_sigma is None:
            return None
        sigma = np.concatenate([np.asarray(self.q0_sigma, float), np.asarray(self.v0_sigma, float)])
        cov = np.diag(sigma**2)
        if self.state_correlation is not None:
            nv = sigma.size // 2
            both = np.asarray(self.state_correlation, float) * sigma[:nv] * sigma[nv:]
            cov[np.arange(nv), nv + np.arange(nv)] = both
            cov[nv + np.arange(nv), np.arange(nv)] = both
        return cov


def settle_time(t: np.ndarray, v: np.ndarray, rest_speed: float | np.ndarray) -> float:
    """The time [s] after which every joint speed stays below ``rest_speed`` [rad/s; m/s for a prismatic joint]
    (one value for all joints, or one per joint): the last crossing of the threshold, linearly interpolated between
    the samples around it (0 if never above). Recorded stops and predictions are compared by this same rule,
    because a recording cannot show the instant a joint reaches exactly zero speed through its velocity noise.
    With one threshold per joint the speeds are read as multiples of their own thresholds (crossing at 1), so that
    a track's m/s and an arm's rad/s are never compared with each other."""
    if np.ndim(rest_speed) > 0:
        return settle_time(t, np.asarray(v, dtype=float) / np.asarray(rest_speed, dtype=float), 1.0)
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


#: [s] half-width of the difference quotient by which :func:`position_velocities` derives speeds from positions:
#: +-2 samples at 500 Hz, whose noise (1e-4 rad) then leaves 0.014 rad/s in the speed (0.035 rad/s with the
#: neighbouring samples), so that a stop time read from it scatters by 1-3 % instead of 2-5 %
DIFFERENCE_HALF_WIDTH = 0.004


def position_velocities(t: np.ndarray, q: np.ndarray, half_width: float = DIFFERENCE_HALF_WIDTH) -> np.ndarray:
    """Joint velocities [rad/s] (K x n) derived from angles ``q`` (K x n) [rad] sampled at ``t`` (K, sorted) [s]:
    at each sample k the difference quotient (q[b] - q[a]) / (t[b] - t[a]) between the last sample a at least
    ``half_width`` [s] before it and the first sample b at least as long after it (its neighbours if closer).
    The first and last samples, whose window the samples do not cover, take the nearest complete window's value
    (a one-sided difference would have more noise, and the last sample of a recording at rest would cross a
    threshold set by the others' noise); samples sharing a stamp are averaged first and share a value; with no
    complete window at all, the mean velocity over the samples (zeros with fewer than two distinct stamps).
    A recording without velocities and the predictions compared with it are timed by :func:`settle_time` on
    these, at the recording's sample instants."""
    stamps, which = np.unique(t, return_inverse=True)
    if stamps.size < 2:
        return np.zeros_like(q, dtype=float)
    mean = np.zeros((stamps.size, q.shape[1]))
    np.add.at(mean, which, q)
    mean /= np.bincount(which, minlength=stamps.size)[:, None]
    k = np.arange(stamps.size)
    reach = half_width - 1e-9  # a ROS stamp's resolution: rounding in t - half_width must not widen the window
    a = np.minimum(np.searchsorted(stamps, stamps - reach, side="right") - 1, k - 1)
    b = np.maximum(np.searchsorted(stamps, stamps + reach, side="left"), k + 1)
    ok = np.flatnonzero((a >= 0) & (b < stamps.size))
    if ok.size == 0:
        return np.repeat((mean[-1:] - mean[:1]) / (stamps[-1] - stamps[0]), t.size, axis=0)
    inner = (mean[b[ok]] - mean[a[ok]]) / (stamps[b[ok]] - stamps[a[ok]])[:, None]
    return inner[np.clip(np.searchsorted(ok, k), 0, ok.size - 1)][which]
