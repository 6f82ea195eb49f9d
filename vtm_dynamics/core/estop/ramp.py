"""Category-1 stop ramp (IEC 60204-1): controlled deceleration by the drives before power is removed.

A straight line in joint space, v(t) = v0 (1 - t/T), a = -v0/T, with T = max_i |v0_i| / decel_i from the per-joint
deceleration limits; with torque limits, T is lengthened (doubling, then bisection) until the drive torques
tau = RNEA(q, v, a) + armature * a fit everywhere along the ramp (:func:`ramp_peak`; Müller 2026, eq. (3) with the rotor inertia of
the braked phase on the diagonal of M: the drives decelerate the rotors too). Power is removed at standstill (the
drives hold until the brakes have engaged, :func:`vtm_dynamics.core.estop.prediction.predict_with`) or at
``max_duration`` (then the rest is a category-0 stop from that state, :mod:`.event_loop`; the ramp is still the one
to standstill, its torques after the cut counted too: the time limit does not make the drives decelerate harder,
and the longer ramp is the conservative one). ``"urdf"`` limits on a URDF whose every effort is 0 (none) are
refused. T is lengthened to no
more than ``CategoryOne.longest_ramp`` (default :data:`~.defaults.CATEGORY1_LONGEST_RAMP`); a ramp that no length
up to it fits is refused, naming the joint, its torque and its limit, and the cause (gravity at the start pose, or
the motion's own Coriolis and centrifugal torques at the trigger, which a slower ramp cannot remove, or the
torques along the longest ramp). Units: SI (rad, rad/s, rad/s^2, N m, s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from scipy.optimize import minimize_scalar

from vtm_dynamics.core.estop.inputs import CategoryOne, StopInputError, StopSettings, stop_vector
from vtm_dynamics.core.robot.model import RobotModel

RAMP_GRID = 21  # points of a ramp at least, where its drive torques are checked against the limits
RAMP_GRID_TRAVEL = 0.05  # [rad] largest joint travel between two of them (gravity varies as cos: a 0.05 rad grid
# brackets every peak and misses it by at most 1 - cos(0.025) = 3e-4 of its size, which the refinement finds)
RAMP_REFINE_WITHIN = 0.01  # a joint whose grid maximum is within 1 % of its limit is searched between grid points
RAMP_PEAK_GAP = 0.01  # grid maxima within this (of the limit) of the joint's largest are searched ...
RAMP_PEAKS = 3  # ... the highest three of them
RAMP_FLAT = 1e-12  # (of the limit) differences below this between grid neighbours are rounding, not a peak


@dataclass(frozen=True)
class Ramp:
    """A category-1 ramp as computed: power cut at ``t_off`` [s] in state (``q_off`` [rad], ``v_off`` [rad/s]),
    ``standstill`` if the ramp had ended by then; the deceleration limits ``deceleration`` [rad/s^2] (nv) and drive
    torque limits ``torque_limits`` [N m; N] (nv, 0: none on that joint; None: none given) it assumed, "urdf"
    resolved to the model's effort limits."""

    t_off: float
    q_off: np.ndarray
    v_off: np.ndarray
    standstill: bool
    deceleration: np.ndarray
    torque_limits: np.ndarray | None


