"""The largest speed scaling of a trajectory for which every predicted stop ends clear, by bisection on the check.

Re-timing by a scaling s keeps the path and multiplies velocities by s (times / s, accelerations x s^2,
:meth:`.trajectory.PlannedTrajectory.retimed`). The predicate "every E-stop of the re-timed trajectory stays at
least the margin clear" is decided by the full check (predicted stops with brakes and locks, Müller 2026,
eqs. (3) and (22), swept against the scene), not by a kinematic stopping-distance bound. Bisection assumes the
predicate is monotone in s (slower is never worse); nothing guarantees it (a slower stop can end in another place),
so the search records every trial, checks afterwards that the trials below the result are safe and those above
unsafe at a few extra scalings (``monotone``), and re-runs the full check on the trajectory re-timed at the result
(``recheck``), which must pass. Optionally one scaling per segment (between two points): all segments are
bisected together, each by whether the samples inside it are safe; the result is re-checked as one trajectory
and the segments that fail there are lowered until it passes. Units: dimensionless scalings, m.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from vtm_dynamics.core.stopsafe.check import TrajectoryChecker
from vtm_dynamics.core.stopsafe.results import ScalingTrial, SpeedScaling, TrajectoryCheck
from vtm_dynamics.core.stopsafe.trajectory import PlannedTrajectory, TrajectoryError, velocity_headroom

MAX_SCALING = 10.0
MONOTONE_PROBES = (0.25, 0.5, 0.75)  # fractions of the result checked again for monotonicity


def _trial(checker: TrajectoryChecker, trajectory: PlannedTrajectory, s: float, first: np.ndarray | None,
           **hooks) -> tuple[ScalingTrial, TrajectoryCheck]:
    result = checker.check(trajectory.retimed(s), stop_at_unsafe=True, first_phases=first, **hooks)
    if result.complete:
        cert = result.min_certified_clearance
    else:  # stopped at an unsafe batch: the instants checked are not a sampling, so no bound between them
        cert = float(np.min(result.column("clearance") - result.column("resolution")))
    return ScalingTrial(s, result.safe, cert, result.complete), result


def _failure_phases(result: TrajectoryCheck) -> np.ndarray | None:
    bad = [x.time for x in result.samples if not x.safe]
    if not bad or result.trajectory_duration <= 0:
        return None
    t0 = result.samples[0].time if result.samples else 0.0
    return (np.array(bad) - min(t0, min(bad))) / result.trajectory_duration


def largest_speed_scaling(checker: TrajectoryChecker, trajectory: PlannedTrajectory, *, max_scaling: float = 1.0,
                          min_scaling: float = 0.02, tolerance: float = 0.01, per_segment: bool = False,
                          cancel: Callable[[], bool] | None = None, deadline: float | None = None,
                          progress: Callable[[str], None] | None = None) -> SpeedScaling:
    """Bisection on the check for the largest safe uniform scaling in [``min_scaling``, min(``max_scaling``,
    velocity limits)] to a relative ``tolerance``; then the monotonicity probes and the re-check (module
    docstring); with ``per_segment`` also one scaling per segment, each at least the uniform one."""
    if not (math.isfinite(max_scaling) and 0 < min_scaling < max_scaling <= MAX_SCALING):
        raise TrajectoryError(f"scaling: expected 0 < min_scaling < max_scaling <= {MAX_SCALING:g}, got "
                              f"{min_scaling!r}, {max_scaling!r}")
    if not (math.isfinite(tolerance) and 1e-4 <= tolerance <= 0.5):
        raise TrajectoryError(f"scaling.tolerance: expected 1e-4..0.5, got {tolerance!r}")
    hooks = {"cancel": cancel, "deadline": deadline}
    say = progress or (lambda text: None)
    upper = min(max_scaling, velocity_headroom(checker.setup.robot, trajectory))
    trials: list[ScalingTrial] = []
    first = None

    def trial(s: float) -> bool:
        nonlocal first
        t, result = _trial(checker, trajectory, s, first, **hooks)
        trials.append(t)
        first = _failure_phases(result) if not t.safe else first
        say(f"scaling {s:.4f}: {'safe' if t.safe else 'unsafe'}")
        return t.safe

    if trial(upper):
        lo = upper
    else:
        lo, hi, confirmed = min_scaling, upper, False
        while hi - lo > tolerance * hi:
            mid = 0.5 * (lo + hi)
            if trial(mid):
                lo, confirmed = mid, True
            else:
                hi = mid
        if not confirmed and not trial(min_scaling):
            lo = 0.0
    recheck = None
    if lo > 0:
        for f in MONOTONE_PROBES:
            if not any(abs(t.scaling - f * lo) <= 1e-12 for t in trials) and f * lo >= min_scaling:
                trial(f * lo)
        say(f"re-check at {lo:.4f}")
        recheck = checker.check(trajectory.retimed(lo), **hooks)
    monotone = _monotone(trials)
    segments, segment_check = None, None
    if per_segment and lo > 0:
        segments, segment_check = per_segment_scalings(checker, trajectory, lo, upper, tolerance, progress=say,
                                                       **hooks)
    return SpeedScaling(scaling=lo, upper_limit=upper, tolerance=tolerance, trials=tuple(trials), monotone=monotone,
                        recheck=recheck, per_segment=segments, per_segment_recheck=segment_check)


def _monotone(trials: list[ScalingTrial]) -> bool:
    """Every safe trial lies below every unsafe one."""
    safe = [t.scaling for t in trials if t.safe]
    unsafe = [t.scaling for t in trials if not t.safe]
    return not safe or not unsafe or max(safe) < min(unsafe)


def _segment_safety(result: TrajectoryCheck, trajectory: PlannedTrajectory) -> np.ndarray:
    """Per segment of ``trajectory`` (as re-timed in ``result``): whether every sample inside it is safe."""
    ok = np.ones(trajectory.n_points - 1, dtype=bool)
    times = result.times
    if len(times) == 0:
        return ok
    seg = trajectory.segment_of(times)
    for k, x in zip(seg, result.samples):
        if not x.safe:
            ok[k] = False
            # a sample on a point also speaks for the segment before it
            if k > 0 and abs(x.time - trajectory.time_from_start[k]) < 1e-12:
                ok[k - 1] = False
    return ok


def per_segment_scalings(checker: TrajectoryChecker, trajectory: PlannedTrajectory, uniform: float, upper: float,
                         tolerance: float = 0.01, *, cancel: Callable[[], bool] | None = None,
                         deadline: float | None = None,
                         progress: Callable[[str], None] | None = None) -> tuple[np.ndarray, TrajectoryCheck]:
    """One scaling per segment in [``uniform``, ``upper``] (module docstring): every segment bisected at once by
    whether the samples inside it are safe, then the re-check as one trajectory with failing segments lowered
    towards ``uniform`` (the safe uniform scaling) until it passes. Returns (scalings, the final check)."""
    hooks = {"cancel": cancel, "deadline": deadline}
    say = progress or (lambda text: None)
    n = trajectory.n_points - 1
    lo = np.full(n, uniform)
    hi = np.full(n, upper)

    def safe_segments(scales: np.ndarray) -> tuple[np.ndarray, TrajectoryCheck | None]:
        """Which segments are safe at ``scales``, and the check; none, and no check, when the re-timed trajectory
        leaves a velocity or position limit (a point's velocity takes the smaller scaling of its two segments, so
        a faster neighbour's cubic can exceed s_k times its old speed inside: such scalings are not taken)."""
        retimed = trajectory.retimed_per_segment(scales)
        try:
            result = checker.check(retimed, **hooks)
        except TrajectoryError:
            return np.zeros(n, dtype=bool), None
        return _segment_safety(result, retimed), result

    # segments already safe at the upper limit need no bisection
    while np.any(hi - lo > tolerance * hi):
        mid = np.where(hi - lo > tolerance * hi, 0.5 * (lo + hi), lo)
        ok, _ = safe_segments(mid)
        lo = np.where(ok, mid, lo)
        hi = np.where(ok | (mid == lo), hi, mid)
        say(f"per segment: {int(np.sum(hi - lo > tolerance * hi))} segments still open")
    scales = np.where(safe_segments(hi)[0], hi, lo)
    for _ in range(8):  # the re-check as one trajectory; lower the segments that fail there
        ok, result = safe_segments(scales)
        if result is not None and result.safe:
            return scales, result
        bad = ~ok & (scales > uniform)
        if not bad.any():
            break
        scales = np.where(bad, uniform + 0.5 * (scales - uniform), scales)
    scales = np.full(n, uniform)
    retimed = trajectory.retimed_per_segment(scales)
    return scales, checker.check(retimed, **hooks)
