"""The predictor's configurable E-stop source: a message type resolved at run time from its name.

The type name must have the form ``<package>/msg/<Type>`` (:mod:`vtm_dynamics.recordings.trigger` checks it); the
class is then taken from the Python module ``<package>.msg`` of that ROS message package (what
``rosidl_runtime_py.utilities.get_message`` does), and it must be a generated ROS message class (it has
``get_fields_and_field_types`` and a type support). No other module is ever imported, so a parameter can never run
an arbitrary module. The rule's field and values are checked on a default-constructed message at start-up
(:class:`~vtm_dynamics.recordings.trigger.TriggerMatcher`). Every failure is one
:class:`~vtm_dynamics.recordings.trigger.TriggerConfigError` line naming the parameter; the node then refuses to
start (``run_node`` prints the line and exits with status 1).
"""

from __future__ import annotations

import importlib
from typing import Any

from vtm_dynamics.recordings.trigger import TriggerConfigError, TriggerMatcher, TriggerRule, split_type_name


def message_class(type_name: str) -> type:
    """The rclpy message class of ``<package>/msg/<Type>``, or a one-line :class:`TriggerConfigError`."""
    package, name = split_type_name(type_name)
    try:
        module = importlib.import_module(f"{package}.msg")
    except ImportError:
        raise TriggerConfigError(f"trigger_type: message package {package!r} is not installed "
                                 f"(no Python module {package}.msg)") from None
    cls = getattr(module, name, None)
    if not isinstance(cls, type) or not callable(getattr(cls, "get_fields_and_field_types", None)):
        raise TriggerConfigError(f"trigger_type: {package}/msg has no message type {name!r}")
    return cls


def trigger_source(rule: TriggerRule) -> tuple[type, TriggerMatcher]:
    """(message class, matcher) for the rule, checked on a default message."""
    cls = message_class(rule.type_name)
    try:
        sample: Any = cls()
    except Exception as err:  # noqa: BLE001 - a generated message constructs without arguments
        raise TriggerConfigError(f"trigger_type: {rule.type_name} cannot be constructed "
                                 f"({type(err).__name__})") from None
    return cls, TriggerMatcher(rule, sample)
