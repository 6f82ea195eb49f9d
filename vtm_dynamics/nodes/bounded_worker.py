"""Run a function in a warm child process with a wall-time deadline and an address-space limit.

Heavy work a message can cause (model parsing, rank decisions of a large constraint matrix) must neither stall the
process that listens on the ROS graph nor exhaust its memory. :class:`BoundedWorker` keeps one child process (started
with the ``forkserver`` method: never a plain ``fork`` of a process that runs DDS threads), imports the heavy modules
there once, then caps the child's address space with ``RLIMIT_AS``. Each call waits at most ``deadline`` seconds;
a child that overruns it, runs out of memory or dies is killed and replaced, and the call returns an
:class:`Outcome` whose ``reason`` is one line. One call runs at a time (calls from several threads queue on a lock).

No ROS here (no rclpy import), so the module is unit-testable and reusable by every node.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Callable, Sequence

#: Outcome kinds.
OK, ERROR, DEADLINE, MEMORY, CRASHED = "ok", "error", "deadline", "memory", "crashed"

_READY = "ready"
_MAX_REASON = 300


@dataclass(frozen=True)
class Outcome:
    """Result of one bounded call.

    ``kind``: ``ok`` (``value`` holds the return value), ``error`` (the function raised: ``error_type`` is the
    exception class name, ``expected`` whether it is a ``ValueError``, the documented bad-input error),
    ``deadline`` (wall time exceeded, child killed), ``memory`` (address-space limit reached) or ``crashed``
    (the child died). ``reason``: one line, at most 300 characters; ``seconds``: wall time of the call [s].
    """

    kind: str
    value: Any = None
    reason: str = ""
    error_type: str = ""
    expected: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.kind == OK


def one_line(text: str, limit: int = _MAX_REASON) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _format_bytes(n: int) -> str:
    return f"{n / 1e9:.3g} GB" if n >= 1e9 else f"{n / 1e6:.3g} MB"


def _serve(conn: Connection, preload: Sequence[str], memory_limit: int) -> None:
    """Child main loop: import ``preload``, cap the address space, then run tasks until the pipe closes."""
    import resource

    _die_with_parent()
    for name in preload:
        importlib.import_module(name)
    if memory_limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    conn.send((_READY, None))
    while True:
        try:
            func, args, kwargs = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, Any] = (OK, func(*args, **kwargs))
        except MemoryError:
            reply = (MEMORY, None)
        except (KeyboardInterrupt, SystemExit):
            return
        except BaseException as err:  # noqa: BLE001 - every error goes back as one line
            reply = (ERROR, (type(err).__name__, one_line(str(err)), isinstance(err, ValueError)))
        try:
            conn.send(reply)
        except MemoryError:
            conn.send((MEMORY, None))
        except Exception as err:  # noqa: BLE001 - e.g. a result that cannot be pickled
            conn.send((ERROR, (type(err).__name__, one_line(f"result cannot be returned: {err}"), False)))


def _die_with_parent() -> None:
    """Linux: the child is killed when its parent (the forkserver, which ends with the node) ends, so a busy child
    never outlives the node."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class BoundedWorker:
    """One warm child process that runs functions under a deadline [s] and an address-space limit [bytes].

    ``preload``: modules the child imports before the limit is set (their import time does not count against any
    deadline). ``startup_timeout``: how long a call waits for a (re)started child to be ready [s]. The functions
    and their arguments must be picklable (module-level functions).
    """

    def __init__(self, deadline: float, memory_limit: int, preload: Sequence[str] = (),
                 startup_timeout: float = 60.0, start_method: str = "forkserver") -> None:
        self.deadline = float(deadline)
        self.memory_limit = int(memory_limit)
        self.preload = tuple(preload)
        self.startup_timeout = float(startup_timeout)
        self._context = multiprocessing.get_context(start_method)
        self._lock = threading.Lock()
        self._process: Any = None
        self._conn: Connection | None = None
        self._ready = False
        self.restarts = 0
        self._closed = False
        self._start()

    # ------------------------------------------------------------------------------------------------ lifecycle
    def _start(self) -> None:
        parent, child = self._context.Pipe(duplex=True)
        process = self._context.Process(target=_serve, args=(child, self.preload, self.memory_limit),
                                        name="vtm-bounded-worker", daemon=True)
        process.start()
        child.close()
        self._process, self._conn, self._ready = process, parent, False

    def _kill(self) -> None:
        process, conn = self._process, self._conn
        self._process, self._conn, self._ready = None, None, False
        if conn is not None:
            conn.close()
        if process is not None:
            if process.is_alive():
                process.kill()
            process.join(timeout=5.0)

    def _replace(self) -> None:
        self._kill()
        self.restarts += 1
        if not self._closed:
            self._start()

    def _wait_ready(self) -> str:
        """Wait for the child's ready signal; return '' or a one-line reason."""
        if self._ready:
            return ""
        assert self._conn is not None
        try:
            if not self._conn.poll(self.startup_timeout):
                return f"worker not ready within {self.startup_timeout:g} s"
            kind, _ = self._conn.recv()
        except (EOFError, OSError):
            return "worker process exited during start-up"
        if kind != _READY:
            return "worker sent an unexpected start-up message"
        self._ready = True
        return ""

    @property
    def pid(self) -> int | None:
        """Process id of the current child (None after ``close``)."""
        return None if self._process is None else self._process.pid

    def close(self) -> None:
        """Stop the child; later calls return ``crashed``."""
        with self._lock:
            self._closed = True
            self._kill()

    # ---------------------------------------------------------------------------------------------------- calls
    def run(self, func: Callable[..., Any], *args: Any, deadline: float | None = None, **kwargs: Any) -> Outcome:
        """Run ``func(*args, **kwargs)`` in the child; never raises for anything the function or child does."""
        limit = self.deadline if deadline is None else float(deadline)
        with self._lock:
            if self._closed:
                return Outcome(CRASHED, reason="worker is closed")
            if self._process is None:
                self._start()
            reason = self._wait_ready()
            if reason:
                self._replace()
                return Outcome(CRASHED, reason=reason)
            assert self._conn is not None
            start = time.monotonic()
            try:
                self._conn.send((func, args, kwargs))
                finished = self._conn.poll(limit)
                reply = self._conn.recv() if finished else None
            except (EOFError, OSError, BrokenPipeError):
                self._replace()
                return Outcome(CRASHED, reason="worker process died (killed by the system or crashed)",
                               seconds=time.monotonic() - start)
            seconds = time.monotonic() - start
            if reply is None:
                self._replace()
                return Outcome(DEADLINE, reason=f"deadline of {limit:g} s exceeded", seconds=seconds)
            kind, payload = reply
            if kind == OK:
                return Outcome(OK, value=payload, seconds=seconds)
            if kind == MEMORY:
                self._replace()  # a child that ran out of memory may hold fragmented heap: start clean
                return Outcome(MEMORY, reason=f"memory limit of {_format_bytes(self.memory_limit)} exceeded",
                               seconds=seconds)
            name, text, expected = payload
            return Outcome(ERROR, reason=text, error_type=name, expected=bool(expected), seconds=seconds)

    def __enter__(self) -> "BoundedWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # best effort: never leave a child behind
        try:
            if not self._closed and self._process is not None and os.getpid() != self._process.pid:
                self._kill()
        except Exception:  # noqa: BLE001
            pass
