"""The rules of honest continuous outputs and of E-stop priority, without ROS: the age rule shared with the E-stop,
the gate that keeps continuous outputs out of a stop, the achieved-rate report, and other work pausing while an
E-stop prediction is due."""

from __future__ import annotations

import threading
import time

from vtm_dynamics.core.excerpt import clip
from vtm_dynamics.nodes.live_freshness import ContinuousGate, RateMonitor, input_age, stale_reason
from vtm_dynamics.nodes.work_priority import UrgentWork


def test_a_value_older_than_the_estop_limit_or_from_the_future_is_no_value():
    assert input_age(10.5, 10.0) == 0.5
    assert stale_reason(0.04, 0.05, 0.05) == ""
    assert stale_reason(0.4, 0.05, 0.05).startswith("input state is 0.400 s old at publication "
                                                    "(max_start_state_age 0.05 s")
    assert "ahead of the node clock" in stale_reason(-1.0, 0.05, 0.05)


def test_work_begun_before_a_trigger_is_never_published_and_none_begins_during_a_stop():
    active = {"stop": False}
    gate = ContinuousGate(lambda: active["stop"])
    ticket = gate.ticket()
    with gate.publishing(ticket) as ok:
        assert ok
    with gate.trigger():
        active["stop"] = True
    with gate.publishing(ticket) as ok:
        assert not ok  # computed before the trigger
    assert gate.ticket() is None and gate.dropped == 1
    active["stop"] = False  # the stop ended
    late = gate.ticket()
    with gate.publishing(ticket) as ok:
        assert not ok  # still the old ticket: its inputs came before the stop
    with gate.publishing(late) as ok:
        assert ok


def test_a_trigger_never_waits_for_a_continuous_publication_but_the_stops_outputs_follow_it():
    active = {"stop": False}
    gate = ContinuousGate(lambda: active["stop"])
    order: list[str] = []
    inside, recorded = threading.Event(), threading.Event()

    def estop_path() -> None:
        inside.wait(5.0)
        with gate.trigger():
            active["stop"] = True
            order.append("trigger recorded")
        recorded.set()
        gate.after_continuous()  # before the stop's first output
        order.append("stop output")

    t = threading.Thread(target=estop_path)
    t.start()
    with gate.publishing(gate.ticket()) as ok:
        assert ok
        inside.set()
        assert recorded.wait(5.0), "the trigger waited for the continuous publication"
        time.sleep(0.05)  # the stop's output waits for this publication meanwhile
        order.append("continuous published")
    t.join(5.0)
    assert order == ["trigger recorded", "continuous published", "stop output"]
    with gate.publishing(0) as ok:
        assert not ok  # and none begins once the trigger is recorded


def test_the_rate_shortfall_is_reported_with_the_cost_of_one_evaluation():
    now = {"t": 0.0}
    monitor = RateMonitor(window=2.0, clock=lambda: now["t"])
    assert monitor.shortfall(100.0) == ""  # not judged before a whole window
    for _ in range(5):
        now["t"] += 0.4
        monitor.record(0.4)
    assert monitor.achieved() == 2.5
    assert monitor.shortfall(100.0) == ("continuous outputs at 2.5 Hz, below continuous_rate 100 Hz; one evaluation "
                                        "takes 400 ms")
    assert monitor.shortfall(2.5) == ""
    monitor.restart()
    assert monitor.shortfall(100.0) == ""


class _Worker:
    """Other work in a thread: ``step()`` in a loop inside ``urgent.yielding(packages)``, counting its steps."""

    def __init__(self, urgent: UrgentWork, step, packages=None) -> None:
        self.urgent, self.calls, self.stop = urgent, 0, threading.Event()

        def run() -> None:
            with urgent.yielding() if packages is None else urgent.yielding(packages):
                while not self.stop.is_set():
                    step()
                    self.calls += 1

        self.thread = threading.Thread(target=run, daemon=True)
        self.deadline = time.monotonic() + 10.0

    def __enter__(self) -> "_Worker":
        self.thread.start()
        while self.calls == 0 and time.monotonic() < self.deadline:
            time.sleep(0.001)
        return self

    def paused_after_raise(self) -> int:
        """Raise the flag; returns the step count once the worker paused (and has stayed paused for 50 ms)."""
        self.urgent.raise_()
        while self.urgent.pauses == 0 and time.monotonic() < self.deadline:
            time.sleep(0.001)
        assert self.urgent.pauses == 1
        frozen = self.calls
        time.sleep(0.05)
        assert self.calls == frozen  # blocked, not computing
        return frozen

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.urgent.settle(self.urgent.epoch)
        self.thread.join(5.0)


def test_work_inside_yielding_pauses_at_the_next_call_into_the_core_while_an_estop_is_due():
    urgent = UrgentWork(max_wait=30.0)
    with _Worker(urgent, lambda: clip("x")) as worker:  # clip: a call into vtm_dynamics.core, a pause point
        epoch_before = urgent.epoch
        frozen = worker.paused_after_raise()
        urgent.settle(epoch_before)  # an old epoch: work raised since is still due
        time.sleep(0.05)
        assert worker.calls == frozen
        urgent.settle(urgent.epoch)
        while worker.calls == frozen and time.monotonic() < worker.deadline:
            time.sleep(0.001)
        assert worker.calls > frozen


def test_the_message_builders_are_pause_points_too_when_asked():
    """The node's continuous rounds pause at calls into its message builders as well (their predictions run in
    the prediction process, so building messages is what is left in the thread)."""
    from vtm_dynamics.nodes.conversions import seconds_to_stamp
    from vtm_dynamics.nodes.work_priority import MESSAGE_BUILDERS, PAUSE_PACKAGE

    urgent = UrgentWork(max_wait=30.0)
    # seconds_to_stamp: a message builder, no core call
    with _Worker(urgent, lambda: seconds_to_stamp(1.5), (PAUSE_PACKAGE, *MESSAGE_BUILDERS)) as worker:
        worker.paused_after_raise()


def test_the_message_builders_hold_no_lock():
    """A pause point must never be reached while holding a lock the E-stop path needs: the builders use none."""
    import importlib
    import inspect

    from vtm_dynamics.nodes.work_priority import MESSAGE_BUILDERS

    for name in MESSAGE_BUILDERS:
        source = inspect.getsource(importlib.import_module(name))
        assert "threading" not in source and "Lock(" not in source and ".acquire(" not in source, name
