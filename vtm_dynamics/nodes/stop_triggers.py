"""What the E-stop line, brake events and lock events do to the stops of ``estop_predictor``. Plain Python (no
node, no executor): the node converts each message into the values here and acts on the :class:`TriggerStep` it gets back
(wake the prediction worker, log, republish a stop's last prediction as final).

* **E-stop line** (:meth:`StopTriggers.line_value`): the value of one publisher (``estop_line``). A rising edge
  fires a trigger from the newest state *received before the message was received*; the line's release by its
  holders ends the stop. A ``false`` while the line was not stopping is no release (it does not end a stop that a
  brake event started).
* **Brake events**: ENGAGE (:meth:`StopTriggers.engage`) fires a trigger at the event's stamp (the E-stop instant;
  unstamped: its receipt instant and the state received before it) with the event's brake overrides; RELEASE ends
  the stop (:meth:`StopTriggers.end`).
* **Triggers** (``stop_session``): a trigger starts a stop or joins the current one (a revision when it changes
  the inputs). Each is recorded under the continuous gate (``live_freshness``), so that nothing continuous computed
  before it is published after it.
* **Lock events** (:meth:`StopTriggers.lock`): a LOCK during a stop of joints the current prediction still has
  moving at the lock's stamp revises the prediction with that abrupt lock; a lock before the prediction is known
  waits for it (:meth:`StopTriggers.after_result`), a lock of joints already at rest changes nothing.
* **Late states** (:meth:`StopTriggers.closer_state`): a state stamped closer to a stamped stop's instant than
  the one its prediction started from, with none of its values after the instant, revises it
  (``StopSession.closer_start_state``).

Times: instants [s] on the node clock, receipt times [s] on the receipt clock, ``wall`` [s] monotonic.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Mapping, Sequence

from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes.estop_line import EstopLine
from vtm_dynamics.nodes.live_freshness import ContinuousGate
from vtm_dynamics.nodes.state_intake import StateIntake
from vtm_dynamics.nodes.stop_session import STAMP_TOL, StateSample, Stop, StopJob, StopSession
from vtm_dynamics.nodes.stop_worker import abrupt_lock


@dataclass(frozen=True)
class TriggerStep:
    """What an input did: ``kind`` 'new' | 'joined' | 'revised' (a trigger) or 'ended' (a stop ended) or ''; the
    ``stop``; ``wake``: E-stop work is due (the caller wakes the prediction worker); ``final``: the ended stop's
    last prediction, to republish with ``final`` true; ``warning``: a line to log."""

    kind: str = ""
    stop: Stop | None = None
    wake: bool = False
    final: Any = None
    warning: str = ""


class StopTriggers:
    """The stop rules applied to the node's inputs (module docstring)."""

    def __init__(self, session: StopSession, line: EstopLine, gate: ContinuousGate, intake: StateIntake,
                 wall: Callable[[], float] = time.monotonic) -> None:
        self.session, self.line, self.gate, self.intake, self.wall = session, line, gate, intake, wall

    def line_value(self, publisher: Hashable, stopping: bool, received: float, source: str) -> TriggerStep:
        """One message on the E-stop line from ``publisher``, received at ``received`` (receipt clock)."""
        was_stopping = self.line.stopping
        if self.line.update(publisher, stopping):
            return self.trigger(instant=self.intake.instant_of(received), stamped=False, received=received,
                                at_receipt=self.intake.received_by(received), source=source)
        if was_stopping and not self.line.stopping and self.session.active:
            return self.end()
        return TriggerStep()

    def engage(self, *, instant: float, stamped: bool, received: float,
               overrides: Mapping[str, Mapping[str, float]], problem: str, source: str) -> TriggerStep:
        """A brake ENGAGE at ``instant`` (its stamp if ``stamped``, else its receipt instant)."""
        at_receipt = None if stamped else self.intake.received_by(received)
        return self.trigger(instant=instant, stamped=stamped, received=received, overrides=overrides,
                            problem=problem, at_receipt=at_receipt, source=source)

    def trigger(self, *, instant: float, stamped: bool, received: float, source: str,
                overrides: Mapping[str, Mapping[str, float]] | None = None, problem: str = "",
                at_receipt: StateSample | None = None) -> TriggerStep:
        with self.gate.trigger():  # no continuous output computed before this trigger is published
            kind, stop = self.session.trigger(instant=instant, stamped=stamped, received=received, wall=self.wall(),
                                              source=source, overrides=overrides or {}, at_receipt=at_receipt,
                                              problem=problem)
        return TriggerStep(kind, stop, wake=True)

    def end(self) -> TriggerStep:
        """End the current stop (line released, brakes released); its last prediction is to be republished as
        final unless a prediction of it is still due (that one is then published final)."""
        stop, republish = self.session.rearm()
        if stop is None:
            return TriggerStep()
        return TriggerStep("ended", stop, final=stop.last_prediction if republish else None)

    def lock(self, t: float, names: Sequence[str], robot: RobotModel, horizon: float) -> TriggerStep:
        """A LOCK of ``names`` stamped ``t`` [s] (node clock) during the current stop, if any."""
        stop = self.session.current
        if stop is None:
            return TriggerStep()
        if stop.last_result is None:  # the prediction is not known yet: judge the lock against it when it is
            self.session.defer_lock((t, tuple(names)))
            return TriggerStep()
        return self._revise_with_lock(stop, t, tuple(names), robot, horizon)

    def after_result(self, job: StopJob, success: bool, robot: RobotModel, horizon: float) -> TriggerStep:
        """After a prediction of ``job`` is recorded: a state that came closer to the instant meanwhile, and the
        locks that waited for this prediction, may revise it."""
        wake = False
        if job.stamped and success:
            closer = self.intake.stamped_by(job.instant)
            wake = closer is not None and self.closer_state(closer)
        warnings = []
        stop = self.session.current
        if stop is not None and stop.number == job.number and stop.last_result is not None:
            for t, names in self.session.take_deferred_locks(job.number):
                step = self._revise_with_lock(stop, t, names, robot, horizon)
                wake = wake or step.wake
                warnings += [step.warning] if step.warning else []
        return TriggerStep(wake=wake, warning="; ".join(warnings))

    def closer_state(self, sample: StateSample) -> bool:
        """Whether ``sample`` revises the current stop (it then is due)."""
        return self.session.closer_start_state(sample, self.wall()) is not None

    def _revise_with_lock(self, stop: Stop, t: float, names: tuple[str, ...], robot: RobotModel,
                          horizon: float) -> TriggerStep:
        """A lock of joints that the stop's current prediction still has moving at ``t`` revises it (an abrupt
        lock, momentum-consistent jump in the core); locks of joints already at rest change nothing."""
        t_rel = t - stop.instant
        if not math.isfinite(t_rel) or t_rel < -STAMP_TOL:
            return TriggerStep(warning=f"lock_events: LOCK stamped {-t_rel:.4f} s before the E-stop ignored")
        result = stop.last_result
        if t_rel > horizon or result is None:
            return TriggerStep()  # after the predicted interval: nothing still moves that the prediction covers
        stopped = [result.joint_stop_times[robot.joint(n).idx_v] <= t_rel + 1e-6 for n in names]
        if all(stopped):
            return TriggerStep()
        self.session.add_lock(abrupt_lock(t_rel, names), self.wall())
        return TriggerStep("revised", stop, wake=True)
