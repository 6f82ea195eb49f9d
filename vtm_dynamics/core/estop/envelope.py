"""Uncertainty envelope of an emergency stop: the same stop over brake-torque tolerances, engage delays and payloads.

Brake torques scatter (wear, temperature, burnishing), delays vary with the brake electronics, and the payload is
often only known as "up to m_max". The envelope predicts the same stop (:func:`estop.predict_stop`, Müller 2026,
eqs. (3) and (22) with brakes) for every corner of the box
[torque_factor_min, torque_factor_max] x [delay_factor_min, delay_factor_max] x [payload_min, payload_max]
plus ``n_random`` uniformly drawn interior samples (seeded), and the nominal case, and reports the worst and best
stopping distance and time. The corners are included because stopping distance is usually monotone in each
factor (weaker brakes, longer delays, heavier payloads stop later), but the random samples guard against the cases
where it is not (a heavier payload can change which joints stick first). It is a sampled envelope, not a bound.

A case whose stop carries a joint past its position limit (:mod:`.limit_crossings`: the model has no end stops)
or that does not come to rest within the horizon is not a stop the robot can make: its distance and time are not
stopping figures. Such a case ranks as worse than every valid case (worst distance and worst time), the envelope
is then not ``valid``, and :meth:`StopEnvelope.invalid_text` names the cases and the joints.

Payload: a point mass at ``payload_frame`` (:func:`payload.with_payload`) added to ``robot``; the range is the total
payload, so pass the robot without its payload (else it is counted twice). Units: factors dimensionless, kg, s, m.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from vtm_dynamics.core.estop.batch import BatchStopError, predict_stops
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop import CategoryOne, LockEvent, StopInputError, StopSettings, check_stop_state
from vtm_dynamics.core.estop.defaults import (
    CATEGORY, ENVELOPE_DELAY_FACTOR, ENVELOPE_TORQUE_FACTOR, MAX_ENVELOPE_FACTOR, MAX_PAYLOAD,
)
from vtm_dynamics.core.robot.model import RobotModel


@dataclass(frozen=True)
class EnvelopeSpec:
    """Ranges (min, max): ``torque_factor`` on sliding/holding/viscous torques, ``delay_factor`` on engage delays,
    ``payload`` [kg] at ``payload_frame``; ``n_random`` extra uniform samples with ``seed``."""

    torque_factor: tuple[float, float] = ENVELOPE_TORQUE_FACTOR
    delay_factor: tuple[float, float] = ENVELOPE_DELAY_FACTOR
    payload: tuple[float, float] = (0.0, 0.0)
    payload_frame: str | None = None
    n_random: int = 0
    seed: int = 0


@dataclass(frozen=True)
class EnvelopeCase:
    """One sample: its factors, and the predicted ``stop_time`` [s], ``tcp_straight_distance`` / ``tcp_path_length``
    [m] (nan without a TCP frame), ``max_stopping_angle`` [rad] (largest |joint angle| travelled by a joint that
    turns; prismatic joints, whose travel is in m, are left out; nan if none turns), ``stopped``, and the
    ``limit_crossings`` of its stop (one line per joint carried past its position limit)."""

    torque_factor: float
    delay_factor: float
    payload: float
    stop_time: float
    tcp_straight_distance: float
    tcp_path_length: float
    max_stopping_angle: float
    stopping_angles: np.ndarray
    stopped: bool
    limit_crossings: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        """Whether this case is a stop the robot can make: at rest within the horizon, no joint past its limit."""
        return self.stopped and not self.limit_crossings

    def label(self) -> str:
        """The factors of this case in one short text."""
        return f"torque x{self.torque_factor:.3g}, delay x{self.delay_factor:.3g}, payload {self.payload:.3g} kg"


@dataclass(frozen=True)
class StopEnvelope:
    """All cases plus the extremes: ``worst_distance``/``best_distance`` (by TCP straight-line distance, or by the
    largest joint stopping angle without a TCP frame), ``worst_time``/``best_time`` (by stop time; a case that does
    not stop within the horizon counts as worst), and the ``nominal`` case (factors 1, payload at its minimum).
    A case that is not ``valid`` (not stopped, or past a joint limit) ranks above every valid case for both worst
    values and below them for both best values: the worst values are then not stopping figures (``valid`` False)."""

    cases: tuple[EnvelopeCase, ...]
    nominal: EnvelopeCase
    worst_distance: EnvelopeCase
    best_distance: EnvelopeCase
    worst_time: EnvelopeCase
    best_time: EnvelopeCase
    tcp_frame: str | None

    @property
    def valid(self) -> bool:
        """Whether every case is a stop the robot can make (then the worst values are stopping figures)."""
        return all(c.valid for c in self.cases)

    @property
    def crossed(self) -> tuple[EnvelopeCase, ...]:
        """The cases whose stop carries a joint past its position limit."""
        return tuple(c for c in self.cases if c.limit_crossings)

    def invalid_text(self) -> str:
        """Why the worst values are not stopping figures, in one line ("" when ``valid``): how many cases did not
        stop and how many crossed a joint limit, with the joints of the first crossing case."""
        late = sum(not c.stopped for c in self.cases)
        crossed = self.crossed
        parts = [f"{late} of {len(self.cases)} cases not at rest within the horizon"] if late else []
        if crossed:
            parts.append(f"{len(crossed)} of {len(self.cases)} cases past a joint limit (no end stops in the model), "
                         f"e.g. {crossed[0].label()}: " + "; ".join(crossed[0].limit_crossings))
        return "; ".join(parts)


def _range(x: Iterable[float], name: str, upper: float, lower: float = 0.0) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in x)
    except (TypeError, ValueError):
        raise StopInputError(f"envelope.{name}: expected (min, max)") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lower <= lo <= hi <= upper):
        raise StopInputError(f"envelope.{name}: expected {lower:g} <= min <= max <= {upper:g}, got ({lo:g}, {hi:g})")
    return lo, hi


def envelope_samples(spec: EnvelopeSpec) -> list[tuple[float, float, float]]:
    """(torque_factor, delay_factor, payload) of every case: nominal first, then the corners, then random."""
    tf = _range(spec.torque_factor, "torque_factor", MAX_ENVELOPE_FACTOR)
    df = _range(spec.delay_factor, "delay_factor", MAX_ENVELOPE_FACTOR)
    pl = _range(spec.payload, "payload", MAX_PAYLOAD)
    if spec.n_random < 0:
        raise StopInputError(f"envelope.n_random: must be >= 0, got {spec.n_random}")
    nominal = (min(max(1.0, tf[0]), tf[1]), min(max(1.0, df[0]), df[1]), pl[0])
    out = [nominal]
    for c in itertools.product(sorted(set(tf)), sorted(set(df)), sorted(set(pl))):
        if c not in out:
            out.append(c)
    rng = np.random.default_rng(spec.seed)
    for _ in range(spec.n_random):
        out.append((float(rng.uniform(*tf)), float(rng.uniform(*df)), float(rng.uniform(*pl))))
    return out


def stop_envelope(
    robot: RobotModel,
    brakes: BrakeSet,
    q: object,
    v: object,
    spec: EnvelopeSpec = EnvelopeSpec(),
    *,
    category: int = CATEGORY,
    category_one: CategoryOne | None = None,
    lock_events: Iterable[LockEvent] = (),
    tcp_frame: str | None = None,
    settings: StopSettings = StopSettings(),
    progress: Callable[[int, int], None] | None = None,
) -> StopEnvelope:
    """Predict the stop for every sample of ``spec`` (see the module docstring) in one batch
    (:func:`.batch.predict_stops`: the payload models and scaled brakes are built once); ``progress(done, total)``
    is called after each case. ``category``, ``category_one`` (the category-1 ramp: deceleration [rad/s^2], torque
    limits [N m], power-off time [s]; None: :class:`CategoryOne`'s defaults), ``lock_events``, ``tcp_frame`` and
    ``settings`` are those of :func:`predict_stop` and apply to every case, so the nominal case is the single
    prediction made with them."""
    samples = envelope_samples(spec)
    if spec.payload[1] > 0 and spec.payload_frame is None:
        raise StopInputError("envelope.payload_frame: a frame is needed to attach a payload")
    check_stop_state(robot, q, v)
    linear = [j.name for j in robot.joints if j.prismatic]
    if tcp_frame is None and linear:
        raise StopInputError(
            f"envelope.tcp_frame: needed to rank the stopping distances of {robot.name!r}: its prismatic joint "
            f"{linear[0]!r} travels in m, the others turn in rad (give the TCP frame)")
    turns = np.array([not j.prismatic for j in robot.joints])
    n = len(samples)
    try:
        predictions = predict_stops(
            robot, brakes, [q] * n, [v] * n, payloads=[m for _, _, m in samples],
            torque_factors=[tf for tf, _, _ in samples], delay_factors=[df for _, df, _ in samples],
            payload_frame=spec.payload_frame, category=category, category_one=category_one,
            lock_events=tuple(lock_events),
            tcp_frame=tcp_frame, settings=settings, progress=progress)
    except BatchStopError as err:  # the cases share the state: report the cause as a single prediction would
        raise err.__cause__ if isinstance(err.__cause__, StopInputError) else err
    cases = []
    for (tf, df, m), p in zip(samples, predictions):
        cases.append(EnvelopeCase(
            torque_factor=tf, delay_factor=df, payload=m, stop_time=p.stop_time,
            tcp_straight_distance=p.tcp_straight_distance, tcp_path_length=p.tcp_path_length,
            max_stopping_angle=float(np.max(np.abs(p.stopping_angles[turns]))) if turns.any() else math.nan,
            stopping_angles=p.stopping_angles,
            stopped=p.stopped, limit_crossings=tuple(p.limit_crossings),
        ))

    def dist(c: EnvelopeCase) -> tuple[bool, float]:  # an invalid case ranks above (worst) every valid one
        return not c.valid, c.tcp_straight_distance if tcp_frame is not None else c.max_stopping_angle

    def time(c: EnvelopeCase) -> tuple[bool, float]:
        return not c.valid, c.stop_time if c.stopped else math.inf

    return StopEnvelope(
        cases=tuple(cases), nominal=cases[0], worst_distance=max(cases, key=dist), best_distance=min(cases, key=dist),
        worst_time=max(cases, key=time), best_time=min(cases, key=time), tcp_frame=tcp_frame,
    )
