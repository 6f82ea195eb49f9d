"""Results of a trajectory check and of a speed-scaling search (frozen dataclasses, SI units).

A sample is one E-stop instant of the trajectory (:mod:`.sampling`) with the stops predicted from it over every
case (:mod:`.stop_cases`) and their sweep (:mod:`.sweep`). Its *certified* clearance is
``clearance - resolution - sampling_bound``: no stop from the instants this sample stands for (those nearer to it
than to its neighbours) comes closer than that to the scene (Müller 2026, Sec. 1: every stop along the motion must
end clear). A sample is safe when its certified clearances reach the margins and every case stopped within the
joints' position limits: the braked dynamics have no end stops, so a stop that carries a joint past its limit
(:mod:`vtm_dynamics.core.estop.limit_crossings`) is not a motion the robot can make, whatever its clearance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from vtm_dynamics.core.estop import StopPrediction


@dataclass(frozen=True)
class SampleResult:
    """One E-stop instant: ``time`` [s] on the trajectory, the state ``q`` [rad] and ``v`` [rad/s] (model order),
    ``stop_time`` [s] (longest over the cases; the horizon for a case that did not stop), ``tcp_distance`` [m]
    (largest straight-line TCP travel), ``stopped`` (every case came to rest), and for the scene and the robot's
    own parts: the smallest distance during the stops (``clearance``, ``self_clearance`` [m]), its ``resolution``
    within the stops, the ``sampling_bound`` to the instants it stands for, the closest ``pair`` / ``self_pair``,
    the ``case`` (index into the cases) and ``stop_instant`` [s] into that stop. ``safe`` and ``reason``;
    ``limit_crossings``: the joints the first case to cross a position limit carries past it, one line each with
    how far (:func:`vtm_dynamics.core.estop.limit_crossings.limit_crossings`; () when no case does: then the sample
    is not safe and ``reason`` names the case)."""

    index: int
    time: float
    q: np.ndarray
    v: np.ndarray
    stop_time: float
    tcp_distance: float
    stopped: bool
    clearance: float
    resolution: float
    sampling_bound: float
    pair: tuple[str, str]
    case: int
    stop_instant: float
    self_clearance: float
    self_resolution: float
    self_sampling_bound: float
    self_pair: tuple[str, str]
    safe: bool
    reason: str
    limit_crossings: tuple[str, ...] = ()

    @property
    def certified_clearance(self) -> float:
        """[m] clearance - resolution - sampling bound (inf without obstacles)."""
        return self.clearance - self.resolution - self.sampling_bound

    @property
    def certified_self_clearance(self) -> float:
        return self.self_clearance - self.self_resolution - self.self_sampling_bound


@dataclass(frozen=True)
class WorstStop:
    """The stop with the smallest certified clearance, as data for plots and a 3-D viewer: the ``sample`` it
    starts from, every case's ``predictions`` (the closest one is ``case``), the closest ``pair``, the nearest
    ``points`` (2 x 3, world [m], robot first) at ``stop_instant`` [s] into the stop with configuration ``q_at``,
    and the robot-side witness point ``witness_local`` (3) in the frame of ``witness_joint`` (Pinocchio joint id)
    to follow it along the stop."""

    sample: SampleResult
    predictions: tuple[StopPrediction, ...]
    case: int
    pair: tuple[str, str]
    points: np.ndarray
    stop_instant: float
    q_at: np.ndarray | None
    kind: str = "scene"


@dataclass(frozen=True)
class TrajectoryCheck:
    """A checked trajectory: ``samples`` in time order, ``safe`` (every sample safe), ``first_unsafe`` (the
    earliest unsafe sample or None), ``worst`` (:class:`WorstStop` of the smallest certified scene or self
    clearance), the ``margin`` and ``self_margin`` [m], the ``cases`` labels, sampling diagnostics
    (``tolerance`` [m] asked for, None with a fixed rate; ``max_sampling_bound`` [m] reached;
    ``intervals_over_tolerance``; ``suspect_intervals``: neighbours whose clearances differ by more than the
    bound allows, left after refinement; ``rounds``), counts (``n_stops`` predicted, ``exact_calls``) and
    ``complete`` (False when the check stopped at the first unsafe sample)."""

    joint_names: tuple[str, ...]
    samples: tuple[SampleResult, ...]
    safe: bool
    first_unsafe: SampleResult | None
    worst: WorstStop | None
    margin: float
    self_margin: float
    cases: tuple[str, ...]
    tolerance: float | None
    max_sampling_bound: float
    intervals_over_tolerance: int
    suspect_intervals: int
    rounds: int
    n_stops: int
    exact_calls: int
    complete: bool = True
    trajectory_duration: float = math.nan

    @property
    def times(self) -> np.ndarray:
        return np.array([s.time for s in self.samples])

    def column(self, name: str) -> np.ndarray:
        """One field of every sample as an array (e.g. ``clearance``, ``certified_clearance``)."""
        return np.array([getattr(s, name) for s in self.samples], dtype=float)

    @property
    def min_certified_clearance(self) -> float:
        return float(np.min(self.column("certified_clearance"))) if self.samples else math.nan


@dataclass(frozen=True)
class ScalingTrial:
    """One evaluated speed scaling: ``scaling``, ``safe``, the smallest certified scene clearance
    ``min_certified_clearance`` [m] (a check that stopped at its first unsafe batch, ``complete`` False, gives the
    smallest clearance minus resolution of the instants it checked instead)."""

    scaling: float
    safe: bool
    min_certified_clearance: float
    complete: bool


@dataclass(frozen=True)
class SpeedScaling:
    """The largest speed scaling found by bisection on the prediction: ``scaling`` (0 when even the slowest tried
    is unsafe), ``upper_limit`` (the largest allowed: the caller's cap and the velocity limits), ``trials`` in the
    order evaluated, ``monotone`` (every trial below a safe scaling safe, every trial above an unsafe one unsafe),
    ``recheck`` (the full check of the trajectory re-timed at ``scaling``), ``per_segment`` (one scaling per
    segment, optional) with its ``per_segment_recheck``."""

    scaling: float
    upper_limit: float
    tolerance: float
    trials: tuple[ScalingTrial, ...]
    monotone: bool
    recheck: TrajectoryCheck | None
    per_segment: np.ndarray | None = field(default=None)
    per_segment_recheck: TrajectoryCheck | None = None
