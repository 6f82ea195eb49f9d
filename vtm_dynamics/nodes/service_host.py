"""The services of a node answered on its worker: the ROS half of ``service_queue``.

:meth:`ServiceHost.offer` creates one service whose callback is a coroutine: it admits the request (at most
``max_pending`` wait; more are refused at once with the queue's reason), hands it to the worker and awaits the
answer, so the executor keeps serving everything else meanwhile (the service has a reentrant callback group of its
own: an awaiting request holds no group the subscriptions need, and several requests may wait). The worker runs
the service part's ``answer`` with pauses for E-stop work (``work_priority``) unless the request was answered
already. :meth:`ServiceHost.watchdog` (called from a node timer) answers every request past its deadline with the
part's ``refuse``. An unexpected exception anywhere is one log line and a failed response (``graph.guarded``).

Wiring a new service of the predictor is one call: ``self.service_host.offer(SrvType, "~/name", part)`` with a part
that has ``answer(request, response)`` and ``refuse(response, reason)`` (and, if it needs one, a deadline of its
own: ``deadline=``, ``late=``, or the part's attributes of those names).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, MutableMapping

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.task import Future

from vtm_dynamics.nodes import graph
from vtm_dynamics.nodes.service_queue import PendingRequest, ServicePart, ServiceQueue
from vtm_dynamics.nodes.work_priority import UrgentWork
from vtm_dynamics.nodes.work_queue import WorkQueue


class ServiceHost:
    """Services of ``node`` answered on ``worker``; ``deadline`` [s] per request, ``late`` the reason given to a
    request past it; ``stats['refused_work']`` counts refused and late requests."""

    def __init__(self, node: Node, worker: WorkQueue, urgent: UrgentWork, max_pending: int, deadline: float,
                 late: str, stats: MutableMapping[str, int], log: Callable[[str, str], Any]) -> None:
        self.node, self.worker, self.urgent = node, worker, urgent
        self.max_pending, self.deadline, self.late, self.stats, self.log = max_pending, deadline, late, stats, log
        self.queues: list[tuple[ServiceQueue, ServicePart, str]] = []
        self._answered = node.create_guard_condition(lambda: None)  # a worker answered: wake the executor
        self._settle_lock = threading.Lock()

    def offer(self, srv_type: Any, name: str, part: ServicePart, deadline: float | None = None,
              late: str | None = None) -> None:
        """Serve ``name`` (module docstring); ``deadline`` [s] and ``late`` (its reason) override the host's, as do
        the part's own ``deadline`` and ``late`` attributes when it has them."""
        deadline = getattr(part, "deadline", None) if deadline is None else deadline
        late = getattr(part, "late", None) if late is None else late
        queue = ServiceQueue(self.max_pending, self.deadline if deadline is None else deadline)
        self.queues.append((queue, part, self.late if late is None else late))
        answer = graph.guarded(self.log, name, default="response")(part.answer)

        async def callback(request: Any, response: Any) -> Any:
            item = queue.admit(request, response, lambda: Future(executor=self.node.executor))
            if item is None:
                self.stats["refused_work"] += 1
                return part.refuse(response, queue.busy)
            self.worker.submit(lambda: self.serve(item, answer))
            return await item.future

        self.node.create_service(srv_type, name, graph.guarded(self.log, name, default="response")(callback),
                                 callback_group=ReentrantCallbackGroup())

    def serve(self, item: PendingRequest, answer: Callable[[Any, Any], Any]) -> None:
        """Answer ``item`` on the worker (pausing for E-stop work) unless it was answered already. The part fills
        a response of its own, never the one the watchdog may refuse meanwhile: a refusal sent while the worker
        still wrote its figures into the same object could leave the service with a late answer that says
        ``success`` or a refusal with numbers in it."""
        if item.future.done():
            return  # already answered as over the deadline
        with self.urgent.yielding():  # the E-stop has priority over services
            response = answer(item.request, type(item.response)())
        self._settle(item, lambda: response)
        self._answered.trigger()

    def watchdog(self) -> None:
        """Answer every request past its deadline."""
        for queue, part, late in self.queues:
            for item in queue.overdue():
                if self._settle(item, lambda: part.refuse(item.response, late)):
                    self.stats["refused_work"] += 1

    def _settle(self, item: PendingRequest, response: Callable[[], Any]) -> bool:
        """The first answer of a request stands (the worker's or the watchdog's, which run on different threads);
        True if this one did."""
        with self._settle_lock:
            if item.future.done():
                return False
            item.future.set_result(response())
            return True
