"""What the fuzz tests need around a node: captured log lines, a record of files opened, and ONE adapter per node
that says which callable handles which topic or service.

The adapters are the only place that knows the nodes' private callback names. When a node is restructured
(callbacks renamed, work moved to a worker), adjust its adapter here; the tests use only the adapter.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import rclpy
from rclpy.impl import rcutils_logger
from rclpy.node import Node

WARN = 30  # rcutils severities: DEBUG 10, INFO 20, WARN 30, ERROR 40, FATAL 50
CALLBACK_BOUND_S = 2.0  # [s] generous bound on one callback: the stalls were 7.6 s .. 93 s
LINE_LIMIT = 2000  # [characters] one log line; a line quoting a whole message is a log flood


# ------------------------------------------------------------------------------------------------ log capture
@dataclass(frozen=True)
class LogLine:
    severity: int
    logger: str
    text: str


class LogCapture:
    """Every line any rclpy logger of this process emits (after rclpy's own filters), from any thread."""

    def __init__(self) -> None:
        self.lines: list[LogLine] = []
        self._lock = threading.Lock()
        self._original: Callable[..., Any] | None = None

    def install(self) -> "LogCapture":
        backend = rcutils_logger._rclpy
        self._original = backend.rclpy_logging_rcutils_log

        def record(severity: Any, name: str, message: str, *rest: Any) -> Any:
            with self._lock:
                self.lines.append(LogLine(int(severity), str(name), str(message)))
            return self._original(severity, name, message, *rest)

        backend.rclpy_logging_rcutils_log = record
        return self

    def uninstall(self) -> None:
        if self._original is not None:
            rcutils_logger._rclpy.rclpy_logging_rcutils_log = self._original
            self._original = None

    def mark(self) -> int:
        with self._lock:
            return len(self.lines)

    def since(self, mark: int, logger: str | None = None, min_severity: int = WARN) -> list[LogLine]:
        with self._lock:
            lines = self.lines[mark:]
        return [x for x in lines if x.severity >= min_severity and (logger is None or x.logger.startswith(logger))]

    def all_text(self) -> str:
        with self._lock:
            return "\n".join(x.text for x in self.lines)


# ------------------------------------------------------------------------------------------------ file opens
class OpenRecorder:
    """Records every file the Python runtime opens below ``root`` (a CPython audit hook, installed once per
    process). Files opened by C++ code (urdfdom, yaml-cpp) are not seen: for those, the fuzz files hold a secret
    marker that must never appear in a reply, a log line or the loaded model."""

    _installed: "OpenRecorder | None" = None

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self.watched_system = ("/etc/hostname", "/etc/passwd", "/proc/self/environ", "/proc/self/cmdline")
        self.opened: list[str] = []
        self.active = False

    @classmethod
    def install(cls, root: str) -> "OpenRecorder":
        if cls._installed is None:
            rec = cls(root)
            sys.addaudithook(rec._hook)
            cls._installed = rec
        return cls._installed

    def _hook(self, event: str, args: tuple) -> None:
        if not self.active or event != "open" or not args or not isinstance(args[0], (str, bytes)):
            return
        path = args[0].decode(errors="replace") if isinstance(args[0], bytes) else args[0]
        real = os.path.realpath(os.path.expanduser(path))
        if real.startswith(self.root) or real in self.watched_system:
            self.opened.append(path)

    @contextmanager
    def watching(self) -> Iterator[list[str]]:
        start = len(self.opened)
        self.active = True
        found: list[str] = []
        try:
            yield found
        finally:
            self.active = False
            found.extend(self.opened[start:])


# ------------------------------------------------------------------------------------------------ adapters
@dataclass
class NodeAdapter:
    """How the fuzz tests reach one node: ``inputs`` topic -> callable(msg); ``services`` name -> callable(request)
    returning the response; ``vocabulary`` topic or service -> words of which a log line or reply about it must
    contain one (the field names); ``reset_log_limits`` forgets which lines were already logged, so that every
    bad input must produce its own line."""

    node: Node
    logger: str
    inputs: dict[str, Callable[[Any], Any]]
    services: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    vocabulary: dict[str, tuple[str, ...]] = field(default_factory=dict)
    forget: Callable[[], None] | None = None  # a node's own "said once" memory, cleared with the log limits
    # seconds spent so far in work that a running node does off its callback thread (its worker), but that runs
    # inside the call here because the node is on no executor: not counted against the callback bound
    off_thread_seconds: Callable[[], float] = lambda: 0.0

    def words(self) -> tuple[str, ...]:
        return tuple(w for ws in self.vocabulary.values() for w in ws)

    def reset_log_limits(self) -> None:
        for value in list(vars(self.node).values()):
            for attr in ("_last", "_repeats"):  # graph.LogLimiter (and the older per-node OnceLog)
                d = getattr(value, attr, None)
                if isinstance(d, dict):
                    d.clear()
        if self.forget is not None:
            self.forget()
        logger = self.node.get_logger()
        if isinstance(getattr(logger, "contexts", None), dict):
            logger.contexts.clear()  # rclpy's own throttle / once filters, per call site


WORKER_WAIT_S = 30.0  # [s] generous bound on a node's worker finishing what one input handed it


def run_coroutine(coro: Any) -> Any:
    """Run a callback coroutine that never really waits (the node is on no executor, so its worker hand-overs
    complete synchronously) and return its value; a coroutine that would wait is a harness error."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("callback coroutine waited although the node has no executor")


def estop_predictor_adapter(node: Node) -> NodeAdapter:
    """Joint states: the node's input handler (``info`` None: receipt is the wall clock, one unknown publisher;
    unguarded, so an exception would escape). Events: the same, then the adapter waits until the trigger worker
    has published what the event caused. ``robot_description``: the handler queues the text for the auxiliary
    worker; the adapter waits until the worker is idle again (its log lines belong to the input).
    ``predict_stop`` and ``check_trajectory``: the services' parts, as the worker runs them (validation and work
    of one request). ``person_position``: the live separation distance's input handler."""
    from vtm_msgs.srv import CheckTrajectory, PredictStop

    def trigger_work_done() -> bool:
        session = node.session
        with session.lock:
            stops = session.closing + ([session.current] if session.current is not None else [])
            return all(not s.dirty and s.in_flight == 0 for s in stops)

    def event(callback: Callable[[Any], Any]) -> Callable[[Any], None]:
        """An event callback, then the wait for the trigger worker: a trigger's prediction (or its failure line)
        belongs to the event that caused it."""

        def deliver_event(msg: Any) -> None:
            callback(msg)
            end = time.monotonic() + WORKER_WAIT_S
            while not trigger_work_done():
                if time.monotonic() > end:
                    raise TimeoutError(f"the trigger worker did not finish within {WORKER_WAIT_S} s")
                time.sleep(0.0005)

        return deliver_event

    def description(msg: Any) -> None:
        node.on_description(msg)
        if not node.aux.wait_idle(WORKER_WAIT_S):
            raise TimeoutError(f"robot_description: the worker did not finish within {WORKER_WAIT_S} s")

    return NodeAdapter(
        node=node,
        logger="estop_predictor",
        inputs={
            "joint_states": node.on_joint_state,
            "estop": event(node.on_estop),
            "brake_events": event(node.on_brake_event),
            "lock_events": event(node.on_lock_event),
            "robot_description": description,
            "person_position": node.separation.on_person,
        },
        services={"predict_stop": lambda req: node.requests.answer(req, PredictStop.Response()),
                  "check_trajectory": lambda req: node.checks.answer(req, CheckTrajectory.Response())},
        vocabulary={
            "joint_states": ("joint_states",),
            "estop": ("estop",),
            "brake_events": ("brake_events",),
            "lock_events": ("lock_events",),
            "robot_description": ("robot_description",),
            "predict_stop": ("predict_stop", "state", "stop_category", "brake_config_yaml", "tcp_frame", "horizon"),
            "check_trajectory": ("check_trajectory", "trajectory", "obstacles", "obstacle_poses", "obstacle_names",
                                 "floor_height", "margin", "stop_categories", "sample_period", "check_max_stops",
                                 "check_deadline"),
            "person_position": ("person_position",),
        },
    )


