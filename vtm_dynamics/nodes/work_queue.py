"""The one worker mechanism of the vtm_dynamics nodes: a thread that runs submitted jobs, so heavy work (predictions,
parsing, trajectory preparation, dispatching analyses) stays off the executor's callback threads. No rclpy here.

:class:`WorkQueue` runs one job at a time in submission order. *Merged work*: a job submitted with a ``key``
replaces the job of the same key that still waits (it keeps that job's place in the order; ``replaced`` counts the
replacements), so a burst of the same kind of work costs one run - the newest robot description, the newest
trajectory, one continuous evaluation, one pass over the due E-stop work. A job without a key always queues (the
caller bounds how many: e.g. ``max_pending_requests``). A job that raises is reported through ``on_error`` and the
thread goes on. The node decides what a job does and where its result goes; :meth:`WorkQueue.call` returns a
``concurrent.futures.Future`` of a function's value for callers that await it.

A thread does not help by itself when the job allocates hundreds of thousands of Python objects (e.g. converting a
long message): the cyclic garbage collector then runs full passes over the heap while holding the interpreter lock,
stalling every other thread for 100-300 ms at a time (measured on a 100,000-point trajectory). Such a job runs
inside :func:`collector_paused`; the objects it creates are freed by reference counting when it drops them.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import threading
from collections import deque
from typing import Any, Callable, Hashable, Iterator

_pause_lock = threading.Lock()
_pause_count = 0
_was_enabled = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Suspend Python's cyclic garbage collector (process-wide) while the block runs; nestable across threads:
    the collector is enabled again when the last block leaves, if it was enabled when the first one entered."""
    global _pause_count, _was_enabled
    with _pause_lock:
        if _pause_count == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pause_count += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pause_count -= 1
            if _pause_count == 0 and _was_enabled:
                gc.enable()


class _Entry:
    __slots__ = ("job", "key")

    def __init__(self, job: Callable[[], Any], key: Hashable | None) -> None:
        self.job, self.key = job, key


class WorkQueue:
    """One daemon thread named ``name``; ``submit`` never blocks on a job; ``stop`` ends the thread after its job
    (waiting jobs are dropped)."""

    def __init__(self, name: str, on_error: Callable[[BaseException], None]) -> None:
        self.name = name
        self._on_error = on_error
        self._cond = threading.Condition()
        self._waiting: deque[_Entry] = deque()
        self._keyed: dict[Hashable, _Entry] = {}
        self._running = False
        self._stopped = False
        self.replaced = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------------------------------ submitting
    def submit(self, job: Callable[[], Any], key: Hashable | None = None) -> bool:
        """Queue ``job``; with a ``key``, replace the waiting job of that key. Returns whether one was replaced."""
        with self._cond:
            if self._stopped:
                return False
            entry = self._keyed.get(key) if key is not None else None
            if entry is not None:
                entry.job = job
                self.replaced += 1
                return True
            entry = _Entry(job, key)
            self._waiting.append(entry)
            if key is not None:
                self._keyed[key] = entry
            self._cond.notify_all()  # the thread, and no one waiting in wait_idle instead of it
            return False

    def call(self, func: Callable[..., Any], *args: Any) -> concurrent.futures.Future:
        """Queue ``func(*args)`` and return the future of its value (or of its exception)."""
        future: concurrent.futures.Future = concurrent.futures.Future()

        def job() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(func(*args))
            except BaseException as err:  # noqa: BLE001 - handed to whoever awaits the future
                future.set_exception(err)

        self.submit(job)
        return future

    # ---------------------------------------------------------------------------------------------------- state
    def waiting(self, key: Hashable) -> bool:
        """A job of ``key`` waits (submitted, not started)."""
        with self._cond:
            return key in self._keyed

    @property
    def busy(self) -> bool:
        """A job is running or waiting."""
        with self._cond:
            return self._running or bool(self._waiting)

    def wait_idle(self, timeout: float) -> bool:
        """Block until no job runs or waits (at most ``timeout`` [s]); returns whether the queue is idle."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._running and not self._waiting, timeout)

    def __enter__(self) -> "WorkQueue":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            self._waiting.clear()
            self._keyed.clear()
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # --------------------------------------------------------------------------------------------------- thread
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                entry = self._waiting.popleft()
                if entry.key is not None:
                    del self._keyed[entry.key]
                self._running = True
            try:
                entry.job()
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as err:  # noqa: BLE001 - the worker must outlive any job
                self._on_error(err)
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()
