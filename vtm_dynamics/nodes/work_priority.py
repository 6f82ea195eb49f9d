"""E-stop work first: other work of a node pauses while an E-stop prediction is due or running. Plain Python.

``estop_predictor`` computes in Python threads that share one interpreter lock: while the auxiliary worker
predicts (continuous mode, services), an E-stop prediction gets about half the interpreter, however the operating
system schedules the threads. Priorities of threads do not help with that lock; the other thread has to *stop*.
:class:`UrgentWork` is the flag the E-stop path raises (a trigger, a revision) and the trigger worker settles when
it finds no more work; code that runs inside :meth:`UrgentWork.yielding` pauses at its next call of a function of
the physics (``vtm_dynamics.core``) while the flag is up, blocked on a condition (not holding the interpreter lock)
until the E-stop work is done or ``max_wait`` passes. The pause points come from a trace function of that thread
alone (``sys.settrace``, chained to any tracer already installed, e.g. a coverage tool), installed only for the
duration of the block. Pausing only on entry to the core is what makes this safe: the core is pure (it takes no
lock), so a paused thread never holds a lock of the node (state, session, log limiter) that the E-stop path waits
for. A core prediction calls core functions thousands of times, so the pause comes within microseconds; the
price is the trace function itself (about a third more time for a prediction inside the block, measured on a UR5).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Callable, Iterator

#: Calls into this package are the pause points (pure physics: no locks held there).
PAUSE_PACKAGE = "vtm_dynamics.core"
#: The nodes' message builders: pure functions from results to messages (no lock, no state, no publishing), so
#: calls into them are safe pause points too (``test_work_priority`` checks they use no threading).
MESSAGE_BUILDERS = ("vtm_dynamics.nodes.prediction_io", "vtm_dynamics.nodes.markers",
                    "vtm_dynamics.nodes.conversions")


class UrgentWork:
    """The "E-stop work pending" flag with an epoch, and cooperative pauses of other work (module docstring)."""

    def __init__(self, max_wait: float = 5.0, on_change: Callable[[bool], Any] | None = None) -> None:
        self.max_wait = float(max_wait)
        self.on_change = on_change  # called with True when the flag goes up, False when it comes down
        self._cond = threading.Condition()
        self._epoch = 0
        self.urgent = False  # read without the lock by the pause points (a single attribute read)
        self.pauses = 0  # how often other work paused for E-stop work

    def raise_(self) -> None:
        """E-stop work is due (call after the work is recorded where the E-stop worker will find it)."""
        with self._cond:
            self._epoch += 1
            if not self.urgent and self.on_change is not None:
                self.on_change(True)
            self.urgent = True

    @property
    def epoch(self) -> int:
        with self._cond:
            return self._epoch

    def settle(self, epoch: int) -> None:
        """The E-stop worker found no work after reading ``epoch``: lower the flag unless work was raised since."""
        with self._cond:
            if epoch == self._epoch and self.urgent:
                self._lower()

    def release(self) -> None:
        """Lower the flag whatever the epoch (the node shuts down: no E-stop work will settle it)."""
        with self._cond:
            if self.urgent:
                self._lower()

    def _lower(self) -> None:
        self.urgent = False
        self._cond.notify_all()
        if self.on_change is not None:
            self.on_change(False)

    def pause(self) -> bool:
        """Block while E-stop work is pending (at most ``max_wait`` [s]); returns whether it paused."""
        with self._cond:
            if not self.urgent:
                return False
            self.pauses += 1
            self._cond.wait_for(lambda: not self.urgent, timeout=self.max_wait)
            return True

    @contextlib.contextmanager
    def yielding(self, package: str | tuple[str, ...] = PAUSE_PACKAGE) -> Iterator[None]:
        """Run the block with pause points at every call into ``package`` (one or several) made by this thread
        (module docstring)."""
        previous = sys.gettrace()
        prefixes = (package,) if isinstance(package, str) else tuple(package)

        def hook(frame: Any, event: str, arg: Any) -> Any:
            if self.urgent and frame.f_globals.get("__name__", "").startswith(prefixes):
                self.pause()
            return previous(frame, event, arg) if previous is not None else None

        sys.settrace(hook)
        try:
            yield
        finally:
            sys.settrace(previous)