def controlled_ramp(robot: RobotModel, q0: np.ndarray, v0: np.ndarray, c1: CategoryOne, settings: StopSettings,
                    samples: dict, armature: np.ndarray | None = None) -> Ramp:
    """Category-1 ramp from (q0 [rad], v0 [rad/s]) (module docstring); appends its samples every ``settings.step``.
    ``armature`` [kg m^2] (nv): the rotor inertias the drives decelerate with the arm (the brakes' ``armature``)."""
    nv = robot.nv
    rotor = np.zeros(nv) if armature is None else np.asarray(armature, dtype=float)
    dec = np.broadcast_to(np.asarray(c1.deceleration, dtype=float), (nv,)).copy() \
        if np.ndim(c1.deceleration) == 0 else stop_vector(c1.deceleration, nv, "category_one.deceleration")
    if not np.all(np.isfinite(dec)) or np.any(dec <= 0):
        raise StopInputError("category_one.deceleration: must be positive and finite")
    if c1.max_duration is not None and not (math.isfinite(float(c1.max_duration)) and float(c1.max_duration) >= 0.0):
        # a negative time would cut the power before the stop begins (the ramp extrapolated backwards)
        raise StopInputError(f"category_one.max_duration: must be a finite number >= 0 s, got {c1.max_duration!r}")
    T = float(np.max(np.abs(v0) / dec)) if np.any(v0 != 0) else 0.0
    lim = None
    if c1.torque_limits == "urdf":
        lim = np.array(robot.model.effortLimit, dtype=float)
        if not np.any(np.isfinite(lim) & (lim > 0.0)):
            # effort 0 means no limit on that joint: with none anywhere the ramp would be the unlimited one, reported
            # as kept within the URDF's effort limits
            raise StopInputError("category_one.torque_limits: 'urdf', but the URDF gives no joint an effort limit "
                                 "(effort 0 on every joint): give one limit per joint, or none")
    elif c1.torque_limits is not None:
        lim = stop_vector(c1.torque_limits, nv, "category_one.torque_limits")
    longest = float(c1.longest_ramp)
    if lim is not None and not (math.isfinite(longest) and longest > 0.0):
        raise StopInputError(f"category_one.longest_ramp: must be a finite number > 0 s, got {c1.longest_ramp!r}")
    m, d = robot.model, robot.data

    def state(t, T):
        if T == 0.0:
            return q0.copy(), np.zeros(nv), np.zeros(nv)
        tt = min(t, T)
        return robot.integrate(q0, v0 * (tt - tt * tt / (2 * T))), v0 * (1 - tt / T), -v0 / T

    def drive(qq, vv, aa):
        return np.array(pin.rnea(m, d, qq, vv, aa)) + rotor * aa

    def usage(T, refine=True):
        return ramp_peak(lambda t: drive(*state(t, T)), T, float(np.max(np.abs(v0))) * T / 2.0,
                         np.where(lim > 0, lim, np.inf), refine).usage

    if lim is not None and T > 0 and usage(T) > 1.0:
        # a refusal describes the longest ramp allowed, or the deceleration limits' own ramp where that is longer
        # (it was described at the longest ramp, a steeper ramp than any the drives would be asked to follow)
        described = max(longest, T)
        lo, hi = T, T
        while hi < longest:  # doubling up to the longest ramp: at most log2(longest / T) + 1 steps
            hi = min(2.0 * hi, longest)
            if usage(hi, refine=False) <= 1.0:
                break
        else:
            raise StopInputError(_no_ramp_text(robot, q0, v0, lim, described,
                                               lambda t: drive(*state(t, described)),
                                               float(np.max(np.abs(v0))) * described / 2.0))
        for _ in range(40):  # on the grid first (cheap) ...
            mid = 0.5 * (lo + hi)
            if usage(mid, refine=False) <= 1.0:
                hi = mid
            else:
                lo = mid
        T = _fit_between_grid_points(usage, hi, longest)
        if T is None:
            raise StopInputError(_no_ramp_text(robot, q0, v0, lim, described,
                                               lambda t: drive(*state(t, described)),
                                               float(np.max(np.abs(v0))) * described / 2.0))
    t_off = T if c1.max_duration is None else min(T, float(c1.max_duration))
    n = max(int(math.ceil(t_off / settings.step)), 1)
    for t in np.linspace(0.0, t_off, n + 1):
        qq, vv, aa = state(t, T)
        samples["t"].append(float(t))
        samples["q"].append(qq)
        samples["v"].append(vv)
        samples["a"].append(aa if t < T else np.zeros(nv))
        samples["tau"].append(np.zeros(nv))
        samples["drive"].append(drive(qq, vv, aa if t < T else np.zeros(nv)))
        samples["locked"].append(np.zeros(nv, dtype=bool))
        samples["W"].append(0.0)
        samples["J"].append(0.0)
    qq, vv, _ = state(t_off, T)
    standstill = t_off >= T
    if standstill:
        vv = np.zeros(nv)
    return Ramp(t_off, qq, vv, standstill, dec,
                None if lim is None else np.where(np.isfinite(lim) & (lim > 0.0), lim, 0.0))


@dataclass(frozen=True)
class RampPeak:
    """Where a ramp's drive torques come closest to their limits: ``usage`` (largest |torque| / limit), at
    ``time`` [s] into the ramp, at joint index ``joint``, with ``torque`` [N m]."""

    usage: float
    time: float
    joint: int
    torque: float


