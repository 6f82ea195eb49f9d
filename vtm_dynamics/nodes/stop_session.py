"""The stop-session state machine of ``estop_predictor``: the E-stop line, stops and their revisions, and the
honest choice of the start state. Plain Python (no rclpy, no messages), so every rule is unit-testable.

E-stop line with several publishers (``estop``): :mod:`.estop_line` (re-exported here). The line is *stopping*
  while some publisher holds it (its latest value is true); a rising edge of any publisher fires a trigger. The stop
  ends (the session re-arms) when the line is released by its holders (it was stopping and now none holds it), or
  on a brake RELEASE; a ``false`` while the line was not stopping is no release (it does not end a stop that a
  brake event started).

Stops and revisions
  A trigger while no stop is active, or while the active stop's latest prediction failed, starts a new stop
  (``estop-<n>``); otherwise it joins the active stop (counted, nothing is lost: an ENGAGE bringing new brake values
  revises the prediction). Revisions (``estop-<n>-rev<k>``) are *merged*: while a prediction runs, further changes
  only mark the stop dirty, and the next prediction uses the newest inputs. ``revision`` counts the predictions
  published for a stop (0 first). When a stop ends, its last prediction is republished with ``final = true``: the
  final revision is the one that stood when the stop ended.

Start state
  * Unstamped trigger (Bool): the newest complete state *received before the trigger was received* (receipt
    order, not callback order), its age being the trigger instant minus the state's stamp.
  * Stamped trigger (BrakeEvent stamp = the E-stop instant): the newest state whose every value holds at or before
    the instant (its newest joint value, ``StateSample.until``, at or before it: after the instant the arm is
    already braking, and a later value predicts a stop too short). A state merged from publishers of different
    rates (arm 500 Hz, a moving gripper 50 Hz) is stamped with its oldest moving value while its arm values may be
    20 ms newer: choosing by that stamp took arm values from after the E-stop. If no value has reached the instant
    yet, wait at most ``state_wait_timeout`` for one (once one has, no state of values all at or before it can
    come: each joint's value only gets newer). If none holds only earlier values, the earliest state after the
    instant is taken and its age is instant - its newest value (negative). A state stamped closer to the instant
    that arrives after the prediction (the wait timed out) revises the stop from that state.
  * Age of a start state (``start_state_age``): trigger instant - the state's stamp, the instant of its oldest
    moving joint value (``start_state_stamp``); for a stamped trigger every value used then lies between
    ``start_state_stamp`` and the instant. Negative only when no state before the instant was held (above).
  * Refused (``success=false`` with the reason): no state; a state older than ``max_start_state_age`` or newer
    than ``future_stamp_tolerance`` relative to the trigger instant; a trigger stamped in the future beyond
    ``future_stamp_tolerance`` relative to the node clock.

Times: stamps and instants in seconds of the node clock (ROS time); receipt times in seconds of the receipt clock
(one clock for all inputs of a node).

Size: about 450 lines: the E-stop line, the stops with their revisions and the start-state choice are one state
machine whose rules refer to each other (a trigger joins or starts a stop, a release ends it and republishes its
last revision, a late state revises it); the docstring states every rule.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping

from vtm_dynamics.nodes.estop_line import EstopLine  # noqa: F401 - re-exported: part of the stop rules

STAMP_TOL = 2e-6  # [s] stamps as float seconds since 1970 resolve about 0.24 us
# [s] a late state revises a stop only if it is at least this much closer to the instant than the state used, and
# at most half as old: a publisher feeding ever-closer stamps causes at most log2(10 s / 1 ms) ~ 14 revisions
CLOSER_STATE_MIN = 1e-3


# ------------------------------------------------------------------------------------------------- joint states
@dataclass(frozen=True)
class StateSample:
    """One complete joint state: ``stamp`` [s] (header, node clock), ``received`` [s] (receipt clock), the
    node's snapshot ``state``, the joints whose velocity was estimated rather than measured, and the exact header
    stamp (``header_stamp``, the message object; float seconds lose nanoseconds). ``unstamped``: the message had
    a zero stamp (``stamp`` is then its receipt instant). ``unavailable``: joints whose velocity was neither measured
    nor estimable (no velocities and no usable stamps); a prediction must not start from such a state. ``shared``:
    the reason no prediction may start from it either, when two publishers merged values of one of its joints
    within ``state_intake.SHARED_WINDOW`` ('' otherwise). ``latest`` [s]: the instant of its newest joint value
    (NaN: the same as ``stamp``; see :attr:`until`)."""

    stamp: float
    received: float
    state: Any
    estimated: tuple[str, ...] = ()
    header_stamp: Any = None
    unstamped: bool = False
    unavailable: tuple[str, ...] = ()
    shared: str = ""  # why no prediction may start from it: its joints have two publishers ('' when not)
    latest: float = math.nan

    @property
    def until(self) -> float:
        """[s] the instant of the newest value it holds (node clock): none of its values is newer."""
        return self.stamp if math.isnan(self.latest) else self.latest


class StateHistory:
    """The last ``maxlen`` complete states in receipt order."""

    def __init__(self, maxlen: int = 400) -> None:
        self._items: deque[StateSample] = deque(maxlen=int(maxlen))

    def add(self, sample: StateSample) -> None:
        self._items.append(sample)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def newest(self) -> StateSample | None:
        return self._items[-1] if self._items else None

    def received_by(self, t: float) -> StateSample | None:
        """The newest state received at or before ``t`` (receipt clock)."""
        for s in reversed(self._items):  # bounded by maxlen; usually the first or second
            if s.received <= t:
                return s
        return None

    def stamped_by(self, t: float) -> StateSample | None:
        """The newest state whose values all hold at or before ``t`` (+ a rounding tolerance): the newest
        ``until``, then the newest stamp (the latest received of equals)."""
        best = None
        for s in self._items:
            if s.until <= t + STAMP_TOL and (best is None or (s.until, s.stamp) >= (best.until, best.stamp)):
                best = s
        return best

    def first_after(self, t: float) -> StateSample | None:
        """The state holding a value after ``t`` whose newest value is the earliest."""
        best = None
        for s in self._items:
            if s.until > t + STAMP_TOL and (best is None or s.until < best.until):
                best = s
        return best


@dataclass(frozen=True)
class StartLimits:
    """``max_start_state_age`` [s], ``future_stamp_tolerance`` [s], ``state_wait_timeout`` [s]."""

    max_age: float = 0.05
    future_tolerance: float = 0.05
    wait_timeout: float = 0.05


@dataclass(frozen=True)
class StartChoice:
    """The start state for a prediction, or why there is none. ``wait``: ask again later (a stamped trigger whose
    instant no state has reached yet); ``age`` [s] = trigger instant - state stamp (negative: a newer state)."""

    sample: StateSample | None
    age: float = float("nan")
    reason: str = ""
    wait: bool = False

    @property
    def ok(self) -> bool:
        return self.sample is not None and not self.reason and not self.wait


def choose_start_state(history: StateHistory, *, instant: float, stamped: bool, received: float,
                       now: float, waited: float, limits: StartLimits,
                       at_receipt: StateSample | None = None) -> StartChoice:
    """Pick the start state of a trigger (see the module docstring).

    ``instant`` [s] trigger instant (node clock), ``stamped`` whether it came from a message stamp, ``received``
    [s] its receipt time (receipt clock), ``now`` [s] node clock, ``waited`` [s] since the trigger was received;
    ``at_receipt`` the state fixed for this trigger: captured when an unstamped trigger was received, or the one
    an earlier revision of the same stop used at the same instant (revisions keep their start state).
    """
    if stamped and instant > now + limits.future_tolerance:
        return StartChoice(None, reason=f"trigger stamp is {instant - now:.3f} s in the future "
                                        f"(future_stamp_tolerance {limits.future_tolerance:g} s)")
    if at_receipt is not None:  # fixed at receipt (Bool), or the state a stop's earlier revision used
        sample = at_receipt
    elif stamped:
        sample = history.stamped_by(instant)
        newest = history.newest()
        if (newest is None or newest.until < instant - STAMP_TOL) and waited < limits.wait_timeout:
            return StartChoice(sample, wait=True)
        if sample is None:
            sample = history.first_after(instant)
    else:
        sample = history.received_by(received)
    if sample is None:
        return StartChoice(None, reason="no complete joint state received before the trigger")
    if sample.shared:
        return StartChoice(sample, instant - sample.stamp, sample.shared)
    if sample.unavailable or (sample.estimated and sample.unstamped):
        joints = list(sample.unavailable or sample.estimated)[:6]
        why = "unstamped joint states (header.stamp zero)" if sample.unstamped else \
            "the joint states (stamps zero, not advancing, or more than max_start_state_age apart)"
        return StartChoice(sample, instant - sample.stamp, f"velocity: not measured for {joints} and not estimable "
                                                           f"from {why}")
    age = instant - sample.stamp
    if age > limits.max_age:
        return StartChoice(sample, age, f"start state is {age:.3f} s older than the trigger instant "
                                        f"(max_start_state_age {limits.max_age:g} s)")
    if stamped and at_receipt is None and sample.until > instant + STAMP_TOL:  # no state before the instant
        age = instant - sample.until  # how far after the E-stop its newest value lies
        if -age > limits.future_tolerance:
            return StartChoice(sample, age, f"start state holds values stamped {-age:.3f} s after the trigger "
                                            f"instant (future_stamp_tolerance {limits.future_tolerance:g} s)")
    if -age > limits.future_tolerance:
        return StartChoice(sample, age, f"start state is stamped {-age:.3f} s after the trigger instant "
                                        f"(future_stamp_tolerance {limits.future_tolerance:g} s)")
    return StartChoice(sample, age)


# ------------------------------------------------------------------------------------------------- stops
@dataclass
class Stop:
    """An E-stop in progress. ``instant`` [s] node clock; ``received`` [s] receipt clock; ``wall`` [s] monotonic
    time of the trigger (latency reference); ``published`` predictions published so far; ``dirty`` a prediction
    with the current inputs is still due."""

    number: int
    instant: float
    stamped: bool
    received: float
    wall: float
    source: str
    overrides: dict = field(default_factory=dict)
    locks: list = field(default_factory=list)
    at_receipt: StateSample | None = None
    published: int = 0
    dirty: bool = True
    last_success: bool | None = None
    last_result: Any = None
    last_prediction: Any = None
    used_stamp: float | None = None
    used_sample: StateSample | None = None
    used_instant: float | None = None
    due_wall: float = 0.0  # monotonic time the due prediction was requested (revision latency reference)
    held_trigger: dict | None = None  # a trigger that joined while the first prediction was still unknown
    problem: str = ""  # an input of the trigger that makes any prediction untrustworthy (the reason)
    in_flight: int = 0  # jobs taken and not yet recorded
    deferred_locks: list = field(default_factory=list)  # locks that came before any result could judge them
    ended: bool = False

    @property
    def predicted(self) -> bool:
        return self.published > 0

    @property
    def revision(self) -> int:
        """Revision number of the newest published prediction."""
        return max(self.published - 1, 0)


@dataclass(frozen=True)
class StopJob:
    """An immutable request for the worker: predict ``stop`` revision ``revision`` with these inputs. ``wall`` [s]
    monotonic time this prediction was requested (the trigger for the first one, the change that made it due for a
    revision); ``trigger_wall`` [s] monotonic time of the stop's trigger, the same for all its revisions."""

    number: int
    revision: int
    instant: float
    stamped: bool
    received: float
    wall: float
    overrides: Mapping[str, Mapping[str, float]]
    locks: tuple
    at_receipt: StateSample | None
    problem: str = ""
    trigger_wall: float = float("nan")

    @property
    def scenario(self) -> str:
        return f"estop-{self.number}" + (f"-rev{self.revision}" if self.revision else "")


