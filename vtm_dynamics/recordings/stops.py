"""Finding the stops in a recording: trigger edges and the joint-state series around them.

A stop starts at a rising edge of the trigger (a message that means "stopping" after one that did not, or the
first trigger message if it already means stopping and is stamped: an event stamped with its instant). An
unstamped first message that already means stopping starts no stop: its time is when the recorder heard it, and
the stop it reports began before that, maybe long before (the recording started during a stop or an E-stop; taken
as a stop, a recording begun 0.1 s into a 3.9 rad/s stop gave a stop from 0.14 rad/s that ended at once). The state at the trigger instant t_e is estimated from the joint
states of the ``pre_window`` [s] before it (:func:`state_at_trigger`; the robot moved on after the last sample). The
stop ends when the arm is at rest: the first sample after which every joint stays within ``rest_tolerance`` [rad]
(a prismatic joint within ``rest_tolerance_linear`` [m]) of its value for ``rest_hold`` [s] (so a joint creeping
slower than rest_tolerance / rest_hold counts as resting: 5 mrad/s, and 2.5 mm/s for a track).
The recorded stop time is when the last joint's recorded speed falls below its threshold for good
(:func:`~vtm_dynamics.core.estop.recorded.settle_time`, one threshold per joint): ``rest_speed`` [rad/s]
(``rest_speed_linear`` [m/s] for a prismatic joint), or ``REST_SPEED_SIGMAS`` times the velocity noise seen in the
rest window among the joints of its unit if that is larger. The linear thresholds are their own figures: before, the
angular ones were applied to a track in m and m/s, and a track still creeping at 5 mm/s after the arm had stopped
counted as at rest under "0.01" (the stop time ended with the arm's). (At 3e-3 rad/s noise a 0.01 rad/s threshold is crossed by
noise alone a few times per second, which pushed recorded stop times late by up to 60 %); the threshold is kept with
the stop, and predictions are timed by the same one. A recording without velocities is timed the same way on the
speeds :func:`~vtm_dynamics.core.estop.recorded.position_velocities` derives from its positions over the stop's
samples (their noise sets the threshold: about 0.07 rad/s at 1e-4 rad and 500 Hz), and the stop is marked
``timed_by_positions`` so that predictions are timed from their positions at the same instants (it used to be
timed by the start of the rest window, 3-14 % earlier than the rule its predictions were timed by, which let a
brake file 15 % too strong pass a 5 % shortfall check). The samples used for the fit run from the trigger to the
end of the rest window.

A stop that the recording cuts off before the rest window is complete, a new trigger edge before rest, or a gap
in the joint states before rest (a rest window must be covered by samples, :mod:`.rest`) is an error naming the
stop: its end is unknown, and a shortened stop would bias the fit. Joint names must match the
model's (one-DOF joints). A continuous joint (no limits; drivers report it wrapped to (-pi, pi]) is unwrapped
along the recording: its stop is counted through +-pi, and its start state is its angle (up to whole turns, which
the prediction does not need); before, a model with a continuous joint was refused. Errors are
:class:`~.bag_files.RecordingError`, one line.

The state at the trigger must be one the model admits (:func:`state_within_limits`): a joint parked at a position
limit (a linear track at the end of its travel, held by its brake) or running at its velocity limit is estimated
from noisy samples a little either side of it; an estimate beyond a limit by at most ``LIMIT_SIGMAS`` times its
1-sigma (at least ``LIMIT_SLACK``) is taken AT the limit, where the joint is. Beyond that the recording and the model
disagree (an encoder offset, limits that are not the robot's) and the stop is an error naming the joint. Before, the
engine refused such a state and the replay reported the refused prediction as a stop "not at rest"
(non-conservative) without the reason. Units: rad and rad/s, m and m/s for a prismatic joint.
"""

from __future__ import annotations

import math

import numpy as np

from vtm_dynamics.core.estop.inputs import StopInputError, check_stop_state
from vtm_dynamics.core.estop.recorded import RecordedStop, position_velocities, settle_time
from vtm_dynamics.core.estop.series import configuration_of
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.recordings.bag_files import Recording, RecordingError
from vtm_dynamics.recordings.rest import (REST_HOLD, REST_MAX_GAP_FRACTION, REST_TOLERANCE, REST_TOLERANCE_LINEAR,
                                          first_rest, widest_gap)

