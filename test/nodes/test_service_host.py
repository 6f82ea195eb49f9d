"""The services of a node answered on its worker (nodes/service_host.py): the first answer of a request stands, and
a refusal by the deadline watchdog is never mixed with figures the worker writes afterwards."""

import threading

import pytest
import rclpy
from rclpy.task import Future

from vtm_dynamics.nodes.service_host import ServiceHost
from vtm_dynamics.nodes.service_queue import ServiceQueue
from vtm_dynamics.nodes.work_priority import UrgentWork
from vtm_msgs.srv import PredictStop


class SlowPart:
    """Answers with success after ``release`` is set (a long check); refuses with success false."""

    def __init__(self) -> None:
        self.started, self.release = threading.Event(), threading.Event()

    def answer(self, request, response):
        self.started.set()
        assert self.release.wait(10.0)
        response.success, response.message = True, "ok"
        response.prediction.tcp_path_length = 0.25
        return response

    def refuse(self, response, reason):
        response.success, response.message = False, reason
        return response


@pytest.fixture
def node():
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    n = rclpy.create_node("service_host_test", context=ctx)
    yield n
    n.destroy_node()
    rclpy.try_shutdown(context=ctx)


def test_a_request_refused_at_its_deadline_stays_refused_while_the_worker_finishes_it(node):
    part = SlowPart()
    host = ServiceHost(node, worker=None, urgent=UrgentWork(), max_pending=4, deadline=0.0, late="over the deadline",
                       stats={"refused_work": 0}, log=lambda level, text: None)
    queue = ServiceQueue(4, 0.0)
    host.queues.append((queue, part, "over the deadline"))
    item = queue.admit(PredictStop.Request(), PredictStop.Response(), Future)
    worker = threading.Thread(target=host.serve, args=(item, part.answer))
    worker.start()
    assert part.started.wait(10.0)
    host.watchdog()  # past its deadline (0 s) while the worker still computes
    part.release.set()
    worker.join(10.0)
    sent = item.future.result()
    assert (sent.success, sent.message) == (False, "over the deadline")
    assert sent.prediction.tcp_path_length == 0.0  # no figure of the late answer in the refusal
    assert host.stats["refused_work"] == 1


def test_a_request_answered_in_time_is_not_refused_afterwards(node):
    part = SlowPart()
    host = ServiceHost(node, worker=None, urgent=UrgentWork(), max_pending=4, deadline=60.0, late="late",
                       stats={"refused_work": 0}, log=lambda level, text: None)
    queue = ServiceQueue(4, 60.0)
    host.queues.append((queue, part, "late"))
    item = queue.admit(PredictStop.Request(), PredictStop.Response(), Future)
    part.release.set()
    host.serve(item, part.answer)
    host.watchdog()
    assert item.future.result().success and item.future.result().prediction.tcp_path_length == 0.25
    assert host.stats["refused_work"] == 0


def test_an_answer_pauses_at_its_next_call_into_the_package_while_e_stop_work_is_due(node):
    """The worker answers under ``urgent.yielding``: with the E-stop flag raised, the part's next call into
    vtm_dynamics waits until the E-stop work lowers it."""
    from vtm_dynamics.core.excerpt import first_line

    urgent = UrgentWork(max_wait=10.0)
    host = ServiceHost(node, worker=None, urgent=urgent, max_pending=4, deadline=60.0, late="late",
                       stats={"refused_work": 0}, log=lambda level, text: None)
    order = []

    class Part(SlowPart):
        def answer(self, request, response):
            first_line(ValueError("a call into the package"))  # a pause point
            order.append("answer")
            response.success = True
            return response

    queue = ServiceQueue(4, 60.0)
    item = queue.admit(PredictStop.Request(), PredictStop.Response(), Future)
    urgent.raise_()
    lowered = threading.Timer(0.3, lambda: (order.append("e-stop done"), urgent.release()))
    lowered.start()
    host.serve(item, Part().answer)
    lowered.join()
    assert urgent.pauses == 1 and order == ["e-stop done", "answer"]
    assert item.future.result().success
