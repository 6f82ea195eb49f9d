"""Honest continuous outputs of ``estop_predictor`` ("if the E-stop fired now"): the age rule, the gate that keeps
them out of an active stop, and the rate they actually reach. Plain Python (no rclpy), so every rule is
unit-testable.

* **Age.** A continuous value answers "if the E-stop fired now", so the age that matters is the age of its input
  state when it is published: ``publication instant - state stamp`` (node clock). It is published with the value
  and a value older than the E-stop's own limit (``max_start_state_age``: an E-stop prediction refuses a start
  state older than that) is published as ``success=false`` naming the age - never as a result.
* **No continuous output during a stop.** :class:`ContinuousGate` counts triggers. Continuous work takes a ticket
  before it starts; its outputs are published only under the gate's publication lock and only if no trigger came
  since the ticket and no stop is active when the publication begins. The trigger path records a trigger without
  waiting for that lock (an E-stop is never delayed by a continuous publication); every output of a stop is
  published only once no continuous publication is in progress. So a subscriber receives no continuous output
  after the first output of a stop, until the stop ends.
* **Rate.** :class:`RateMonitor` keeps the publication times of the last ``window`` seconds; diagnostics report the
  achieved rate and, when it falls short of the configured one, by how much and how long one evaluation takes.

Times in seconds: stamps and instants on the node clock, rate windows on a monotonic clock.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from typing import Callable, Iterator

#: The achieved rate may fall this far below the configured one before diagnostics call it a shortfall.
RATE_TOLERANCE = 0.9


def input_age(now: float, stamp: float) -> float:
    """Age [s] at ``now`` of an input stamped ``stamp`` (negative: stamped ahead of the node clock)."""
    return float(now) - float(stamp)


def stale_reason(age: float, max_age: float, future_tolerance: float) -> str:
    """Why a continuous value of input age ``age`` must not be published as a result ('' if it may): older than
    ``max_age`` or stamped more than ``future_tolerance`` ahead of the clock - the limits of an E-stop start state."""
    if age > max_age:
        return (f"input state is {age:.3f} s old at publication (max_start_state_age {max_age:g} s, the E-stop's "
                "limit): no value")
    if -age > future_tolerance:
        return (f"input state is stamped {-age:.3f} s ahead of the node clock (future_stamp_tolerance "
                f"{future_tolerance:g} s): no value")
    return ""


class ContinuousGate:
    """Tickets for continuous work and the order of its publications against a stop's (module docstring).

    Two locks: a short one for the trigger count (taken by the trigger path to record a trigger, and by continuous
    work for a ticket or to check one), and the publication lock, held while continuous outputs are published. The
    trigger path never takes the publication lock, so a trigger is recorded at once even while a continuous
    publication is in progress; a stop's outputs wait for that publication instead (:meth:`after_continuous`),
    so every subscriber receives them after the last continuous output."""

    def __init__(self, stop_active: Callable[[], bool]) -> None:
        self._stop_active = stop_active
        self._count = threading.Lock()
        self._publication = threading.Lock()
        self._triggers = 0
        self.dropped = 0  # finished continuous work not published because a trigger came meanwhile

    def ticket(self) -> int | None:
        """A ticket for continuous work, or None while a stop is active (no work to do then)."""
        with self._count:
            return None if self._stop_active() else self._triggers

    @contextlib.contextmanager
    def trigger(self) -> Iterator[None]:
        """Wrap the recording of a trigger: from here on no earlier ticket starts a publication. Never waits for a
        continuous publication in progress."""
        with self._count:
            self._triggers += 1
            yield

    @contextlib.contextmanager
    def publishing(self, ticket: int) -> Iterator[bool]:
        """Hold the publication lock while publishing; yields whether the work of ``ticket`` may still be published
        (no trigger since the ticket, no stop active)."""
        with self._publication:
            with self._count:
                ok = ticket == self._triggers and not self._stop_active()
                if not ok:
                    self.dropped += 1
            yield ok

    def after_continuous(self) -> None:
        """Return once no continuous publication is in progress: called before each output of a stop, so that a
        publication begun before the trigger was recorded ends first (none begins after it)."""
        with self._publication:
            pass


class RateMonitor:
    """Publication times of the last ``window`` seconds (monotonic clock) and the time one evaluation took."""

    def __init__(self, window: float = 2.0, clock: Callable[[], float] | None = None) -> None:
        import time

        self.window = float(window)
        self.clock = clock or time.monotonic
        self._times: deque[float] = deque()
        self._started = self.clock()
        self.last_seconds = float("nan")  # [s] wall time of the last evaluation

    def restart(self) -> None:
        """Judge the rate afresh from now (after a stop, during which nothing continuous runs)."""
        self._times.clear()
        self._started = self.clock()

    def record(self, seconds: float) -> None:
        now = self.clock()
        self._times.append(now)
        self.last_seconds = float(seconds)
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self._times and self._times[0] < now - self.window:
            self._times.popleft()

    def achieved(self) -> float:
        """Publications per second over the window (over the time since start while that is shorter)."""
        now = self.clock()
        self._trim(now)
        span = min(self.window, max(now - self._started, 1e-9))
        return len(self._times) / span

    def shortfall(self, configured: float) -> str:
        """'' when the achieved rate meets ``configured`` [Hz] (within ``RATE_TOLERANCE``), else the text for
        diagnostics. Only judged once a whole window has passed."""
        if configured <= 0 or self.clock() - self._started < self.window:
            return ""
        achieved = self.achieved()
        if achieved >= RATE_TOLERANCE * configured:
            return ""
        cost = f"; one evaluation takes {1e3 * self.last_seconds:.0f} ms" if self.last_seconds == self.last_seconds \
            else ""
        return f"continuous outputs at {achieved:.1f} Hz, below continuous_rate {configured:g} Hz{cost}"
