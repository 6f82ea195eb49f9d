"""What every vtm_dynamics node shares on the ROS graph: QoS profiles, the discovery-range default, a log limiter
keyed by the message, a token bucket for rate-limiting *work*, and a guard that keeps any callback alive.

No physics here, and nothing happens at import: ``apply_isolation_defaults`` is called by the common ``main``
(``node_main.run_node``) and by the in-process entry points before ``rclpy.init``.

Principles (docs/ros.md): a trigger is never lost (rate limits apply to the predictions a trigger causes, never to
trigger edges or brake/lock events); nothing a message says can kill a node (every callback is guarded).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
import time
import traceback
from typing import Any, Callable, MutableMapping

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

# ---------------------------------------------------------------------------------------------------- QoS profiles
#: ``robot_description`` and other latched topics: reliable, transient local, depth 1 (the ROS 2 convention).
LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


def events_qos(depth: int = 50) -> QoSProfile:
    """Trigger and event topics (E-stop line, brake and lock events): reliable, a bounded queue of ``depth``."""
    return QoSProfile(depth=int(depth), history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)


def sensor_qos(depth: int = 20) -> QoSProfile:
    """Subscriptions to sensor streams (``joint_states``): best effort, so that both reliable publishers and
    sensor-data (best-effort) publishers match; a reliable subscription never hears a best-effort publisher."""
    return QoSProfile(depth=int(depth), history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.VOLATILE)


#: Publishers of streams and results: reliable, depth 10.
OUTPUT_DEPTH = 10

# ----------------------------------------------------------------------------------------------- discovery default
DISCOVERY_VARIABLE = "ROS_AUTOMATIC_DISCOVERY_RANGE"
KNOWN_DISCOVERY_RANGES = ("LOCALHOST", "SUBNET", "OFF", "SYSTEM_DEFAULT")


def apply_isolation_defaults(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Keep DDS on this machine unless the user chose otherwise; return warnings to print. Call it before
    ``rclpy.init`` (rcl and Fast DDS read these variables when the context and the participant are created).

    - An unset or *empty* ``ROS_AUTOMATIC_DISCOVERY_RANGE`` becomes ``LOCALHOST`` (rcl reads an empty value as
      SUBNET, i.e. LAN multicast); an unknown value becomes ``LOCALHOST`` with a warning; a deliberate ``SUBNET`` /
      ``SYSTEM_DEFAULT`` is kept with a warning that discovery leaves the machine.
    - With LOCALHOST discovery, no ``ROS_STATIC_PEERS`` and no ``FASTDDS_DEFAULT_PROFILES_FILE`` set by the user
      (empty counts as unset), that variable is set to the shipped loopback profile
      (``config/fastdds_localhost.xml``) so that every DDS socket binds 127.0.0.1: LOCALHOST discovery alone still
      binds sockets on all interfaces. A profile of the user's is kept (the knowing opt-out); a missing profile
      file gives a warning. ``fastdds_profile.rcl_init_environment`` must wrap ``rclpy.init`` (see there).
    """
    from vtm_dynamics.nodes.fastdds_profile import (PROFILE_FILE, PROFILE_VARIABLE, STATIC_PEERS_VARIABLE,
                                                    fastdds_profile_path)

    env = os.environ if environ is None else environ
    warnings: list[str] = []
    value = env.get(DISCOVERY_VARIABLE, "").strip()
    if not value:
        env[DISCOVERY_VARIABLE] = "LOCALHOST"
    elif value.upper() not in KNOWN_DISCOVERY_RANGES:
        warnings.append(f"{DISCOVERY_VARIABLE}={value!r} is not one of {', '.join(KNOWN_DISCOVERY_RANGES)}; "
                        "using LOCALHOST")
        env[DISCOVERY_VARIABLE] = "LOCALHOST"
    elif value.upper() in ("SUBNET", "SYSTEM_DEFAULT"):
        warnings.append(f"{DISCOVERY_VARIABLE}={value}: DDS discovery is not limited to this machine")
    if (env[DISCOVERY_VARIABLE].strip().upper() == "LOCALHOST" and not env.get(PROFILE_VARIABLE, "").strip()
            and not env.get(STATIC_PEERS_VARIABLE, "").strip()):
        profile = fastdds_profile_path()
        if profile:
            env[PROFILE_VARIABLE] = profile
        else:
            warnings.append(f"{PROFILE_VARIABLE}: the loopback profile {PROFILE_FILE} is not installed; "
                            "DDS sockets bind all interfaces")
    return warnings


