"""Continuous predictions in a process of their own, at a lower CPU priority, so that continuous mode never holds
the interpreter lock the E-stop path needs. Plain Python (no node, no executor).

Why a process: the threads of ``estop_predictor`` share one interpreter lock. Continuous mode at 100 Hz with its
envelope keeps a thread computing most of the time; on a loaded machine the operating system preempts that thread
while it holds the lock, and the E-stop path (the event thread taking the trigger, the trigger worker predicting)
then waits until the preempted thread runs again. Pausing at calls into the core (``work_priority``) cannot help
with that: the paused thread has to run to notice. Measured with ``bench/bench_estop_latency.py`` (continuous
mode at 100 Hz under a 1 kHz joint-state flood, 2 cores): the E-stop p95 grew by 3-25 ms with the predictions in
a thread of the node; a second process busy predicting beside the node changed it by 1.4 ms at nice 0 and not at
all at nice 19.

:class:`PredictionProcess` is a drop-in for the node's prediction call (``stop_worker.predict``) used by the
continuous rounds: each call sends the robot (once per robot object; the child keeps the last
:data:`MAX_ROBOTS`, each warmed up when it arrives: :class:`RobotShelf`), the brakes, the state and the settings
to the child (``python -m`` this module, in Linux's idle scheduling class: it computes only on a core that nothing
else wants; elsewhere at nice +:data:`CHILD_NICE`; it loads the compiled engine before it says it is ready),
which runs :func:`~vtm_dynamics.nodes.stop_worker.predict_with_brakes` and sends the
``Outcome`` back (with the continuous messages serialized, when asked: ``continuous_messages``);
:meth:`PredictionProcess.envelope` runs the live stopping distance's whole envelope (``live_stopping``) there in
one call. It never raises: a child that does not start, dies or does not answer within ``call_timeout``
makes the call a failure naming it; the child is then ended (by its PID) and started again at the next call, at
most once per ``restart_backoff``. Before each call ``before_call`` runs (the node passes the pause point of
``work_priority``: no new continuous prediction starts while E-stop work is due), and :meth:`suspend` stops the
child outright (SIGSTOP / SIGCONT) while E-stop work is due or running: a computing core beside the E-stop path
measurably slowed it (about 1 ms of its median in the bench, also for an idle-class process), and the node's
threads keep off one CPU, left to the child (``cpu_split``; with at least two CPUs). The child ends
with the node (Linux: a parent-death signal, which also reaches a stopped child; it is tied to the thread that
started the child, the node's own or its worker's, which live as long as the node).

The channel is the child's stdin and stdout, in frames (:mod:`prediction_channel`).
"""

from __future__ import annotations

import math
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from vtm_dynamics.core.estop.warm_up import compile_kernels, warm_up
from vtm_dynamics.nodes import cpu_split
from vtm_dynamics.nodes.prediction_channel import ChannelError, read_frame, write_frame
from vtm_dynamics.nodes.live_stopping import LiveStop, LiveStopping, StopSummary, envelope_parameters
from vtm_dynamics.nodes.stop_worker import Outcome, predict_with_brakes

#: nice increment of the child where the idle scheduling class is not available (the lowest weight)
CHILD_NICE = 19
#: robots the child keeps (the node's model and its payload variants for the envelope)
MAX_ROBOTS = 16
#: [s] a child's start and its first prediction (imports; compiled kernels loaded from their cache, or compiled
#: on a machine that has no cache yet), and its first prediction for each robot it is sent (the robot's warm-up),
#: may take this long beside the call's own bound
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class StateQV:
    """The part of a joint-state snapshot a prediction uses: ``q`` [rad, m], ``v`` [rad/s, m/s]."""

    q: np.ndarray
    v: np.ndarray