def solvability_reporter_adapter(node: Node) -> NodeAdapter:
    """Both callbacks are coroutines that await the analysis worker; on no executor the wait is synchronous, so
    the time in the worker (a child process; off the callback thread in a running node) is reported apart."""
    from vtm_msgs.srv import AnalyzeSolvability

    spent = [0.0]
    run = node.worker.run

    def timed_run(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return run(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t0

    node.worker.run = timed_run
    return NodeAdapter(
        node=node,
        logger="solvability_reporter",
        inputs={"robot_description": lambda msg: run_coroutine(node._on_description(msg))},
        services={"analyze": lambda req: run_coroutine(node._analyze_service(req, AnalyzeSolvability.Response()))},
        # the report of an analysable description is itself a warning when some reaction is not unique
        vocabulary={"robot_description": ("robot_description",), "report": ("rank",),
                    "analyze": ("analyze", "urdf", "planar", "positions")},
        off_thread_seconds=lambda: spent[0],
    )


def projection_controller_adapter(node: Node) -> NodeAdapter:
    """The node's input handlers and its trajectory intake (unguarded). The trajectory subscription is raw: the
    adapter serializes the message as the middleware would, and waits for the worker when the intake handed the
    bytes to it."""
    from rclpy.serialization import serialize_message

    def trajectory(msg: Any, task: bool = False) -> None:
        node.intake.submit(serialize_message(msg), task=task)
        if not node.worker.wait_idle(WORKER_WAIT_S):
            raise TimeoutError(f"trajectory: the worker did not finish within {WORKER_WAIT_S} s")

    return NodeAdapter(
        node=node,
        logger="projection_controller",
        inputs={
            "joint_states": node.on_joint_state,
            "trajectory": trajectory,
            "task_trajectory": lambda msg: trajectory(msg, task=True),
            "lock_events": node.on_lock_event,
            "constraint_wrench_setpoint": node.on_wrench,
            "constraint_wrench": lambda msg: node.on_wrench(msg, measured=True),
        },
        vocabulary={"joint_states": ("joint_states",), "trajectory": ("trajectory",),
                    "lock_events": ("lock_events",)},
        forget=node.loop.reported_unknown.clear,  # unknown joint names are reported once per name
    )


def projection_controller_cycle(node: Node) -> Callable[[], Any]:
    """One control cycle of the controller, called directly (part of its adapter)."""
    return node.update


def projection_controller_commands(node: Node) -> list[list[float]]:
    """Record every effort command the controller publishes (part of its adapter): returns the list it fills."""
    sent: list[list[float]] = []
    publisher = node.pub_cmd
    original = publisher.publish

    def publish(msg: Any) -> None:
        sent.append(list(msg.data))
        original(msg)

    publisher.publish = publish
    return sent


def record_publishers(node: Node) -> list[tuple[str, Any]]:
    """Record (topic, message) of everything ``node`` publishes from now on, on every publisher it holds."""
    from rclpy.publisher import Publisher

    sent: list[tuple[str, Any]] = []
    for publisher in list(node.publishers):
        if not isinstance(publisher, Publisher):
            continue
        original, topic = publisher.publish, publisher.topic_name

        def publish(msg: Any, _original=original, _topic=topic) -> None:
            sent.append((_topic, msg))
            _original(msg)

        publisher.publish = publish
    return sent


# ------------------------------------------------------------------------------------------------ checks
@dataclass(frozen=True)
class Outcome:
    """What one delivered input caused: the exception that escaped (or None), the lines logged meanwhile
    (warning and above), the return value and the wall time [s]."""

    error: BaseException | None
    lines: tuple[LogLine, ...]
    value: Any
    seconds: float


def deliver(adapter: NodeAdapter, capture: LogCapture, handler: Callable[[Any], Any], msg: Any) -> Outcome:
    """Call ``handler(msg)`` as the executor would, and report what happened."""
    mark = capture.mark()
    off0 = adapter.off_thread_seconds()
    t0 = time.perf_counter()
    error, value = None, None
    try:
        value = handler(msg)
    except Exception as err:  # noqa: BLE001 - an escaping exception is exactly what the test looks for
        error = err
    seconds = time.perf_counter() - t0 - (adapter.off_thread_seconds() - off0)
    return Outcome(error, tuple(capture.since(mark, adapter.logger)), value, seconds)


def describe(outcome: Outcome) -> str:
    lines = "; ".join(f"[{x.severity}] {x.text[:200]}" for x in outcome.lines)
    err = f"{type(outcome.error).__name__}: {str(outcome.error)[:200]}" if outcome.error else "none"
    return f"exception {err}; {len(outcome.lines)} lines: {lines}; {outcome.seconds:.3f} s"


MAX_PROBLEMS = 3  # distinct problems one message may have that each get their own line (e.g. unknown joints, no
# velocities); more lines for one input is a log flood


def problem_of(text: str) -> str:
    """What a line is about, for "one line per distinct problem": its text without numbers (a value repeated in
    another form is the same problem), the first 80 characters."""
    return re.sub(r"[-+]?\d[\d.eE+-]*", "#", text)[:80]


def check_outcome(adapter: NodeAdapter, topic: str, outcome: Outcome, bad: bool, note: str) -> None:
    """The properties every delivered input must have (see docs/robustness.md, "Fuzzing")."""
    what = f"{topic} input ({note}): {describe(outcome)}"
    assert outcome.error is None, "exception escaped the callback: " + what
    assert outcome.seconds <= CALLBACK_BOUND_S, "callback blocked the node: " + what
    assert len(outcome.lines) <= MAX_PROBLEMS, f"more than {MAX_PROBLEMS} warning/error lines for one input: " + what
    problems = [problem_of(x.text) for x in outcome.lines]
    assert len(set(problems)) == len(problems), "the same problem reported twice for one input: " + what
    words = adapter.words()
    for line in outcome.lines:
        assert any(w in line.text for w in words), "log line names no field: " + what
        assert len(line.text) <= LINE_LIMIT, f"log line of {len(line.text)} characters: " + what
    if bad:
        own = adapter.vocabulary.get(topic, (topic,))
        assert any(any(w in x.text for w in own) for x in outcome.lines), \
            "bad input got no line naming the field: " + what


def surveyable(test: Callable[..., Any]) -> Callable[..., Any]:
    """Put between ``@given`` and the test function. With ``VTM_FUZZ_SURVEY=<file>`` set, a failing example is
    appended to that file (one line) instead of failing the test, so one run lists every distinct failure rather
    than stopping at the first; without it (CI), the decorator changes nothing."""
    import functools

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> Any:
        path = os.environ.get("VTM_FUZZ_SURVEY")
        if not path:
            return test(*args, **kwargs)
        try:
            return test(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - recorded for the survey
            first = " ".join(str(err).split())[:700]
            with open(path, "a", encoding="utf-8") as f:
                f.write(f"{test.__module__.rsplit('.', 1)[-1]}::{test.__name__}: {type(err).__name__}: {first}\n")
            return None

    return run


def init_ros() -> None:
    if not rclpy.ok():
        rclpy.init()
