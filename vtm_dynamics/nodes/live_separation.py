"""Live protective separation distance (ISO/TS 15066 speed and separation monitoring) in continuous mode of
``estop_predictor``: "if the E-stop fired now", S_p = S_h + S_r + S_s + C + Z_d + Z_r with T_s and S_s predicted
(:class:`vtm_dynamics.core.stopsafe.separation.SeparationMonitor`: formula (1) for every part of any link's
collision geometry, each part's nearest point with its speed and predicted displacement towards the person
over the envelope's worst corner or every case; the part with the smallest margin limits and is reported), on
``protective_separation_distance`` (vtm_msgs/SeparationDistance). A continuous output
(``continuous_mode``): it is evaluated from the round's joint state with pauses for E-stop work, and published
under the continuous gate, never during a stop, with the input's age; a stale input (``live_freshness``) makes
the message ``success=false`` naming the age. A stop case that is not at rest within the horizon makes it
``success=false`` too: S_s and T_s cut off at the horizon are short of the stop, so S_p would be too small; and so
does a stop case that carries a joint past its position limit (the model has no end stops: not the robot's stop),
the message naming the case, the joint and how far.

The person (:class:`PersonSource`): the fixed ``separation_person_point`` or the newest
``geometry_msgs/PointStamped`` on ``person_position`` (root frame or empty ``frame_id``: no transforms here;
finite coordinates within 1000 m; one log line per bad message). A position older than
``separation_person_max_age`` at publication (like the joint state's age: an evaluation that took long publishes
an older position than the one it began with), or none yet, makes the message ``success=false`` naming it;
``person_age`` is its age at publication. The terms are the
read-only ``separation_*`` parameters (``stopsafe_parameters``). Units: m, s, m/s.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable

import numpy as np
from geometry_msgs.msg import PointStamped
from vtm_msgs.msg import SeparationDistance

from vtm_dynamics.core.stopsafe.separation import SeparationMonitor
from vtm_dynamics.nodes import graph
from vtm_dynamics.nodes.continuous_mode import ContinuousOutput, ContinuousRound
from vtm_dynamics.nodes.conversions import exact_stamp
from vtm_dynamics.nodes.live_stopping import NOT_AT_REST
from vtm_dynamics.nodes.prediction_io import root_frame_of
from vtm_dynamics.nodes.stopsafe_io import separation_message
from vtm_dynamics.nodes.stopsafe_kit import StopsafeKits
from vtm_dynamics.nodes.stopsafe_parameters import separation_parameters

MAX_COORDINATE = 1000.0  # [m]


class PersonSource:
    """The person's position [m] (module docstring): ``fixed`` (3 values) or the newest received one, each
    received at ``now()`` [s] on the node clock and valid for ``max_age`` [s]."""

    def __init__(self, fixed: Any, max_age: float, now: Callable[[], float]) -> None:
        self.fixed = np.asarray(fixed, dtype=float) if len(fixed) else None
        self.max_age, self.now = float(max_age), now
        self._lock = threading.Lock()
        self._latest: tuple[np.ndarray, float] | None = None

    def receive(self, frame_id: str, point: Any, root: str) -> str:
        """Take a received position (``frame_id`` and x, y, z); '' or the one-line reason it was refused."""
        xyz = [point.x, point.y, point.z]
        if not all(isinstance(c, float) and math.isfinite(c) and abs(c) <= MAX_COORDINATE for c in xyz):
            return f"person_position.point: expected finite coordinates within {MAX_COORDINATE:g} m"
        if frame_id not in ("", root):
            return (f"person_position.header.frame_id: {frame_id[:80]!r} is not the root frame {root!r} (positions "
                    "are not transformed)")
        with self._lock:
            self._latest = (np.array(xyz), self.now())
        return ""

    def current(self) -> tuple[np.ndarray | None, float, str]:
        """(position or None, its age [s], '' or why there is none)."""
        if self.fixed is not None:
            return self.fixed, 0.0, ""
        with self._lock:
            latest = self._latest
        if latest is None:
            return None, math.nan, "person_position: no position received yet"
        age = self.now() - latest[1]
        reason = self.too_old(age)
        return (None if reason else latest[0]), age, reason

    def too_old(self, age: float) -> str:
        """'' or why a received position ``age`` [s] old gives no value."""
        if age > self.max_age:
            return (f"person_position: the newest position is {age:.3f} s old (separation_person_max_age "
                    f"{self.max_age:g} s): no value")
        return ""


class LiveSeparation:
    """The ``protective_separation_distance`` output (module docstring): its publisher, the person subscription
    (only without a fixed point) and :attr:`output` for ``ContinuousMode.add``. ``p`` the node's parameters,
    ``category`` the node's stop category; ``node.models`` its model slot (the root frame of person positions)."""

    def __init__(self, node: Any, p: dict, kits: StopsafeKits, category: int, log: Callable[[str, str], Any],
                 now: Callable[[], float]) -> None:
        self.p, self.kits, self.category, self.log, self.models = p, kits, int(category), log, node.models
        self.now = now
        self.parameters = separation_parameters(p)
        self.person = PersonSource(p["separation_person_point"], p["separation_person_max_age"], now)
        self._monitors: dict[str, SeparationMonitor] = {}
        self.root = ""
        self.pub = node.create_publisher(SeparationDistance, "protective_separation_distance", graph.OUTPUT_DEPTH)
        if p["separation_distance"] and self.person.fixed is None:
            node.create_subscription(PointStamped, "person_position",
                                     graph.guarded(log, "person_position")(self.on_person), graph.sensor_qos(10))
        self.output = ContinuousOutput("protective_separation_distance", self.evaluate, self.publish,
                                       lambda: bool(p["separation_distance"]))

    def on_person(self, msg: PointStamped) -> None:
        model = self.models.current
        problem = self.person.receive(msg.header.frame_id, msg.point, root_frame_of(model.robot) if model else "")
        if problem:
            self.log("warning", problem)

    def _monitor(self, round_: ContinuousRound) -> SeparationMonitor:
        kit = self.kits.kit(round_.model)
        if kit.model.hash not in self._monitors:
            self._monitors.clear()
            self._monitors[kit.model.hash] = SeparationMonitor(kit.setup((self.category,)), kit.geometry,
                                                               self.parameters)
        kit.setup((self.category,))  # no budget: a continuous evaluation is one or a few predictions
        self.root = root_frame_of(kit.geometry.robot)
        return self._monitors[kit.model.hash]

    def evaluate(self, round_: ContinuousRound) -> tuple[Any, str, float, float, float]:
        """(core SeparationDistance or None, '' or the reason there is none, person age [s], wall seconds, node
        clock [s] when the person's age was taken)."""
        start = time.monotonic()
        if round_.outcome.result is None:
            return None, round_.outcome.reason or "no prediction from the newest joint state", math.nan, 0.0, math.nan
        try:
            monitor = self._monitor(round_)
            person, age, reason = self.person.current()
            aged_at = self.now()
            if person is None:
                return None, reason, age, time.monotonic() - start, aged_at
            state = round_.sample.state
            value = monitor.evaluate(np.asarray(state.q), np.asarray(state.v), person)
        except ValueError as err:
            return None, graph.one_line(err), math.nan, time.monotonic() - start, math.nan
        if not value.stopped:  # S_s and T_s end at the horizon, short of the stop: S_p would be too small
            return (None, f"stop cases ({monitor.parameters.cases}): {NOT_AT_REST}", age,
                    time.monotonic() - start, aged_at)
        if value.limit_crossings:  # a stop past a joint limit: an end stop, not the brake, would end it
            return None, value.invalid_reason(), age, time.monotonic() - start, aged_at
        return value, "", age, time.monotonic() - start, aged_at

    def publish(self, round_: ContinuousRound, value: tuple[Any, str, float, float, float], age: float,
                stale: str) -> None:
        result, reason, person_age, seconds, aged_at = value
        if self.person.fixed is None and math.isfinite(person_age):  # the position's age now, at publication
            person_age += self.now() - aged_at
            reason = reason or self.person.too_old(person_age)
        model = round_.model
        msg = separation_message(result, stale or reason, stamp=exact_stamp(round_.sample.header_stamp, round_.sample.stamp),
                                 frame=self.root or root_frame_of(model.robot), model_name=model.name,
                                 model_hash=model.hash, category=self.category, person_age=person_age)
        msg.input_age = float(age)
        msg.computation_time = float(seconds)
        self.pub.publish(msg)
