"""The E-stop trigger as configuration: which topic, message type, field and values mean "the robot is stopping".

On a real robot the E-stop is rarely a ``std_msgs/Bool``: it is a safety-mode field in the driver's status message
(for example ``ur_dashboard_msgs/msg/SafetyMode``, field ``mode``, values ``ROBOT_EMERGENCY_STOP`` and
``SYSTEM_EMERGENCY_STOP``) or a PLC signal. A :class:`TriggerRule` names them; :class:`TriggerMatcher` binds the rule
to one message and answers ``stopping(msg)``. The same rule is used by the live predictor (rclpy messages) and by
the bag reader (messages deserialised by ``rosbags``): both expose fields as attributes and constants as class
attributes, which is all this module relies on.

Type names are accepted only in the form ``<package>/msg/<Type>`` (lower-case package identifier, CamelCase type),
so that a type name can never name an arbitrary module. Values are written as text and read by the type of the
field: a string field takes the text itself (``"1"`` stays the text "1"); a bool field only ``true``/``false``; a
numeric field an integer, a decimal number or the name of a numeric constant of the message type
(``ROBOT_EMERGENCY_STOP``). A value the field can never hold (a misspelt constant, ``maybe`` for a bool) is a
configuration error, not a trigger that silently never fires. Errors are :class:`TriggerConfigError`, one line
naming the parameter.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Sequence

TYPE_NAME = re.compile(r"^([a-z][a-z0-9_]{0,63})/msg/([A-Z][A-Za-z0-9]{0,63})$")
FIELD_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
CONSTANT_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
MAX_FIELD_DEPTH = 8  # nested fields in a trigger field path
MAX_VALUES = 64  # values that mean "stopping"


class TriggerConfigError(ValueError):
    """A trigger configuration that cannot work; one line naming the parameter (``trigger_field``, ...)."""


@dataclass(frozen=True)
class TriggerRule:
    """The trigger: ``topic``, ``type_name`` (``<pkg>/msg/<Type>``), ``field`` (dotted path to a scalar field, e.g.
    ``data`` or ``mode`` or ``status.level``) and ``values`` (text, see the module docstring) that mean stopping.
    The default is today's E-stop line: ``std_msgs/msg/Bool`` on ``estop``, ``data`` true."""

    topic: str = "estop"
    type_name: str = "std_msgs/msg/Bool"
    field: str = "data"
    values: tuple[str, ...] = ("true",)

    def __post_init__(self) -> None:
        split_type_name(self.type_name)
        field_path(self.field)
        if not isinstance(self.topic, str) or not self.topic.strip():
            raise TriggerConfigError("trigger_topic: must name a topic")
        if not self.values:
            raise TriggerConfigError("trigger_values: at least one value must mean 'stopping'")
        if len(self.values) > MAX_VALUES:
            raise TriggerConfigError(f"trigger_values: at most {MAX_VALUES} values, got {len(self.values)}")


def split_type_name(name: str) -> tuple[str, str]:
    """(package, Type) of a ``<package>/msg/<Type>`` name, else :class:`TriggerConfigError`."""
    m = TYPE_NAME.match(name) if isinstance(name, str) else None
    if m is None:
        shown = name[:80] if isinstance(name, str) else type(name).__name__
        raise TriggerConfigError(f"trigger_type: expected '<package>/msg/<Type>' (e.g. std_msgs/msg/Bool), got {shown!r}")
    return m.group(1), m.group(2)


def field_path(text: str) -> tuple[str, ...]:
    """The dotted field path as a tuple of field names (each a ROS field identifier), else an error."""
    parts = tuple(text.split(".")) if isinstance(text, str) else ()
    if not parts or len(parts) > MAX_FIELD_DEPTH or not all(FIELD_NAME.match(p) for p in parts):
        shown = text[:80] if isinstance(text, str) else type(text).__name__
        raise TriggerConfigError(f"trigger_field: expected a dotted path of field names (e.g. 'data' or "
                                 f"'status.mode'), got {shown!r}")
    return parts


