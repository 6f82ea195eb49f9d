"""Service requests of a node that wait for its worker: a cap on how many wait, and a deadline for each. Plain
Python (no node, no executor).

A service callback admits its request (:meth:`ServiceQueue.admit`): while ``max_pending`` requests already wait,
the request is refused at once (:attr:`ServiceQueue.busy`, the reason naming ``max_pending_requests``); otherwise
it gets a :class:`PendingRequest` with the future the callback awaits and its deadline, and the node hands it to
its worker. The worker answers it unless it is answered already; the node's watchdog answers every request past
its deadline (:meth:`ServiceQueue.overdue`) with a failure, so no caller waits longer than the deadline however
busy the worker is.

What a service computes is a part of its own with ``answer(request, response) -> response`` and ``refuse(response,
reason) -> response`` (e.g. ``stop_request.StopRequests`` for ``predict_stop``); the node's wiring of one service
is a few lines (``EstopPredictor.offer_service``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol


class ServicePart(Protocol):
    """What a service of the predictor computes (on the worker, pausing for E-stop work)."""

    def answer(self, request: Any, response: Any) -> Any: ...

    def refuse(self, response: Any, reason: str) -> Any: ...


@dataclass(frozen=True)
class PendingRequest:
    """A request waiting for the worker: the ``request``, the ``response`` to fill, the ``future`` the service
    callback awaits (anything with ``done()``) and the ``deadline`` [s] on the queue's clock."""

    request: Any
    response: Any
    future: Any
    deadline: float


class ServiceQueue:
    """At most ``max_pending`` requests waiting, each with ``deadline`` [s] to be answered (module docstring)."""

    def __init__(self, max_pending: int, deadline: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_pending, self.deadline, self.clock = int(max_pending), float(deadline), clock
        self._lock = threading.Lock()
        self._pending: list[PendingRequest] = []

    @property
    def busy(self) -> str:
        """The reason given to a request refused because the queue is full."""
        return f"busy: {self.max_pending} requests already wait (max_pending_requests)"

    def admit(self, request: Any, response: Any, future: Callable[[], Any]) -> PendingRequest | None:
        """A pending request with a future made by ``future()``, or None when ``max_pending`` already wait."""
        with self._lock:
            self._pending = [r for r in self._pending if not r.future.done()]
            if len(self._pending) >= self.max_pending:
                return None
            item = PendingRequest(request, response, future(), self.clock() + self.deadline)
            self._pending.append(item)
            return item

    def overdue(self) -> list[PendingRequest]:
        """The requests past their deadline and not answered yet."""
        now = self.clock()
        with self._lock:
            return [r for r in self._pending if now > r.deadline and not r.future.done()]
