"""A callback group of a node served by an executor thread of its own, so that its callbacks never wait behind the
node's other callbacks (``estop_predictor``: the E-stop line and the brake and lock events ahead of a joint-state
flood). One node, one name: nothing here creates a second node that a launch remap (``-r __node:=...``) could
rename onto the first, and ``ros2 node info`` lists the group's subscriptions under the node.

rclpy gives every entity of a node to the executor the node was added to. :class:`EventExecutor` is a second
executor over the same node (without taking it from the first: the node keeps its own executor) that waits only
on the entities of its :class:`DedicatedGroup`; the group admits execution only on that executor's thread, so the
node's own executor, whatever its kind (single- or multi-threaded, the tests' or ``rclpy.spin``'s), leaves the
group's entities out of its wait set. Create the group, create the entities with ``callback_group=group``, then
``start()``; ``stop()`` before the node is destroyed.

Shutdown: the thread ends when ``stop()`` is called or the context shuts down; an exception after the shutdown
began is the race of a handle invalidated under the executor (see ``node_main``) and ends the thread quietly.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import ExternalShutdownException, ShutdownException, SingleThreadedExecutor
from rclpy.node import Node

#: [s] the thread checks for stop() at least this often
POLL = 0.1


class DedicatedGroup(MutuallyExclusiveCallbackGroup):
    """A mutually exclusive callback group whose entities only the thread bound to it executes."""

    def __init__(self) -> None:
        super().__init__()
        self.thread_id: int | None = None

    def can_execute(self, entity: Any) -> bool:
        return threading.get_ident() == self.thread_id and super().can_execute(entity)


class EventExecutor(SingleThreadedExecutor):
    """Serves the entities of ``group`` of ``node`` on a thread named ``name`` (module docstring)."""

    def __init__(self, node: Node, name: str, on_error: Callable[[BaseException], None]) -> None:
        super().__init__(context=node.context)
        self.node, self.name, self.on_error = node, name, on_error
        self.group = DedicatedGroup()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def get_nodes(self) -> list[Node]:
        return [self.node]  # waits on this node without becoming its executor

    def can_execute(self, entity: Any) -> bool:
        return entity.callback_group is self.group and super().can_execute(entity)

    def start(self) -> None:
        self._thread.start()

    def __enter__(self) -> "EventExecutor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self.wake()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self.shutdown(timeout_sec=1.0)

    def _run(self) -> None:
        self.group.thread_id = threading.get_ident()
        context = self.node.context
        while not self._stopping.is_set() and context.ok():
            try:
                self.spin_once(timeout_sec=POLL)
            except (ExternalShutdownException, ShutdownException):
                return
            except Exception as err:  # noqa: BLE001 - the event thread must survive anything
                if not context.ok() or self._stopping.is_set():
                    return  # the shutdown race, not a defect
                self.on_error(err)