class StopSession:
    """Triggers, re-arming and revisions; thread-safe (the callbacks and the prediction worker share it)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.current: Stop | None = None
        self.closing: list[Stop] = []  # ended stops whose due or running prediction is still to be published
        self.count = 0
        self.triggers = 0  # every trigger edge / ENGAGE counted, including those joining an active stop

    def trigger(self, *, instant: float, stamped: bool, received: float, wall: float, source: str,
                overrides: Mapping[str, Mapping[str, float]] | None = None,
                at_receipt: StateSample | None = None, problem: str = "") -> tuple[str, Stop]:
        """A trigger: returns ('new' | 'joined' | 'revised', stop)."""
        with self.lock:
            self.triggers += 1
            stop = self.current
            if stop is None or stop.last_success is False:
                self.count += 1
                if stop is not None:
                    self._close(stop)
                self.current = Stop(self.count, instant, stamped, received, wall, source, dict(overrides or {}),
                                    at_receipt=at_receipt, due_wall=wall, problem=problem)
                return "new", self.current
            if stop.last_success is None:  # its outcome is unknown: keep this trigger in case that one fails
                stop.held_trigger = dict(instant=instant, stamped=stamped, received=received, wall=wall,
                                         source=source, overrides=dict(overrides or {}), at_receipt=at_receipt,
                                         problem=problem)
            changed = self._merge_overrides(stop, overrides or {})
            better_instant = stamped and not stop.stamped
            moved = better_instant and abs(stop.instant - instant) > STAMP_TOL
            if better_instant:  # a stamped ENGAGE gives the instant an unstamped trigger lacked: the start
                stop.instant, stop.stamped = instant, True  # state is then chosen by that stamp
                stop.at_receipt = None
            # revised when the start state may change, and when only the instant does: the published prediction
            # must name the E-stop instant, which listeners match it by
            if changed or moved or (better_instant and (stop.used_stamp is None
                                                        or abs(stop.used_stamp - instant) > STAMP_TOL)):
                self._mark_due(stop, wall)
                return "revised", stop
            return "joined", stop

    def closer_start_state(self, sample: StateSample, wall: float) -> Stop | None:
        """A joint state that arrived after a stamped stop was predicted, stamped at or before its instant, at most
        half as old as the state that prediction started from and at least ``CLOSER_STATE_MIN`` newer (the wait for
        it timed out: a loaded machine, a reordering middleware): the stop is revised from it (returns the stop), so
        that the prediction starts as close to the E-stop instant as the data allow. Unstamped (Bool) stops keep
        the receipt-order rule."""
        with self.lock:
            stop = self.current
            if (stop is None or not stop.stamped or stop.last_success is not True or stop.used_stamp is None
                    or stop.used_instant != stop.instant):
                return None
            if not (stop.used_stamp + CLOSER_STATE_MIN < sample.stamp and sample.until <= stop.instant + STAMP_TOL):
                return None
            if stop.instant - sample.stamp > 0.5 * (stop.instant - stop.used_stamp):
                return None
            stop.used_instant = None  # the revision chooses its start state by the stamp again
            self._mark_due(stop, wall)
            return stop

    def add_lock(self, lock: Any, wall: float) -> Stop | None:
        """A lock of joints still moving in the current prediction: revise (returns the stop)."""
        with self.lock:
            stop = self.current
            if stop is None:
                return None
            stop.locks.append(lock)
            self._mark_due(stop, wall)
            return stop

    def defer_lock(self, lock: Any) -> bool:
        """A lock during a stop whose prediction is not known yet: kept until a result can judge it."""
        with self.lock:
            stop = self.current
            if stop is None:
                return False
            stop.deferred_locks.append(lock)
            return True

    def take_deferred_locks(self, number: int) -> list:
        with self.lock:
            stop = self._find(number)
            if stop is None:
                return []
            locks, stop.deferred_locks = stop.deferred_locks, []
            return locks

    def rearm(self) -> tuple[Stop | None, bool]:
        """End the current stop (all publishers false, or brake RELEASE). Returns (the stop or None, whether its
        last prediction is to be republished as final now). A stop whose prediction is still due or running stays
        in ``closing``: that prediction is still made and published, marked final."""
        with self.lock:
            stop, self.current = self.current, None
            if stop is None:
                return None, False
            return stop, self._close(stop)

    def _close(self, stop: Stop) -> bool:
        stop.ended = True
        if stop.dirty or stop.in_flight:
            self.closing.append(stop)
            return False
        return stop.published > 0

    def is_current(self, number: int) -> bool:
        with self.lock:
            return self.current is not None and self.current.number == number

    def take_job(self) -> StopJob | None:
        """The due prediction of an ended stop first (oldest first), else of the current stop; or None."""
        with self.lock:
            for stop in self.closing + ([self.current] if self.current is not None else []):
                if stop.dirty:
                    stop.dirty = False
                    stop.in_flight += 1
                    fixed = stop.used_sample if stop.used_instant == stop.instant else None
                    return StopJob(stop.number, stop.published, stop.instant, stop.stamped, stop.received,
                                   stop.due_wall, {k: dict(v) for k, v in stop.overrides.items()}, tuple(stop.locks),
                                   fixed or stop.at_receipt, stop.problem, stop.wall)
            return None

    def put_back(self, job: StopJob) -> None:
        """The job must wait (its start state is not there yet): mark it due again."""
        with self.lock:
            stop = self._find(job.number)
            if stop is not None:
                stop.in_flight -= 1
                stop.dirty = True

    def _find(self, number: int) -> Stop | None:
        if self.current is not None and self.current.number == number:
            return self.current
        for stop in self.closing:
            if stop.number == number:
                return stop
        return None

    def record(self, job: StopJob, success: bool, result: Any, prediction: Any,
               used: StateSample | None = None) -> str:
        """Record a published prediction of ``job``. Returns 'current' (its stop goes on), 'final' (its stop has
        ended and this was its last prediction: it is the final one) or 'ended' (ended, more work is due).

        If the first prediction of a stop failed and another trigger joined the stop meanwhile, that trigger now
        starts a new stop of its own (a failed stop cannot be revised into a good one, and no trigger is lost)."""
        with self.lock:
            stop = self._find(job.number)
            if stop is None:
                return "ended"
            stop.in_flight -= 1
            if stop.ended:
                stop.published += 1
                stop.last_success, stop.last_result, stop.last_prediction = bool(success), result, prediction
                if not stop.dirty and not stop.in_flight:
                    self.closing.remove(stop)
                    return "final"
                return "ended"
            stop.published += 1
            stop.last_success = bool(success)
            stop.last_result = result
            stop.last_prediction = prediction
            if used is not None and success:
                stop.used_stamp, stop.used_sample, stop.used_instant = used.stamp, used, job.instant
            held, stop.held_trigger = stop.held_trigger, None
            if not success and held is not None:
                self.count += 1
                self._close(stop)
                self.current = Stop(self.count, held["instant"], held["stamped"], held["received"], held["wall"],
                                    held["source"], held["overrides"], at_receipt=held["at_receipt"],
                                    due_wall=held["wall"], problem=held["problem"])
            return "current"

    @property
    def active(self) -> bool:
        return self.current is not None

    @staticmethod
    def _merge_overrides(stop: Stop, overrides: Mapping[str, Mapping[str, float]]) -> bool:
        merged = {k: dict(v) for k, v in stop.overrides.items()}
        for joint, fields in overrides.items():
            merged.setdefault(joint, {}).update(fields)
        changed = merged != stop.overrides
        stop.overrides = merged
        return changed

    @staticmethod
    def _mark_due(stop: Stop, wall: float) -> None:
        if not stop.dirty:
            stop.due_wall = wall
        stop.dirty = True