REST_SPEED = 0.01  # [rad/s]
REST_SPEED_LINEAR = 2e-3  # [m/s] a prismatic joint's: below a 5 mm/s creep, which is motion (module docstring)
REST_SPEED_SIGMAS = 5.0  # the stop-time threshold is at least this many sigmas of the recorded velocity noise
PRE_WINDOW = 0.05  # [s] of samples before the trigger that estimate the state at the trigger
LIMIT_SIGMAS = 5.0  # a trigger state this many of its 1-sigma beyond a joint limit is taken at the limit ...
LIMIT_SLACK = 1e-4  # [rad, m; rad/s, m/s] ... or this much, if more (about one sample's encoder noise)


def state_within_limits(robot: RobotModel, q0: np.ndarray, v0: np.ndarray, q0_sigma: np.ndarray | None = None,
                        v0_sigma: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(q0, v0) [rad or m, rad/s or m/s; one per joint, model order] with each entry beyond the model's position
    or velocity limit by at most max(``LIMIT_SIGMAS`` x its 1-sigma, ``LIMIT_SLACK``) set to that limit (see the
    module docstring); entries further out are left for :func:`check_stop_state` to name."""
    q, v = np.array(q0, dtype=float), np.array(v0, dtype=float)
    lo, hi = robot.model.lowerPositionLimit, robot.model.upperPositionLimit
    vmax = robot.model.velocityLimit

    def slack(sigma: np.ndarray | None, i: int) -> float:
        return LIMIT_SLACK if sigma is None else max(LIMIT_SLACK, LIMIT_SIGMAS * float(sigma[i]))

    for j in robot.joints:
        i, k = j.idx_q, j.idx_v  # its limits are indexed by configuration, q0 and v0 by joint
        if j.nq == 1 and math.isfinite(lo[i]) and math.isfinite(hi[i]) and hi[i] > lo[i]:
            if lo[i] - slack(q0_sigma, k) <= q[k] < lo[i]:
                q[k] = lo[i]
            elif hi[i] < q[k] <= hi[i] + slack(q0_sigma, k):
                q[k] = hi[i]
        if math.isfinite(vmax[k]) and vmax[k] > 0 and vmax[k] < abs(v[k]) <= vmax[k] + slack(v0_sigma, k):
            v[k] = math.copysign(vmax[k], v[k])
    return q, v


def state_at_trigger(t: np.ndarray, q: np.ndarray, v: np.ndarray | None, k: int, te: float,
                     window: float = PRE_WINDOW) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None,
                                                          np.ndarray | None]:
    """(q, v) at the trigger instant ``te`` from the samples up to index ``k`` within ``window`` [s] before it,
    their 1-sigma (None when too few samples to tell) and the correlation of their errors per joint (None: not
    stated, taken as uncorrelated).

    With recorded velocities: a least-squares line v(t) = v_e + a (t - te) through them gives v_e, and each
    sample's position carried to te along that line, q_k + v_e (te - t_k) - a (te - t_k)^2 / 2, is averaged
    (the encoder noise shrinks with the square root of the number of samples; extrapolating a fitted polynomial
    in position instead would triple it); the 1-sigma of v_e is the line's, that of the position the scatter of
    the carried positions over sqrt(n) with the velocity's error carried over the mean lag. Without velocities:
    a least-squares quadratic in position, with its own covariance s^2 (A^T A)^-1 (s^2 the residual variance of
    the fit, encoder noise and timestamp jitter alike), including the correlation of the intercept and the slope
    (about 0.87 at 500 Hz: both are read at the end of the window, so their errors have the same sign)."""
    sel = np.flatnonzero((t[: k + 1] >= t[k] - window))
    dt = t[sel] - te
    if sel.size < 4:
        vk = v[k] if v is not None else np.zeros(q.shape[1])
        return q[k] + vk * (te - t[k]), vk.copy(), None, None, None
    if v is None:
        A = np.vstack([np.ones_like(dt), dt, dt * dt]).T
        coef, *_ = np.linalg.lstsq(A, q[sel], rcond=None)
        resid = q[sel] - A @ coef
        cov = np.linalg.pinv(A.T @ A)
        s2 = np.sum(resid**2, axis=0) / max(sel.size - 3, 1)
        correlation = np.full(q.shape[1], cov[0, 1] / np.sqrt(cov[0, 0] * cov[1, 1]))
        return coef[0], coef[1], np.sqrt(s2 * cov[0, 0]), np.sqrt(s2 * cov[1, 1]), correlation
    B = np.vstack([np.ones_like(dt), dt]).T
    (ve, acc), *_ = np.linalg.lstsq(B, v[sel], rcond=None)
    s2v = np.sum((v[sel] - B @ np.vstack([ve, acc])) ** 2, axis=0) / max(sel.size - 2, 1)
    sigma_v = np.sqrt(s2v * np.linalg.pinv(B.T @ B)[0, 0])
    lag = -dt[:, None]
    carried = q[sel] + ve * lag - 0.5 * acc * lag * lag
    sigma_q = np.sqrt(np.var(carried, axis=0, ddof=1) / sel.size + (sigma_v * float(np.mean(lag))) ** 2)
    return carried.mean(axis=0), ve, sigma_q, sigma_v, None


def trigger_edges(rec: Recording) -> np.ndarray:
    """Times [s] of the rising edges of the trigger (see the module docstring)."""
    s = rec.trigger.stopping
    if s.size == 0:
        return np.zeros(0)
    # before the first message: not stopping if its time is the stamp of the instant it stands for, unknown if it
    # is the receive time (the recording began, or the publisher was heard, while the arm was already stopping)
    prev = np.concatenate(([not rec.trigger.stamped], s[:-1]))
    return rec.trigger.t[s & ~prev]


def model_order(rec: Recording, robot: RobotModel) -> np.ndarray:
    """Column index in the recording of each model joint. Recorded joints the model does not have (a gripper's
    fingers on the same topic) are left out (:func:`foreign_joints` names them), as the predictor node leaves them
    out of its joint states; an error names a model joint the recording lacks."""
    names = rec.joints.names
    missing = [n for n in robot.joint_names if n not in names]
    if missing:
        extra = foreign_joints(rec, robot)
        also = f"; joint {extra[0]!r} is not in the model {robot.name!r}" if extra else ""
        raise RecordingError(f"{rec.name}: joints do not match the model: model joint {missing[0]!r} is not "
                             f"recorded{also} (recorded: {', '.join(names)})")
    several = [j.name for j in robot.joints if j.nv != 1 or j.nq not in (1, 2)]
    if several:
        raise RecordingError(f"{rec.name}: the model {robot.name!r} has joints with more than one degree of freedom "
                             f"({', '.join(several[:4])}): a joint state cannot describe them")
    return np.array([names.index(n) for n in robot.joint_names])


def foreign_joints(rec: Recording, robot: RobotModel) -> list[str]:
    """The recorded joints the model does not have, in recorded order (left out of the stops)."""
    return [n for n in rec.joints.names if n not in robot.joint_names]


def per_joint(robot: RobotModel, angular: float, linear: float) -> np.ndarray:
    """One value per joint (model order): ``linear`` [m, m/s] for a prismatic joint, ``angular`` [rad, rad/s] for
    the others."""
    return np.array([linear if j.prismatic else angular for j in robot.joints], dtype=float)


def find_stops(rec: Recording, robot: RobotModel, *, rest_tolerance: float = REST_TOLERANCE,
               rest_hold: float = REST_HOLD, rest_speed: float = REST_SPEED,
               pre_window: float = PRE_WINDOW, rest_tolerance_linear: float = REST_TOLERANCE_LINEAR,
               rest_speed_linear: float = REST_SPEED_LINEAR) -> list[RecordedStop]:
    """Every stop of ``rec`` as a :class:`~vtm_dynamics.core.estop.identification.RecordedStop` in model order;
    the rest rule's thresholds per joint by its unit (module docstring)."""
    tolerances = per_joint(robot, rest_tolerance, rest_tolerance_linear)
    speeds_at_rest = per_joint(robot, rest_speed, rest_speed_linear)
    linear = np.array([j.prismatic for j in robot.joints], dtype=bool)
    cols = model_order(rec, robot)
    t = rec.joints.t
    q = rec.joints.q[:, cols]
    turning = [j.idx_v for j in robot.joints if j.nq == 2]  # continuous joints: their angle, unwrapped
    if turning:
        q[:, turning] = np.unwrap(q[:, turning], axis=0)
    has_v = rec.joints.v is not None
    v = rec.joints.v[:, cols] if has_v else position_velocities(t, q)
    edges = trigger_edges(rec)
    if edges.size == 0:
        if rec.trigger.stopping.any():
            raise RecordingError(f"{rec.name}: the trigger signals stopping from its first message on (received at "
                                 f"{rec.trigger.t[0]:.3f} s, no header stamp): the stop began before the recording")
        raise RecordingError(f"{rec.name}: the trigger never signals a stop ({rec.rule.type_name} field "
                             f"{rec.rule.field!r} never takes the values {', '.join(rec.rule.values)})")
    stops = []
    for n, te in enumerate(edges, start=1):
        label = f"{rec.name}#{n}"
        k = int(np.searchsorted(t, te, side="right")) - 1
        if k < 0:
            raise RecordingError(f"{rec.name}: stop {n} (trigger at {te:.3f} s): no joint state before the trigger")
        q0, v0, q0_sigma, v0_sigma, correlation = state_at_trigger(t, q, v if has_v else None, k, te,
                                                                   window=pre_window)
        try:
            q0, v0 = state_within_limits(robot, q0, v0, q0_sigma, v0_sigma)
            check_stop_state(robot, configuration_of(robot, q0), v0, "q0", "v0")
        except StopInputError as err:
            raise RecordingError(f"{rec.name}: stop {n} (trigger at {te:.3f} s): the state at the trigger: {err} (the "
                                 "recording and the model disagree: an encoder offset, or limits that are not the "
                                 "robot's?)") from None
        nxt = edges[n] if n < edges.size else math.inf
        first = int(np.searchsorted(t, te, side="right"))  # the first sample after the trigger
        before_next = int(np.searchsorted(t, nxt, side="left"))
        end = first_rest(t, q, first, before_next, rest_hold, tolerances)
        if end is None:
            gap, k_gap = widest_gap(t, first, before_next)
            if gap > REST_MAX_GAP_FRACTION * rest_hold:  # the samples stop while the arm moves: no rest is seen
                moving = [robot.joint_names[i] for i in np.flatnonzero(np.abs(v[k_gap]) > speeds_at_rest)] or ["?"]
                cause = (f"no rest before a gap of {gap:.3g} s in the joint states {t[k_gap] - te:.3g} s after the "
                         f"trigger (still moving before it: {', '.join(moving)}; the arm must be seen at rest for "
                         f"{rest_hold:g} s)")
            elif nxt < math.inf and t[-1] >= nxt:
                cause = "a new trigger came before the arm was at rest"
            else:
                moving = [robot.joint_names[i] for i in np.flatnonzero(np.abs(v[-1]) > speeds_at_rest)] or ["?"]
                cause = f"cut off by the end of the recording (still moving: {', '.join(moving)})"
            raise RecordingError(f"{rec.name}: stop {n} (trigger at {te:.3f} s): {cause}")
        last = int(np.searchsorted(t, t[end] + rest_hold, side="right")) - 1
        span = slice(first, last + 1)
        ts = t[span] - te
        speeds = v[span] if has_v else position_velocities(ts, q[span])  # the predictions' rule: see the docstring
        resting = speeds[end - first:]
        threshold = speeds_at_rest.copy()
        for group in (linear, ~linear):  # the noise of the joints of one unit (rad/s or m/s) sets their threshold
            if group.any() and resting.size:
                mine = resting[:, group]
                spread = 1.4826 * float(np.median(np.abs(mine - np.median(mine, axis=0))))
                threshold[group] = np.maximum(threshold[group], REST_SPEED_SIGMAS * spread)
        if not linear.any():
            threshold = float(threshold[0])  # one unit: one threshold, as the stop-time rule states it
        stops.append(RecordedStop(label, q0, v0, ts, q[span], settle_time(ts, speeds, threshold), float(te), q0_sigma,
                                  v0_sigma, threshold, timed_by_positions=not has_v,
                                  state_correlation=correlation))
    return stops
