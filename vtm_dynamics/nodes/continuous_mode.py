"""Continuous mode of ``estop_predictor``: "where would the robot stop if the E-stop fired now", from the newest
joint state, at ``continuous_rate``, with outputs that tell the truth and never stand in the E-stop's way. Plain
Python (no node, no executor): the node registers its outputs (what each computes, how it is published) and runs
:meth:`ContinuousMode.run` on its auxiliary worker.

One *round* (:class:`ContinuousRound`): a ticket of the continuous gate (none while a stop is active), the newest
complete state, checked like an E-stop start state (``choose_start_state`` at *now*), and the nominal prediction
from it. Then each registered :class:`ContinuousOutput` in turn: its ``evaluate`` runs with pauses for E-stop work
(``work_priority``: at every call into the core while E-stop work is due), its ``publish`` runs under the gate and
only if no trigger came since the ticket (``live_freshness``), with the age of the input at that moment and the
reason it must not be published as a value ('' when fresh: older than ``max_start_state_age`` or stamped ahead of
the clock is refused, the E-stop's own limits). A round stops at the first output the gate refuses. The achieved
rate is measured per round (``live_freshness.RateMonitor``). The pause points are the calls into
``pause_packages``: the core by default; the node adds its message builders (``work_priority.MESSAGE_BUILDERS``),
since its predictions run in the prediction process and building the messages is most of what is left here.

Adding a continuous output (e.g. a protective separation distance beside the stopping distance): a small part
that computes its value from a round (``round.outcome`` is the nominal prediction; ``predict`` repeats it with
other brakes or models), a message for it, and ``mode.add(ContinuousOutput(name, evaluate, publish, enabled))``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from vtm_dynamics.nodes.live_freshness import ContinuousGate, RateMonitor, input_age, stale_reason
from vtm_dynamics.nodes.model_slot import LoadedModel, ModelSlot
from vtm_dynamics.nodes.state_intake import StateIntake
from vtm_dynamics.nodes.stop_session import StartLimits, StateSample
from vtm_dynamics.nodes.stop_worker import Outcome
from vtm_dynamics.nodes.work_priority import PAUSE_PACKAGE, UrgentWork


@dataclass(frozen=True)
class ContinuousRound:
    """One evaluation: the gate ``ticket``, the ``model``, the input ``sample`` and the nominal ``outcome``
    (``result`` None: ``reason``); ``started`` [s] monotonic."""

    ticket: int
    model: LoadedModel
    sample: StateSample
    outcome: Outcome
    started: float


@dataclass(frozen=True)
class ContinuousOutput:
    """An output of continuous mode: ``evaluate(round)`` computes its value (pausing for E-stop work);
    ``publish(round, value, age, stale)`` publishes it under the gate, ``age`` [s] the input's age now and
    ``stale`` why it must not be a value ('' if it may); ``enabled()`` whether it runs this round."""

    name: str
    evaluate: Callable[[ContinuousRound], Any]
    publish: Callable[[ContinuousRound, Any, float, str], None]
    enabled: Callable[[], bool] = lambda: True


class ContinuousMode:
    """The rounds of continuous mode (module docstring). ``predict(model, robot, state)`` is the node's
    prediction call (an ``Outcome``); ``now`` the node clock [s]."""

    def __init__(self, gate: ContinuousGate, urgent: UrgentWork, intake: StateIntake, models: ModelSlot,
                 limits: StartLimits, predict: Callable[..., Outcome], now: Callable[[], float],
                 wall: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic,
                 pause_packages: tuple[str, ...] = (PAUSE_PACKAGE,),
                 nominal_options: Callable[[LoadedModel, StateSample], dict[str, Any]] | None = None) -> None:
        self.gate, self.urgent, self.intake, self.models, self.limits = gate, urgent, intake, models, limits
        self.predict, self.now, self.wall, self.monotonic = predict, now, wall, monotonic
        self.pause_packages = pause_packages  # calls into these are the pause points (``work_priority``)
        self.nominal_options = nominal_options  # extra keywords of the nominal prediction call, per round
        self.outputs: list[ContinuousOutput] = []
        self.rate = RateMonitor()

    def add(self, output: ContinuousOutput) -> None:
        self.outputs.append(output)

    def run(self) -> None:
        """One round: the nominal prediction and every enabled output, each published only while allowed."""
        model = self.models.current
        ticket = self.gate.ticket()
        if ticket is None or model is None:
            return
        sample = self.intake.newest()
        if sample is None:
            return
        started = self.monotonic()
        now = self.now()
        choice = self.intake.choose(self.limits, instant=now, stamped=False, received=self.wall(), now=now,
                                    waited=0.0, at_receipt=sample)
        outcome = Outcome(None, choice.reason, 0.0)
        if choice.ok:
            with self.urgent.yielding(self.pause_packages):  # pauses while an E-stop prediction is due or running
                extra = self.nominal_options(model, sample) if self.nominal_options is not None else {}
                outcome = self.predict(model, model.aux, sample.state, **extra)
        round_ = ContinuousRound(ticket, model, sample, outcome, started)
        for output in self.outputs:
            if not output.enabled():
                continue
            with self.urgent.yielding(self.pause_packages):
                value = output.evaluate(round_)
            with self.gate.publishing(ticket) as allowed:
                if not allowed:
                    return  # a trigger came while this was computed: nothing continuous during a stop
                age = input_age(self.now(), sample.stamp)
                output.publish(round_, value, age, stale_reason(age, self.limits.max_age,
                                                                self.limits.future_tolerance))
        self.rate.record(self.monotonic() - started)