# ------------------------------------------------------------------------------------------------------- logging
class LogLimiter:
    """Logs each distinct message once per ``period`` seconds and counts the repeats it held back.

    Keyed by the message text itself (not by the field it is about), so a *different* problem on the same field is
    always logged; a flood of identical lines costs one line per period.
    """

    def __init__(self, logger: Any, period: float = 5.0, max_keys: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger, self.period, self.max_keys, self.clock = logger, float(period), int(max_keys), clock
        self._last: dict[str, float] = {}
        self._repeats: dict[str, int] = {}
        self._lock = threading.Lock()  # one limiter may serve callback and worker threads

    def __call__(self, level: str, text: str) -> bool:
        """Log ``text`` at ``level`` ('error' | 'warning' | 'info') unless it was logged within the period;
        returns whether it was logged."""
        with self._lock:
            now = self.clock()
            last = self._last.get(text)
            if last is not None and now - last < self.period:
                self._repeats[text] = self._repeats.get(text, 0) + 1
                return False
            if len(self._last) >= self.max_keys:  # bounded memory under a flood of distinct texts
                self._last.clear()
                self._repeats.clear()
            repeats = self._repeats.pop(text, 0)
            suffix = f" ({repeats} identical messages suppressed)" if repeats else ""
            self._last[text] = now
        # rclpy fixes the severity per call site, so each level has its own call
        if level == "error":
            self.logger.error(text + suffix)
        elif level == "warning":
            self.logger.warning(text + suffix)
        else:
            self.logger.info(text + suffix)
        return True


# --------------------------------------------------------------------------------------------------- rate limits
class TokenBucket:
    """At most ``rate`` units of work per second on average with bursts of ``burst``; counts what it refuses.

    Used for the *work* an input causes (predictions, analyses), never for trigger edges or events themselves.
    """

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = float(rate), int(burst), clock
        self.tokens = float(burst)
        self.last = clock()
        self.refused = 0

    def allow(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        self.refused += 1
        return False


# -------------------------------------------------------------------------------------------------- guarded calls
def guarded(log: Callable[[str, str], Any], where: str, default: Any = None) -> Callable[[Callable], Callable]:
    """Decorator for ROS callbacks: an unexpected exception (including ``RecursionError`` and ``MemoryError``)
    is reported as one line ``<where>: unexpected <Type>: <text>`` through ``log`` and the callback returns
    ``default`` (for a service: the response object if ``default`` is the string ``"response"``), so the node
    keeps serving. ``KeyboardInterrupt`` and ``SystemExit`` still propagate."""

    def report(err: BaseException, args: tuple) -> Any:
        text = one_line(err)
        log("error", f"{where}: unexpected {type(err).__name__}: {text}")
        if os.environ.get("VTM_DEBUG_TRACEBACKS"):
            traceback.print_exc(file=sys.stderr)
        if default == "response" and len(args) >= 2:
            return _failed_response(args[-1], f"internal error ({type(err).__name__}): {text}")
        return default

    def wrap(func: Callable) -> Callable:
        if inspect.iscoroutinefunction(func):  # an async callback (rclpy awaits it): guard what it awaits too
            @functools.wraps(func)
            async def call_async(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await func(*args, **kwargs)
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as err:  # noqa: BLE001 - a callback must never take the node down
                    return report(err, args)

            return call_async

        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as err:  # noqa: BLE001 - a callback must never take the node down
                return report(err, args)

        return call

    return wrap


def one_line(err: BaseException, limit: int = 300) -> str:
    """The exception text on one line, at most ``limit`` characters (a message must not flood the log)."""
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _failed_response(response: Any, reason: str) -> Any:
    for field in ("success",):
        if hasattr(response, field):
            setattr(response, field, False)
    if hasattr(response, "message"):
        response.message = reason
    return response
