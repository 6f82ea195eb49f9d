"""Requests waiting for a node's worker, without ROS (nodes/service_queue.py): at most max_pending wait, more are
refused at once with the reason, and every request past its deadline is handed back to be answered."""

from types import SimpleNamespace

from vtm_dynamics.nodes.service_queue import ServiceQueue


class Future:
    def __init__(self) -> None:
        self.value = None

    def done(self) -> bool:
        return self.value is not None


def test_at_most_max_pending_wait_and_an_answered_one_makes_room():
    clock = SimpleNamespace(t=10.0)
    queue = ServiceQueue(2, deadline=3.0, clock=lambda: clock.t)
    first, second = queue.admit("r1", "a1", Future), queue.admit("r2", "a2", Future)
    assert first.deadline == 13.0 and second.request == "r2"
    assert queue.admit("r3", "a3", Future) is None
    assert queue.busy == "busy: 2 requests already wait (max_pending_requests)"
    first.future.value = "answered"
    assert queue.admit("r3", "a3", Future) is not None


def test_requests_past_their_deadline_are_handed_back_unless_answered():
    clock = SimpleNamespace(t=0.0)
    queue = ServiceQueue(4, deadline=1.0, clock=lambda: clock.t)
    late, answered = queue.admit("r1", "a1", Future), queue.admit("r2", "a2", Future)
    clock.t = 0.5
    fresh = queue.admit("r3", "a3", Future)
    assert queue.overdue() == []
    clock.t = 1.2
    answered.future.value = "answered"
    assert queue.overdue() == [late]
    clock.t = 1.6
    assert queue.overdue() == [late, fresh]