def ramp_peak(drive_at, T: float, travel: float, scale: np.ndarray, refine: bool = True) -> RampPeak:
    """The largest |drive torque| / limit over a ramp of ``T`` [s] (``drive_at(t)``: the torques [N m] at t [s];
    ``travel`` [rad]: the largest joint travel along it; ``scale`` [N m]: the limits, inf where none). Found on a
    grid of at least :data:`RAMP_GRID` points no more than :data:`RAMP_GRID_TRAVEL` of travel apart, then
    (``refine``), for every joint whose grid maximum comes within :data:`RAMP_REFINE_WITHIN` of its limit, by a
    bounded scalar search beside each of its :data:`RAMP_PEAKS` highest grid peaks that come within
    :data:`RAMP_PEAK_GAP` of it: the torques are smooth along the ramp, so a peak between grid points is bracketed by
    the neighbours of the grid point nearest to it (a flat stretch has no peak to find). Before, 21 points were
    taken as the maximum: a shoulder passing through horizontal between two of them needed 60.66 N m under a
    59.9 N m limit."""
    n = max(RAMP_GRID, int(math.ceil(travel / RAMP_GRID_TRAVEL)) + 1)
    times = np.linspace(0.0, T, n)
    torques = np.array([drive_at(t) for t in times])
    use = np.abs(torques) / scale
    k, j = np.unravel_index(int(np.argmax(use)), use.shape)
    peak = RampPeak(float(use[k, j]), float(times[k]), int(j), float(torques[k, j]))
    if not refine:
        return peak
    for j in np.flatnonzero(use.max(axis=0) > 1.0 - RAMP_REFINE_WITHIN):
        u = use[:, j]
        left = np.concatenate(([-np.inf], u[:-1]))
        right = np.concatenate((u[1:], [-np.inf]))
        # a grid peak: at least both neighbours, and above one of them (a stretch where the torque is flat to
        # rounding, e.g. a base turning at a constant deceleration, has none)
        peaks = np.flatnonzero((u >= left) & (u >= right) & (u > np.minimum(left, right) + RAMP_FLAT)
                               & (u >= u.max() - RAMP_PEAK_GAP))
        for k in peaks[np.argsort(u[peaks])[::-1][:RAMP_PEAKS]]:
            lo, hi = times[max(k - 1, 0)], times[min(k + 1, n - 1)]
            found = minimize_scalar(lambda t: -abs(float(drive_at(t)[j])) / scale[j], bounds=(lo, hi),
                                    method="bounded", options={"xatol": 1e-6 * (hi - lo)})
            if -float(found.fun) > peak.usage:
                t = float(found.x)
                peak = RampPeak(-float(found.fun), t, int(j), float(drive_at(t)[j]))
    return peak


def _fit_between_grid_points(usage, T: float, longest: float) -> float | None:
    """... then everywhere along the ramp: the shortest ramp from ``T`` [s] (the grid's) up to ``longest`` [s] whose
    ``usage`` (with its search between grid points) is at most 1, to 1e-10 of its length; None if none fits."""
    excess = usage(T) - 1.0
    if excess <= 0.0:
        return T
    lo, grow = T, max(excess, 1e-9)
    while True:  # the torque falls about as 1 / T where the ramp's deceleration matters: 2x the excess is ample
        hi = min(T * (1.0 + 2.0 * grow), longest)
        if usage(hi) <= 1.0:
            break
        if hi >= longest:
            return None
        lo, grow = hi, 2.0 * grow
    while hi - lo > 1e-10 * hi:
        mid = 0.5 * (lo + hi)
        if usage(mid) <= 1.0:
            hi = mid
        else:
            lo = mid
    return hi


def _no_ramp_text(robot: RobotModel, q0: np.ndarray, v0: np.ndarray, lim: np.ndarray, longest: float,
                  drive_at, travel: float) -> str:
    """Why no ramp fits the torque limits ``lim`` [N m], in one line naming the joint, its torque and its limit:
    gravity at the start pose, else the motion's gravity, Coriolis and centrifugal torques h(q0, v0) at the trigger
    (the ramp's torque tends to them as it is made slower), else the longest ramp allowed (``longest`` [s];
    ``drive_at(t)``: its drive torques [N m] at t [s]; ``travel`` [rad]: its largest joint travel) at its worst
    instant (:func:`ramp_peak`)."""
    scale = np.where(lim > 0, lim, np.inf)
    where = "category_one.torque_limits: no ramp fits the drive torque limits: "
    for torque, cause in ((robot.gravity_torques(q0), "gravity at the start pose"),
                          (robot.bias_forces(q0, v0), "gravity and the motion's Coriolis and centrifugal torques at the trigger")):
        use = np.abs(torque) / scale
        i = int(np.argmax(use))
        if use[i] > 1.0:
            return (f"{where}{cause} need {abs(torque[i]):.6g} N m at joint '{robot.joint_names[i]}' "
                    f"(limit {lim[i]:.6g} N m)")
    peak = ramp_peak(drive_at, longest, travel, scale)
    return (f"{where}even the longest ramp predicted, {longest:g} s, needs {abs(peak.torque):.6g} N m at joint "
            f"'{robot.joint_names[peak.joint]}' {peak.time:.6g} s into it (limit {lim[peak.joint]:.6g} N m)")
