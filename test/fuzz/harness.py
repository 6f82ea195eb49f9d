"""What the fuzz tests need around a node: captured log lines, a record of files opened, and ONE adapter per node
that says which callable handles which topic or service.

The adapters are the only place that knows the nodes' private callback names. When a node is restructured
(callbacks renamed, work moved to a worker), adjust its adapter here; the tests use only the adapter.
"""

from __future__ import annotations

import os
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

    def words(self) -> tuple[str, ...]:
        return tuple(w for ws in self.vocabulary.values() for w in ws)

    def reset_log_limits(self) -> None:
        for value in list(vars(self.node).values()):
            for attr in ("_last", "_repeats"):  # graph.LogLimiter (and the older per-node OnceLog)
                d = getattr(value, attr, None)
                if isinstance(d, dict):
                    d.clear()
        logger = self.node.get_logger()
        if isinstance(getattr(logger, "contexts", None), dict):
            logger.contexts.clear()  # rclpy's own throttle / once filters, per call site


def estop_predictor_adapter(node: Node) -> NodeAdapter:
    from vtm_msgs.srv import PredictStop

    return NodeAdapter(
        node=node,
        logger="estop_predictor",
        inputs={
            "joint_states": node._on_joint_state,
            "estop": node._on_estop,
            "brake_events": node._on_brake_event,
            "lock_events": node._on_lock_event,
            "robot_description": node._on_description,
        },
        services={"predict_stop": lambda req: node._on_predict_stop(req, PredictStop.Response())},
        vocabulary={
            "joint_states": ("joint_states",),
            "estop": ("estop",),
            "brake_events": ("brake_events",),
            "lock_events": ("lock_events",),
            "robot_description": ("robot_description",),
            "predict_stop": ("predict_stop", "state", "stop_category", "brake_config_yaml", "tcp_frame", "horizon"),
        },
    )


def solvability_reporter_adapter(node: Node) -> NodeAdapter:
    from vtm_msgs.srv import AnalyzeSolvability

    return NodeAdapter(
        node=node,
        logger="solvability_reporter",
        inputs={"robot_description": node._on_description},
        services={"analyze": lambda req: node._analyze_service(req, AnalyzeSolvability.Response())},
        # the report of an analysable description is itself a warning when some reaction is not unique
        vocabulary={"robot_description": ("robot_description",), "report": ("rank",),
                    "analyze": ("analyze", "urdf", "planar", "positions")},
    )


def projection_controller_adapter(node: Node) -> NodeAdapter:
    return NodeAdapter(
        node=node,
        logger="projection_controller",
        inputs={
            "joint_states": node._on_joint_state,
            "trajectory": node._on_trajectory,
            "lock_events": node._on_lock_event,
        },
        vocabulary={"joint_states": ("joint_states",), "trajectory": ("trajectory",),
                    "lock_events": ("lock_events",)},
    )


def projection_controller_cycle(node: Node) -> Callable[[], Any]:
    """One control cycle of the controller, called directly (part of its adapter)."""
    return node._on_control


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
    t0 = time.perf_counter()
    error, value = None, None
    try:
        value = handler(msg)
    except Exception as err:  # noqa: BLE001 - an escaping exception is exactly what the test looks for
        error = err
    seconds = time.perf_counter() - t0
    return Outcome(error, tuple(capture.since(mark, adapter.logger)), value, seconds)


def describe(outcome: Outcome) -> str:
    lines = "; ".join(f"[{x.severity}] {x.text[:200]}" for x in outcome.lines)
    err = f"{type(outcome.error).__name__}: {str(outcome.error)[:200]}" if outcome.error else "none"
    return f"exception {err}; {len(outcome.lines)} lines: {lines}; {outcome.seconds:.3f} s"


def check_outcome(adapter: NodeAdapter, topic: str, outcome: Outcome, bad: bool, note: str) -> None:
    """The properties every delivered input must have (see docs/robustness.md, "Fuzzing")."""
    what = f"{topic} input ({note}): {describe(outcome)}"
    assert outcome.error is None, "exception escaped the callback: " + what
    assert outcome.seconds <= CALLBACK_BOUND_S, "callback blocked the node: " + what
    assert len(outcome.lines) <= 1, "more than one warning/error line for one input: " + what
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
