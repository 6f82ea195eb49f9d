"""The joint states of ``estop_predictor`` as they arrive: merged by name, checked, stamped, kept in receipt order.
Plain Python (no node, no executor): the node hands each message with its receipt time and logs what the receipt says.

* **Receipt clock.** Every input of the node is timed on one clock, the DDS reception stamp of its message info
  (:func:`receipt_time`; the wall clock when the middleware gives none). The node-clock instant of a receipt is
  *now* minus the time the message waited for its callback (:func:`instant_of_receipt`).
* **Checks.** A state stamped more than ``future_stamp_tolerance`` ahead of the node clock is rejected on receipt
  (its stamp would poison velocity estimates and start-state choices); a malformed one (NaN, mismatched lengths, an
  implausible position) is rejected by the tracker (``conversions.JointStateTracker``) with a one-line reason and
  nothing of it is merged. A zero stamp is replaced by the receipt instant (the message is *unstamped*). Velocities
  are estimated only from samples at most ``max_velocity_gap`` apart (the node's ``max_start_state_age``).
* **Several publishers.** A joint's value is replaced only by one that holds at or after it (the tracker's newest
  value per joint): a ``joint_state_publisher`` republishing every joint with older stamps changes nothing, and a
  message that changed no joint of the model (a gripper driver's finger joints only, or only older values) adds no
  state to the history. Should the node clock go back (a simulation restarted, ``/clock`` from 0), the held values
  are then ahead of it by more than ``future_stamp_tolerance``: the tracker and the history start afresh.
* **One publisher per joint.** A ``joint_state_publisher`` that restamps what it heard with its own clock has
  newer stamps than the driver and older positions: stamps cannot tell them apart. When two publishers (by their
  GID) merge values of the same joint within ``SHARED_WINDOW`` of each other, the states made then carry the reason
  (``StateSample.shared``) and no prediction starts from them (a refusal that names the joint), until one publisher
  has had the joint alone for ``SHARED_WINDOW``.
* **History.** Every complete state (each joint reported at least once) is kept as a ``StateSample`` in a history
  of ``length`` states in receipt order (``stop_session.StateHistory``), stamped with the OLDEST value of its
  MOVING joints (with several publishers on ``joint_states``, a silent one's joints are as old as its last message,
  and the age check of the start state must see that). A joint at rest (a gripper held still, reported at 50 Hz
  beside a 500 Hz arm) does not age the state unless its value is more than ``rest_hold`` (the node's
  ``max_start_state_age``) older than the moving joints' (``conversions.JointStateTracker``); before, every state
  between two gripper messages carried the gripper's older stamp. Each state also keeps the instant of its
  newest value (``StateSample.latest``): a stamped trigger's start state must hold no value from after the E-stop
  instant, and a moving gripper's older stamp says nothing about how new the arm's values are. The start state of a
  trigger is chosen from it (``stop_session.choose_start_state``). Without velocities in the message, velocities are estimated by the
  tracker and the sample says which joints were estimated or unavailable.

A new model resets the tracker and the history. Thread-safe: the callback thread writes, the workers read.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable

from vtm_dynamics.core.excerpt import excerpt, excerpt_list
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes import graph
from vtm_dynamics.nodes.conversions import JointStateError, JointStateTracker, stamp_to_seconds
from vtm_dynamics.nodes.stop_session import StartChoice, StartLimits, StateHistory, StateSample, choose_start_state


def receipt_time(info: Any, wall: Callable[[], float] = time.time) -> float:
    """Receipt time [s] of a message on the receipt clock: the DDS reception stamp of its message info (a dict),
    else ``wall()``."""
    try:
        ns = int(info.get("received_timestamp", 0)) if info else 0
    except (TypeError, ValueError, AttributeError):
        ns = 0
    return ns * 1e-9 if ns > 0 else wall()


def instant_of_receipt(received: float, now: float, wall: float) -> float:
    """The node-clock instant [s] of a receipt at ``received`` (receipt clock), given the node clock ``now`` and the
    receipt clock ``wall`` read together: now minus the time the message waited for its callback."""
    return now - max(0.0, wall - received)


def publisher_of(info: Any) -> Hashable:
    """The publisher of a message (its GID as bytes) from its message info; 'unknown' when the info has none."""
    gid = info.get("publisher_gid") if info else None
    if isinstance(gid, dict):
        data = gid.get("data")
        try:
            return bytes(data) if data is not None else "unknown"
        except (TypeError, ValueError):
            return str(data)
    return "unknown" if gid is None else str(gid)


@dataclass(frozen=True)
class StateReceipt:
    """What one joint-state message did: ``rejected`` the reason it was dropped (''), ``sample`` the complete state
    it made (None while some joint was never reported, or when it changed no joint), the joint names the model does
    not know, the joints whose values were older than those held (``superseded``, not merged), and whether the
    joints it merged came without velocities. ``no_model``: ignored, no model yet. ``restarted``: the node clock
    went back behind the held values; the tracker and the history were emptied before this message."""

    rejected: str = ""
    sample: StateSample | None = None
    unknown_names: tuple[str, ...] = ()
    velocities_missing: bool = False
    no_model: bool = False
    superseded: tuple[str, ...] = ()
    restarted: bool = False
    model: str = ""
    shared: str = ""  # the reason states made now are unusable: a joint with two publishers ('' when none)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the node logs about an accepted message (one line each; no varying numbers, so a repeating
        publisher is one line per log period)."""
        lines = []
        if self.restarted:
            lines.append("joint_states: the node clock went back behind the joint states held (a restarted "
                         "simulation?): they were discarded")
        if self.shared:
            lines.append(self.shared.split(" (within")[0] + ": no prediction starts from its states (one source "
                         "per joint, please)")
        if self.unknown_names:
            lines.append(f"joint_states: ignoring joints not in model {self.model!r}: "
                         f"[{excerpt_list(self.unknown_names)}]")
        if self.superseded:
            lines.append(f"joint_states: ignoring values older than those held for [{excerpt_list(self.superseded)}]"
                         " (another publisher republishing older stamps?)")
        if self.velocities_missing:
            lines.append("joint_states: no velocities in the message; predictions from such states are marked "
                         "velocities_estimated")
        return tuple(lines)