def field_names(msg: Any) -> list[str]:
    """The field names of a message instance (rclpy messages and ``rosbags`` dataclasses)."""
    getter = getattr(type(msg), "get_fields_and_field_types", None)
    if callable(getter):
        return list(getter())
    if dataclasses.is_dataclass(msg):
        return [f.name for f in dataclasses.fields(msg) if not f.name.startswith("__")]
    return []


def field_kind(value: Any) -> str:
    """'bool', 'string' or 'number': the kind of a field's value (rclpy values and numpy scalars from rosbags)."""
    if hasattr(value, "item") and not isinstance(value, (bool, int, float, str)):
        value = value.item()
    if isinstance(value, bool):
        return "bool"
    return "string" if isinstance(value, str) else "number"


def numeric_constants(msg_class: type) -> list[str]:
    """The names of the numeric constants of a message type (``ENGAGE``, ``ROBOT_EMERGENCY_STOP``)."""
    values = {n: getattr(msg_class, n, None) for n in dir(msg_class) if CONSTANT_NAME.match(n)}
    return sorted(n for n, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool))


def parse_value(text: str, kind: str, msg_class: type, where: str) -> Any:
    """The value ``text`` means for a field of ``kind`` (:func:`field_kind`) of ``msg_class``; a value the field
    can never hold raises :class:`TriggerConfigError` (``where`` names the field in the line)."""
    word = text.strip()
    if kind == "string":
        return text
    if kind == "bool":
        if word.lower() in ("true", "false"):
            return word.lower() == "true"
        raise TriggerConfigError(f"trigger_values: {word[:80]!r} is not true or false ({where} is a bool)")
    for cast in (int, float):
        try:
            return cast(word)
        except ValueError:
            pass
    constants = numeric_constants(msg_class)
    if word in constants:
        return getattr(msg_class, word)
    shown = ", ".join(constants[:20]) + (", ..." if len(constants) > 20 else "")
    raise TriggerConfigError(f"trigger_values: {word[:80]!r} is neither a number nor a constant of the type "
                             f"({where} is a number; constants: {shown or 'none'})")


class TriggerMatcher:
    """A :class:`TriggerRule` bound to the message type of ``sample`` (an instance: the default-constructed rclpy
    message, or the first message read from a bag). Construction checks that the field path exists and ends at a
    scalar; ``stopping(msg)`` is then a few attribute look-ups."""

    def __init__(self, rule: TriggerRule, sample: Any) -> None:
        self.rule = rule
        self.path = field_path(rule.field)
        value = sample
        for depth, name in enumerate(self.path):
            names = field_names(value)
            if name not in names:
                where = rule.type_name if depth == 0 else f"{rule.type_name} field {'.'.join(self.path[:depth])}"
                raise TriggerConfigError(f"trigger_field: {'.'.join(self.path)!r} does not exist in {where} "
                                         f"(fields: {', '.join(names) or 'none'})")
            value = getattr(value, name)
        if not isinstance(value, (bool, int, float, str)) and type(value).__name__ not in ("bool_", "int64", "uint8"):
            raise TriggerConfigError(f"trigger_field: {rule.field!r} of {rule.type_name} is not a single bool, "
                                     f"number or string (got {type(value).__name__})")
        kind, where = field_kind(value), f"trigger_field {rule.field!r} of {rule.type_name}"
        self.values = frozenset(parse_value(v, kind, type(sample), where) for v in rule.values)

    def value(self, msg: Any) -> Any:
        for name in self.path:
            msg = getattr(msg, name)
        return msg

    def stopping(self, msg: Any) -> bool:
        """True when the configured field of ``msg`` holds one of the stopping values."""
        v = self.value(msg)
        if hasattr(v, "item"):  # numpy scalars from rosbags
            v = v.item()
        return v in self.values


def rule_from_parameters(topic: str, type_name: str, field: str, values: Sequence[str]) -> TriggerRule:
    """A :class:`TriggerRule` from node parameters or command-line options (values as text)."""
    return TriggerRule(topic=topic, type_name=type_name, field=field, values=tuple(str(v) for v in values))
