"""The bounded worker behind solvability_reporter: a child process with a deadline and an address-space limit.

Only standard-library functions are sent to the child, so the expected results are known without the worker.
"""

import math
import os
import time

import pytest

from vtm_dynamics.nodes.bounded_worker import CRASHED, DEADLINE, ERROR, MEMORY, OK, BoundedWorker

GB = 1_000_000_000


@pytest.fixture(scope="module")
def worker():
    w = BoundedWorker(deadline=5.0, memory_limit=1 * GB)
    yield w
    w.close()


def test_a_call_returns_the_value_computed_in_another_process(worker):
    outcome = worker.run(math.sqrt, 2.0)
    assert outcome.kind == OK and outcome.value == math.sqrt(2.0)
    assert worker.run(os.getpid).value not in (os.getpid(), None)


def test_a_bad_input_error_comes_back_as_one_line_and_the_child_stays(worker):
    pid = worker.pid
    outcome = worker.run(int, "not a number\nsecond line")
    assert outcome.kind == ERROR and outcome.error_type == "ValueError" and outcome.expected
    assert "\n" not in outcome.reason
    assert worker.pid == pid and worker.run(abs, -3).value == 3


def test_an_overrun_is_killed_at_the_deadline_and_the_next_call_is_served(worker):
    pid = worker.pid
    start = time.monotonic()
    outcome = worker.run(time.sleep, 30.0, deadline=0.5)
    assert outcome.kind == DEADLINE and "deadline of 0.5 s" in outcome.reason
    assert time.monotonic() - start < 10.0  # far below the 30 s the call would take
    assert worker.pid != pid
    assert worker.run(abs, -4).value == 4


def test_an_allocation_beyond_the_memory_limit_fails_and_the_next_call_is_served(worker):
    outcome = worker.run(bytearray, 3 * GB)  # three times the limit
    assert outcome.kind == MEMORY and "memory limit of 1 GB" in outcome.reason
    assert worker.run(len, bytearray(10)).value == 10


def test_a_child_that_dies_is_replaced(worker):
    outcome = worker.run(os._exit, 3)
    assert outcome.kind == CRASHED and "died" in outcome.reason
    assert worker.run(abs, -5).value == 5


def test_a_closed_worker_answers_without_a_process():
    w = BoundedWorker(deadline=1.0, memory_limit=1 * GB)
    pid = w.pid
    w.close()
    assert w.run(abs, -1).kind == CRASHED and w.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