SHARED_WINDOW = 1.0  # [s] of receipt time: two publishers merging one joint this close make its states unusable


class StateIntake:
    """Tracker and history of the joint states (module docstring); ``now()`` is the node clock [s]."""

    def __init__(self, length: int, now: Callable[[], float], future_tolerance: float,
                 wall: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic,
                 max_velocity_gap: float = math.inf, rest_hold: float = 0.0) -> None:
        self.now, self.wall, self.monotonic = now, wall, monotonic
        self.rest_hold = float(rest_hold)
        self.future_tolerance = float(future_tolerance)
        self.max_velocity_gap = float(max_velocity_gap)
        self.lock = threading.Lock()
        self.history = StateHistory(length)
        self.tracker: JointStateTracker | None = None
        self.newest_wall = math.nan  # [s] monotonic time of the newest complete state
        self._owner: dict[str, tuple[Hashable, float]] = {}  # joint -> (publisher, receipt) of its newest value
        self._shared: tuple[str, float] | None = None  # (joint, receipt) of the latest value from a second publisher

    def reset(self, robot: RobotModel) -> None:
        """A new model: a new tracker, an empty history."""
        with self.lock:
            self.tracker = self._tracker(robot)
            self.history.clear()
            self._owner.clear()
            self._shared = None

    def _tracker(self, robot: RobotModel) -> JointStateTracker:
        return JointStateTracker(robot, max_velocity_gap=self.max_velocity_gap, rest_hold=self.rest_hold)

    def instant_of(self, received: float) -> float:
        """The node-clock instant of a receipt at ``received`` (receipt clock)."""
        return instant_of_receipt(received, self.now(), self.wall())

    def receive(self, msg: Any, received: float, publisher: Hashable = "unknown") -> StateReceipt:
        """Check and merge one ``sensor_msgs/JointState`` received at ``received`` (receipt clock) from
        ``publisher`` (:func:`publisher_of`; 'unknown': not compared)."""
        if self.tracker is None:
            return StateReceipt(no_model=True)
        stamp = stamp_to_seconds(msg.header.stamp)
        now = self.now()
        if stamp > now + self.future_tolerance:
            return StateReceipt(rejected=f"header.stamp: {stamp - now:.3f} s in the future (future_stamp_tolerance "
                                         f"{self.future_tolerance:g} s)")
        unstamped = stamp <= 0.0
        if unstamped:  # an unstamped state: its receipt instant is the best stamp there is
            stamp = self.instant_of(received)
        with self.lock:
            tracker = self.tracker
            restarted = tracker.newest_held > now + self.future_tolerance
            if restarted:  # the node clock went back (a restarted simulation): what is held is of another time
                tracker = self.tracker = self._tracker(tracker.robot)
                self.history.clear()
                self.newest_wall = math.nan
            try:
                parsed = tracker.update(msg, at=stamp if unstamped else None)
            except JointStateError as err:
                return StateReceipt(rejected=graph.one_line(err) + ("; the node clock went back behind the joint "
                                                                     "states held: they were discarded" if restarted
                                                                     else ""), restarted=restarted)
            merged = parsed.merged
            shared = self._note_publisher(merged, publisher, received)
            sample = None
            if merged and not tracker.missing:
                snap = tracker.snapshot()  # stamped with its oldest joint value: the state is that old
                sample = StateSample(snap.stamp, received, snap, tuple(snap.estimated_velocity), snap.header_stamp,
                                     unstamped=unstamped, unavailable=tuple(snap.unavailable_velocity),
                                     shared=shared, latest=snap.latest)
                self.history.add(sample)
        if sample is not None:
            self.newest_wall = self.monotonic()
        return StateReceipt(sample=sample, unknown_names=tuple(parsed.unknown_names),
                            velocities_missing=bool(merged) and parsed.velocities is None,
                            superseded=parsed.superseded, restarted=restarted, model=tracker.robot.name,
                            shared=shared)

    def _note_publisher(self, merged: tuple[str, ...], publisher: Hashable, received: float) -> str:
        """Record who set the ``merged`` joints; the reason a state made now is unusable ('' if none): a joint
        merged from two publishers within ``SHARED_WINDOW`` (module docstring). Called under the lock."""
        if publisher == "unknown":
            return ""
        first = None  # the first joint of this message that another publisher set within the window
        for name in merged:
            before = self._owner.get(name)
            if first is None and before is not None and before[0] != publisher and \
                    received - before[1] <= SHARED_WINDOW:
                first = name
            self._owner[name] = (publisher, received)
        if first is not None:
            self._shared = (first, received)
        if self._shared is None or received - self._shared[1] > SHARED_WINDOW:
            return ""
        return (f"joint_states: joint {excerpt(self._shared[0])} is published by two publishers (within "
                f"{SHARED_WINDOW:g} s): a start state could hold one's older positions under the other's newer "
                "stamp; give the node one source per joint (a joint_state_publisher republishing the driver's "
                "joints, a second driver?)")

    # ----------------------------------------------------------------------------------- reading (workers)
    def received_by(self, t: float) -> StateSample | None:
        with self.lock:
            return self.history.received_by(t)

    def stamped_by(self, t: float) -> StateSample | None:
        with self.lock:
            return self.history.stamped_by(t)

    def newest(self) -> StateSample | None:
        with self.lock:
            return self.history.newest()

    def choose(self, limits: StartLimits, **kwargs: Any) -> StartChoice:
        """``stop_session.choose_start_state`` on the history (same keyword arguments)."""
        with self.lock:
            return choose_start_state(self.history, limits=limits, **kwargs)

    def age(self) -> float:
        """Seconds since the newest complete state arrived (inf before the first)."""
        return self.monotonic() - self.newest_wall if math.isfinite(self.newest_wall) else math.inf