class PredictionProcess:
    """The node's prediction call answered by a child process (module docstring). ``settings``: the node's
    ``PredictionSettings``; ``call_timeout`` [s] per call; thread-safe (calls are serialised)."""

    def __init__(self, settings: Any, call_timeout: float, *, nice: int = CHILD_NICE,
                 restart_backoff: float = 1.0, before_call: Callable[[], Any] | None = None,
                 command: list[str] | None = None, start_timeout: float = START_TIMEOUT) -> None:
        self.settings, self.call_timeout, self.nice = settings, float(call_timeout), int(nice)
        self.start_timeout = float(start_timeout)
        self.restart_backoff, self.before_call = float(restart_backoff), before_call
        self.command = command or [sys.executable, "-m", __name__, str(self.nice), str(os.getpid())]
        self.calls = self.restarts = 0
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._ready = self._answered = False
        self._robots: OrderedDict[int, tuple[Any, int]] = OrderedDict()  # id(robot) -> (robot, token)
        self._sent: set[int] = set()  # tokens the current child holds
        self._next_token = 0
        self._failed_at = -float("inf")
        self._suspended_at: float | None = None  # monotonic [s] since the child is stopped for E-stop work
        self._suspended_total = 0.0  # [s] the child was stopped so far (a call's deadline excludes it)
        self._failure = ""
        self._closed = False
        self._confined = False  # this instance holds the node's threads off the child's CPU (``cpu_split``)
        self.cpus = cpu_split.describe(None)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the child now (it imports in parallel with the caller's set-up); calls wait for it."""
        with self._lock:
            self._spawn()

    def _spawn(self) -> None:
        if self._proc is not None or self._closed:
            return
        self._proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=None, close_fds=True)
        split = cpu_split.current_split()  # the node's threads keep off the CPU left to the child
        if split is not None and not self._confined:
            cpu_split.confine_node(split)
            self._confined = True
        self.cpus = cpu_split.describe(split)
        self._ready = False
        self._answered = False  # the first prediction of a child may load or compile the kernels
        self._sent.clear()
        self.restarts += 1

    def suspend(self, stop: bool) -> None:
        """Stop the child (``stop``) while E-stop work runs, so that it computes nothing beside it, or let it go
        on; a call waiting for it meanwhile waits that much longer. Safe from any thread, cheap (one signal)."""
        proc = self._proc
        now = time.monotonic()
        if stop and self._suspended_at is None:
            self._suspended_at = now
        elif not stop and self._suspended_at is not None:
            self._suspended_total += now - self._suspended_at
            self._suspended_at = None
        else:
            return
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGSTOP if stop else signal.SIGCONT)  # our own child, by its PID
            except OSError:
                pass

    def _suspended_time(self) -> float:
        since = self._suspended_at
        return self._suspended_total + (time.monotonic() - since if since is not None else 0.0)

    def _end_child(self, why: str) -> None:
        proc, self._proc = self._proc, None
        self._ready = False
        self._sent.clear()
        self._failed_at, self._failure = time.monotonic(), why
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGCONT)  # a stopped child cannot see its input end
            except OSError:
                pass
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=1.0)  # it ends on its own once stdin is closed
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5.0)

    def _token(self, robot: Any) -> int:
        key = id(robot)
        entry = self._robots.get(key)
        if entry is None or entry[0] is not robot:
            self._next_token += 1
            entry = (robot, self._next_token)  # the strong reference keeps id(robot) from being reused
            self._robots[key] = entry
            while len(self._robots) > MAX_ROBOTS:
                self._robots.popitem(last=False)
        self._robots.move_to_end(key)
        return entry[1]

    def predict(self, model: Any, robot: Any, state: Any, **options: Any) -> Any:
        """What ``stop_worker.predict(model, robot, state, settings, **options)`` returns, computed in the child
        (``messages``: a ``continuous_messages.MessageRequest``, to have its messages built there too)."""
        brakes = options.pop("brakes", None)
        messages = options.pop("messages", None)
        brakes = brakes if brakes is not None else model.brakes
        if brakes is None:
            return Outcome(None, model.brake_error, 0.0)
        reply = self._request("predict", robot, brakes, state, (options, messages))
        return reply if isinstance(reply, Outcome) else Outcome(None, reply, 0.0)

    def envelope(self, model: Any, robot: Any, state: Any, nominal: Any, p: dict[str, Any], payload_frame: str) -> Any:
        """``LiveStopping.evaluate`` of ``nominal`` (a core StopPrediction from ``state``) with the model's
        brakes, every case predicted in the child in one call; a failure is a ``LiveStop`` naming it."""
        summary = StopSummary.of(nominal)
        reply = self._request("envelope", robot, model.brakes, state,
                              (summary, envelope_parameters(p), payload_frame))
        if isinstance(reply, LiveStop):
            return reply
        d, length, t = summary.values()
        return LiveStop(d, length, t, math.nan, math.nan, math.nan, 1, 0.0, reply)

    def _request(self, kind: str, robot: Any, brakes: Any, state: Any, extra: tuple) -> Any:
        """The child's answer to one request, or a one-line reason (str) why there is none."""
        if self.before_call is not None:
            self.before_call()
        with self._lock:
            self.calls += 1
            if self._closed:
                return "continuous predictions: the node is shutting down"
            if self._proc is None:
                if time.monotonic() - self._failed_at < self.restart_backoff:
                    return f"continuous prediction process unavailable ({self._failure})"
                self._spawn()
            qv = StateQV(np.asarray(state.q, dtype=float), np.asarray(state.v, dtype=float))
            try:
                return self._exchange(kind, robot, brakes, qv, extra)
            except (ChannelError, OSError, pickle.PickleError, EOFError, ValueError) as err:
                why = str(err) or type(err).__name__
                self._end_child(why)
                return f"continuous prediction process: {why}"

    def _exchange(self, kind: str, robot: Any, brakes: Any, state: StateQV, extra: tuple) -> Any:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        if not self._ready:
            reply = read_frame(fd, time.monotonic() + self.start_timeout)
            if reply != ("ready",):
                raise ChannelError("the prediction process did not start")
            self._ready = True
        token = self._token(robot)
        for attempt in range(2):
            payload = robot if token not in self._sent else None
            # the child's first answer, and its first for a robot it is sent (it warms that robot up first:
            # RobotShelf), may take the start allowance beside the call's own time
            first = self.start_timeout if not self._answered or payload is not None else 0.0
            bound, paused = time.monotonic() + self.call_timeout + first, self._suspended_time()

            def deadline() -> float:  # time the child spent stopped for E-stop work does not count
                return bound + self._suspended_time() - paused
            write_frame(proc.stdin, (kind, token, payload, brakes, state, self.settings, extra), deadline)
            self._sent.add(token)
            reply = read_frame(fd, deadline)
            if reply[0] == "answer":
                self._answered = True
                return reply[1]
            if reply[0] == "missing" and attempt == 0:
                self._sent.discard(token)
                continue
            raise ChannelError(str(reply[1]) if reply[0] == "error" else f"unexpected answer {reply[0]!r}")
        raise ChannelError("the robot did not reach the prediction process")

    def close(self) -> None:
        """End the child at once (a call waiting for it returns a failure right away)."""
        self._closed = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()  # our own child, by its PID: a call in progress reads the end of its output
        with self._lock:
            self._end_child("closed")
            if self._confined:
                cpu_split.release_node()
                self._confined = False

    def __enter__(self) -> "PredictionProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _answer(kind: str, robot: Any, brakes: Any, state: StateQV, settings: Any, extra: tuple,
            live: LiveStopping) -> Any:
    """The child's computation of one request (``PredictionProcess.predict`` / ``envelope``)."""
    if kind == "predict":
        options, messages = extra
        outcome = predict_with_brakes(robot, brakes, state, settings, **options)
        if messages is not None and outcome.result is not None:
            from vtm_dynamics.nodes.continuous_messages import serialized_messages

            outcome = replace(outcome, messages=serialized_messages(robot, outcome.result, messages))
        return outcome
    if kind == "envelope":
        summary, p, payload_frame = extra
        return live.evaluate(robot, brakes, summary, p, payload_frame,
                             lambda variant, scaled: predict_with_brakes(variant, scaled, state, settings))
    raise ValueError(f"unknown request {kind!r}")


