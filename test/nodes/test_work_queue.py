"""The one worker mechanism of the nodes (nodes/work_queue.py): jobs run one at a time in submission order, a keyed
job replaces the waiting job of its key (merged work), a failing job is reported and the thread goes on, a caller
can await a value, and stop ends the thread. Plain Python, no ROS."""

import threading

import pytest

from vtm_dynamics.nodes.work_queue import WorkQueue


@pytest.fixture
def queue():
    errors: list[BaseException] = []
    q = WorkQueue("test_worker", errors.append)
    q.errors = errors
    yield q
    q.stop()


def _blocked(queue: WorkQueue, ran: list[str]) -> threading.Event:
    """Occupy the worker with a job that waits for the returned event."""
    started, release = threading.Event(), threading.Event()

    def first() -> None:
        started.set()
        release.wait(10.0)
        ran.append("first")

    queue.submit(first)
    assert started.wait(10.0)
    return release


def test_a_keyed_job_replaces_the_waiting_job_of_its_key_and_a_failing_job_is_reported(queue):
    ran: list[str] = []
    release = _blocked(queue, ran)
    assert queue.submit(lambda: ran.append("superseded"), key="trajectory") is False
    assert queue.submit(lambda: ran.append("newest"), key="trajectory") is True  # replaced the job still waiting
    assert queue.busy and queue.replaced == 1 and queue.waiting("trajectory")
    release.set()
    assert queue.wait_idle(10.0)
    assert ran == ["first", "newest"] and not queue.waiting("trajectory")

    def fail() -> None:
        raise RecursionError("deep")

    queue.submit(fail)
    assert queue.wait_idle(10.0)
    assert len(queue.errors) == 1 and isinstance(queue.errors[0], RecursionError)
    queue.submit(lambda: ran.append("after the failure"))
    assert queue.wait_idle(10.0)
    assert ran[-1] == "after the failure"


def test_jobs_without_a_key_all_run_in_order_and_a_key_keeps_its_place(queue):
    ran: list[str] = []
    release = _blocked(queue, ran)
    queue.submit(lambda: ran.append("a"))
    queue.submit(lambda: ran.append("continuous 1"), key="continuous")
    queue.submit(lambda: ran.append("b"))
    queue.submit(lambda: ran.append("continuous 2"), key="continuous")  # merged into the first one's place
    release.set()
    assert queue.wait_idle(10.0)
    assert ran == ["first", "a", "continuous 2", "b"]


def test_a_caller_awaits_the_value_or_the_exception_of_a_call(queue):
    assert queue.call(lambda x, y: x + y, 2, 3).result(10.0) == 5
    future = queue.call(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        future.result(10.0)
    assert not queue.errors  # the exception went to the caller, not to on_error


def test_stop_drops_the_waiting_jobs_and_ends_the_thread(queue):
    ran: list[str] = []
    release = _blocked(queue, ran)
    queue.submit(lambda: ran.append("dropped"), key="dropped")
    stopper = threading.Thread(target=queue.stop)
    stopper.start()
    for _ in range(1000):  # stop has dropped the waiting job (it then waits for the running one)
        if not queue.waiting("dropped"):
            break
        threading.Event().wait(0.01)
    release.set()
    stopper.join(10.0)
    assert ran == ["first"] and not stopper.is_alive()
    assert queue.submit(lambda: ran.append("after stop")) is False
    assert queue.wait_idle(1.0) and ran == ["first"]
