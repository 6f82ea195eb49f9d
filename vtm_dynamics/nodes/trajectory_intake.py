"""The desired-trajectory intake of ``projection_controller``: serialized ``JointTrajectory`` messages in, checked
and fitted trajectories out, off the control loop. Plain Python (no node, no executor).

A trajectory arrives serialized (``~/trajectory`` of the joints, ``~/task_trajectory`` of the task coordinates).
:meth:`TrajectoryIntake.submit` refuses it at once when there is no model (or no task coordinates), or when its
bytes exceed ``max_trajectory_bytes``; otherwise it gets the next sequence number (a newer arrival supersedes it,
prepared or not) and is prepared: converted without a Python object per point (``trajectory_cdr``), checked
against the limits of the joints or of the task coordinates (the URDF's position and velocity limits, finite values,
``max_trajectory_points``, ``max_trajectory_duration``: one limit for every way a command comes in) and fitted
(``core.projection.desired_trajectory``), with room for the start state. Messages of at most ``INLINE_BYTES`` (a
few points: a hold takes effect at once) are prepared on the caller's thread; larger ones on the worker
(``work_queue``, latest wins), which pauses every few hundred points so the control cycle keeps its period. A
refused trajectory is one log line and the reason on /diagnostics; the current goal continues.

The control cycle takes the prepared trajectory (:attr:`TrajectoryIntake.pending`, one reference read) and starts
it (``control_loop``); :meth:`TrajectoryIntake.claim` tells whether it is still the newest.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, MutableMapping

from vtm_dynamics.core.projection.desired_trajectory import PiecewiseTrajectory, TrajectoryError, TrajectoryLimits
from vtm_dynamics.nodes import controller_io as io
from vtm_dynamics.nodes.bounded_worker import one_line
from vtm_dynamics.nodes.work_queue import WorkQueue

#: A serialized trajectory up to this size [bytes] is read on the caller's thread (a few points at most: a hold
#: takes effect at once, even while the worker prepares a long trajectory); anything larger goes to the worker.
INLINE_BYTES = 2048
#: [s] pause of the worker after each chunk of points (see ``let_others_run``).
PAUSE = 2e-4


def let_others_run() -> None:
    """Called by the worker every few hundred points: a short sleep releases the interpreter lock long enough for
    the control cycle to take it at once, instead of after the interpreter's switch interval."""
    time.sleep(PAUSE)


@dataclass(frozen=True)
class PreparedTrajectory:
    """A checked trajectory waiting for the control cycle to start it. ``stamp`` [s]: its ``header.stamp``
    (0: start on activation); ``seq``: its place in the arrival order (a newer arrival supersedes it)."""

    trajectory: PiecewiseTrajectory | None  # None: hold the measured position
    stamp: float
    points: int
    seq: int
    task: bool = False  # a trajectory of the task coordinates theta (~/task_trajectory)


class TrajectoryIntake:
    """Trajectories from bytes to :class:`PreparedTrajectory` (module docstring). ``limits(task)`` gives the
    limits of the current model (None: no model yet), ``p`` the node's parameters, ``stats`` its counters."""

    def __init__(self, limits: Callable[[bool], TrajectoryLimits | None], p: MutableMapping[str, Any],
                 stats: MutableMapping[str, int], log: Callable[[str, str], Any], worker: WorkQueue) -> None:
        self.limits, self.p, self.stats, self.log, self.worker = limits, p, stats, log, worker
        self.lock = threading.Lock()  # guards what the worker hands over: pending, submitted, rejections
        self.pending: PreparedTrajectory | None = None  # set by the worker, started by the control cycle
        self.submitted = 0  # sequence number of the newest trajectory submitted
        self.preparation_ms = 0.0  # [ms] of the last trajectory prepared
        self.last_rejection = ""
        self.rejection_unreported = False

    def submit(self, raw: bytes, task: bool = False) -> None:
        """Take one serialized trajectory (bounded time on the caller's thread)."""
        self.stats["trajectories_received"] += 1
        base = self.limits(task)
        if base is None:
            self.reject("task_trajectory: no task coordinates configured (task_joints or task_frame)" if task
                        else "trajectory: no robot model yet")
            return
        too_big = io.trajectory_message_bytes_ok(len(raw), self.p["max_trajectory_bytes"])
        if too_big:
            self.reject(too_big)
            return
        # one limit for every way a command comes in: task coordinates are held to the URDF's joint limits too
        limits = io.with_caps(base, self.p["max_trajectory_points"], self.p["max_trajectory_duration"])
        with self.lock:
            self.submitted += 1  # supersedes whatever arrived before, prepared or not
            seq = self.submitted
        if len(raw) <= INLINE_BYTES:
            self.prepare(seq, raw, limits, task=task)
        else:
            self.worker.submit(lambda: self.prepare(seq, raw, limits, let_others_run, task), key="trajectory")

    def prepare(self, seq: int, raw: bytes, limits: TrajectoryLimits, pause: Callable[[], None] | None = None,
                task: bool = False) -> None:
        """Convert, check and fit one trajectory; leave it for the control cycle unless a newer one arrived."""
        t0 = time.perf_counter()
        try:
            arrays = io.read_trajectory(raw, limits, pause)  # numpy arrays, no Python object per point
            points, stamp = arrays.n_points, arrays.stamp
            # the copy with room for the start state happens here; the control cycle only fills that row in
            traj = io.trajectory_from_arrays(arrays, limits).with_start_slot() if points else None
        except TrajectoryError as err:
            self.reject(one_line(str(err), 400))
            return
        except Exception as err:  # noqa: BLE001 - e.g. the middleware's deserializer refusing the bytes
            self.reject(f"message: cannot be read ({type(err).__name__}: {one_line(str(err), 200)})")
            return
        with self.lock:
            self.preparation_ms = 1e3 * (time.perf_counter() - t0)
            if seq != self.submitted:
                self.stats["trajectories_superseded"] += 1
                return
            self.pending = PreparedTrajectory(traj, stamp, points, seq, task)
        if points:
            self.log("info", f"trajectory prepared: {points} points over {traj.duration:.3f} s in "
                             f"{self.preparation_ms:.0f} ms")

    def claim(self, pending: PreparedTrajectory) -> bool:
        """The control cycle takes ``pending``: False if a newer trajectory arrived meanwhile (counted)."""
        with self.lock:
            if self.pending is pending:
                self.pending = None
            if pending.seq != self.submitted:
                self.stats["trajectories_superseded"] += 1
                return False
            return True

    def started(self) -> None:
        with self.lock:
            self.stats["trajectories"] += 1

    def reject(self, reason: str) -> None:
        with self.lock:
            self.stats["trajectories_rejected"] += 1
            self.last_rejection = reason
            self.rejection_unreported = True
        self.log("error", f"trajectory rejected, the previous goal continues: {reason}")

    def take_unreported(self) -> str:
        """The last rejection if /diagnostics has not reported it yet, else ''."""
        with self.lock:
            if not self.rejection_unreported:
                return ""
            self.rejection_unreported = False
            return self.last_rejection
