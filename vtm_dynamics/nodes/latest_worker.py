"""A background thread that runs the newest submitted job, so heavy preparation stays off a node's callback thread.

Jobs run one at a time in submission order, but only the newest job that has not started yet is kept: a job
submitted while another one waits replaces the waiting one (counted in ``replaced``). A job that raises is reported
through ``on_error`` and the thread goes on. No ROS here: the node decides what a job does and how its result is
installed (typically by one reference assignment, which is atomic in Python).

A thread does not help by itself when the job allocates hundreds of thousands of Python objects (e.g. converting a
long message): the cyclic garbage collector then runs full passes over the heap while holding the interpreter lock,
stalling every other thread for 100-300 ms at a time (measured on a 100,000-point trajectory). Such a job runs
inside :func:`collector_paused`; the objects it creates are freed by reference counting when it drops them.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from typing import Callable, Iterator

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


class LatestWorker:
    """One daemon thread; ``submit(job)`` never blocks on the job; ``stop()`` ends the thread after its job."""

    def __init__(self, name: str, on_error: Callable[[BaseException], None]) -> None:
        self._on_error = on_error
        self._cond = threading.Condition()
        self._pending: Callable[[], None] | None = None
        self._busy = False
        self._stopped = False
        self.replaced = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """A job is running or waiting."""
        with self._cond:
            return self._busy or self._pending is not None

    def submit(self, job: Callable[[], None]) -> bool:
        """Queue ``job``; returns True if it replaced a job that had not started yet."""
        with self._cond:
            replaced = self._pending is not None
            self.replaced += int(replaced)
            self._pending = job
            self._cond.notify()
            return replaced

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            self._pending = None
            self._cond.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                job, self._pending = self._pending, None
                self._busy = True
            try:
                job()
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as err:  # noqa: BLE001 - the worker must outlive any job
                self._on_error(err)
            finally:
                with self._cond:
                    self._busy = False
