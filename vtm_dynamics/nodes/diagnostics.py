"""The one builder of ``/diagnostics`` messages for every vtm_dynamics node (diagnostic_msgs/DiagnosticArray).

A node computes its level, its one-line message and its key/value pairs; this module turns them into the message:
levels ``OK``, ``WARN``, ``ERROR`` (the byte values of ``diagnostic_msgs/DiagnosticStatus``), values as text
(``value_text``: booleans ``true``/``false``, floats exactly (``repr``), strings unchanged, so a node that formats a
value itself keeps its format), the message cut to ``limit`` characters (``MAX_MESSAGE`` unless the node gives
less). No physics, no rclpy.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

OK, WARN, ERROR = 0, 1, 2
#: Longest status message [characters]: a reason quoting an input must not flood a monitor.
MAX_MESSAGE = 2000


def value_text(value: Any) -> str:
    """A diagnostics value as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)


def status(name: str, level: int, message: str, values: Mapping[str, Any] | None = None,
           hardware_id: str = "", limit: int = MAX_MESSAGE) -> DiagnosticStatus:
    """One status: ``level`` OK / WARN / ERROR, ``message`` (one line), ``values`` {key: value}."""
    out = DiagnosticStatus(level=bytes([int(level)]), name=name, message=message[:limit],
                           hardware_id=hardware_id)
    out.values = [KeyValue(key=k, value=value_text(v)) for k, v in (values or {}).items()]
    return out


def diagnostic_array(stamp: Any, *statuses: DiagnosticStatus) -> DiagnosticArray:
    """The message of ``statuses`` stamped ``stamp`` (builtin_interfaces/Time)."""
    out = DiagnosticArray()
    out.header.stamp = stamp
    out.status = list(statuses)
    return out