def die_with_parent(parent: int | None) -> None:
    """Linux: end this process when the node's process ends, also while it is stopped (a stopped child never
    reads the end of its input); if the node already ended, end now."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if parent is not None and os.getppid() != parent:
        os._exit(0)


def lower_priority(nice: int) -> str:
    """Put this process into Linux's idle scheduling class (it runs only on a core nothing else wants; no
    privilege needed to lower a priority), else raise its nice value by ``nice``; returns which."""
    idle = getattr(os, "SCHED_IDLE", None)
    if idle is not None:
        try:
            os.sched_setscheduler(0, idle, os.sched_param(0))
            return "idle"
        except OSError:
            pass
    try:
        os.nice(nice)
        return f"nice {nice}"
    except OSError:
        return "unchanged"


class RobotShelf:
    """The robots a child keeps, by the node's token (the last :data:`MAX_ROBOTS`). A robot is warmed up when it
    arrives (``warm``: :func:`~vtm_dynamics.core.estop.warm_up.warm_up` with the brakes it came with), before its
    first prediction is timed: ``prediction_deadline`` bounds a prediction, not the loading of the compiled engine
    and of the model's tables, which made the first continuous round of a freshly started node a deadline failure
    on a loaded machine (3.5 s against 2 s)."""

    def __init__(self, warm: Callable[[Any, Any], Any] = warm_up) -> None:
        self.warm = warm
        self._robots: OrderedDict[int, Any] = OrderedDict()

    def get(self, token: int, robot: Any, brakes: Any) -> Any:
        """The robot of ``token``: ``robot`` when it is sent (kept and warmed up), else the one kept; None when
        the child does not hold it (the node sends it again)."""
        if robot is not None:
            self._robots[token] = robot
            while len(self._robots) > MAX_ROBOTS:
                self._robots.popitem(last=False)
            try:
                self.warm(robot, brakes)
            except Exception:  # noqa: BLE001 - the prediction that follows reports what is wrong with the model
                pass
        kept = self._robots.get(token)
        if kept is not None:
            self._robots.move_to_end(token)
        return kept


def child_main(argv: list[str]) -> int:
    """The child: answer frames on stdin until it closes (module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the node's Ctrl-C reaches the whole group; stdin's end stops us
    die_with_parent(int(argv[1]) if len(argv) > 1 else None)
    lower_priority(int(argv[0]) if argv else CHILD_NICE)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into the channel
    robots = RobotShelf()
    live = LiveStopping()  # keeps the payload variants of the robots it is given
    compile_kernels()  # loaded from their cache while the node sets up, not in the first call's deadline
    write_frame(out, ("ready",))
    fd = sys.stdin.fileno()
    while True:
        try:
            request = read_frame(fd)
        except ChannelError:
            return 0  # the node closed the channel
        try:
            kind, token, robot, brakes, state, settings, extra = request
            robot = robots.get(token, robot, brakes)
            if robot is None:
                write_frame(out, ("missing", token))
                continue
            write_frame(out, ("answer", _answer(kind, robot, brakes, state, settings, extra, live)))
        except (BrokenPipeError, ChannelError):
            return 0
        except Exception as err:  # noqa: BLE001 - a malformed request is answered, the child goes on
            write_frame(out, ("error", f"{type(err).__name__}: {err}"))


if __name__ == "__main__":
    raise SystemExit(child_main(sys.argv[1:]))
