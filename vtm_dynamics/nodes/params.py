"""Parameter declaration with descriptions, and validation with one-line rejection messages.

Every node parameter is described once by a :class:`ParameterSpec` (name, default, description, validator). The
helpers here declare them all with a ``ParameterDescriptor`` (so ``ros2 param describe`` shows the description and
the constraint) and validate the start values (from YAML or overrides) through ``add_on_set_parameters_callback``.
After start-up the node's :class:`~vtm_dynamics.nodes.parameter_policy.RuntimePolicy` decides: a parameter is
read-only (its descriptor says so, and the callback refuses it as well) unless its spec gives ``live``, the reason
why changing it at run time is safe; changes of the client library's own parameters (``use_sim_time``, ...) and
deletions are refused too. A rejected value never reaches the node: the set call fails with a reason of the form
``"<name>: <what is wrong> (got <value>)"``.

No physics here.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.exceptions import InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter

from vtm_dynamics.nodes.parameter_policy import RuntimePolicy

Validator = Callable[[Any], "str | None"]  # returns None when the value is acceptable, else the reason


class ParameterError(ValueError):
    """A node parameter has an unacceptable value; the message names the parameter."""


@dataclass(frozen=True)
class ParameterSpec:
    """One declared parameter: ``default`` fixes its type; ``validator`` returns a reason string to reject a value.

    Every parameter is read-only after start-up (set it in YAML / overrides) unless ``live`` says why a change at
    run time is safe (``docs/ros.md`` lists those); ``read_only`` is kept for the callers that still spell it out
    and changes nothing (a parameter without ``live`` is read-only either way). ``constraint`` is the human-readable
    constraint text shown by ``ros2 param describe``; ranges belong in ``validator`` (e.g. ``in_range(lo, hi)``),
    never in the descriptor, so that a value out of range is refused with the validator's one-line reason and not
    with rclpy's own message.

    A list parameter (``default`` a tuple or list) is given to the node as a tuple. One whose default is empty is
    declared with dynamic typing and an empty value: rclpy infers an empty list as a byte array and has no typed
    empty array, and a parameter declared by type alone stays *uninitialized*, which makes the standard
    ``get_parameters`` service answer no value at all for a request that names it (so ``ros2 param dump`` showed
    none of the node's parameters). Its ``validator`` checks the element type instead (``names``, ``numbers``).
    """

    name: str
    default: Any
    description: str
    validator: Validator | None = None
    read_only: bool = False
    constraint: str = ""
    live: str = ""

    @property
    def changeable(self) -> bool:
        """May change at run time (``live`` gives the reason)."""
        return bool(self.live.strip())

    @property
    def is_list(self) -> bool:
        return isinstance(self.default, (list, tuple))

    def descriptor(self) -> ParameterDescriptor:
        return ParameterDescriptor(
            name=self.name, description=self.description, read_only=not self.changeable,
            additional_constraints=self.constraint, dynamic_typing=self.is_list and not self.default,
        )

    def declared_default(self) -> Any:
        """The value handed to ``declare_parameter`` (a list for list parameters)."""
        return list(self.default) if self.is_list else self.default

    def value_of(self, value: Any) -> Any:
        """The node's view of a declared value: a tuple for list parameters (an empty byte array included)."""
        if self.is_list:
            if value is None:
                return ()
            return tuple(value) if _sequence(value) and not isinstance(value, str) else value
        if isinstance(self.default, float) and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value

    def check(self, value: Any) -> str | None:
        """Reason to reject ``value`` (``"<name>: ..."``), or None."""
        if self.validator is None:
            return None
        reason = self.validator(value)
        shown = list(value) if isinstance(value, tuple) else value
        return None if reason is None else f"{self.name}: {reason} (got {shown!r})"


# ---------------------------------------------------------------------------------------------- validators
def positive(value: Any) -> str | None:
    return None if _finite(value) and value > 0 else "must be a finite number > 0"


def non_negative(value: Any) -> str | None:
    return None if _finite(value) and value >= 0 else "must be a finite number >= 0"


def at_least(lo: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if _finite(value) and value >= lo else f"must be a finite number >= {lo}"

    return check


def in_range(lo: float, hi: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if _finite(value) and lo <= value <= hi else f"must lie in [{lo}, {hi}]"

    return check


def one_of(choices: Sequence[Any]) -> Validator:
    def check(value: Any) -> str | None:
        return None if value in choices else "must be one of " + ", ".join(repr(c) for c in choices)

    return check


def non_empty_string(value: Any) -> str | None:
    return None if isinstance(value, str) and value.strip() else "must not be empty"


def non_empty_list(value: Any) -> str | None:
    ok = isinstance(value, (list, tuple)) and 0 < len(value) <= 64
    return None if ok else "must hold 1 to 64 values"


def _sequence(value: Any) -> bool:
    import array

    return isinstance(value, (list, tuple, array.array))


def strings(value: Any) -> str | None:
    """A list of strings (may be empty)."""
    ok = _sequence(value) and all(isinstance(v, str) for v in value)
    return None if ok else "must be a list of strings"


def names(value: Any) -> str | None:
    """A list of distinct names (may be empty), e.g. joints."""
    reason = strings(value)
    if reason is None and len(set(value)) != len(value):
        return "repeated names"
    return reason


def numbers(count: int | None = None) -> Validator:
    """A list of finite numbers, empty or of ``count`` entries (any length when ``count`` is None)."""
    def check(value: Any) -> str | None:
        if not _sequence(value) or not all(_finite(v) for v in value):
            return "must be a list of finite numbers"
        if count is not None and len(value) not in (0, count):
            return f"must hold {count} values or none"
        return None

    return check


def existing_file_or_empty(value: Any) -> str | None:
    if value == "":
        return None
    return None if isinstance(value, str) and os.path.isfile(os.path.expanduser(value)) else "file does not exist"


def all_of(*validators: Validator) -> Validator:
    def check(value: Any) -> str | None:
        for v in validators:
            reason = v(value)
            if reason is not None:
                return reason
        return None

    return check


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# ---------------------------------------------------------------------------------------------- declaration
def runtime_policy(node_name: str, specs: Iterable[ParameterSpec]) -> RuntimePolicy:
    """The node's run-time rule: the specs with a ``live`` reason may change, nothing else."""
    return RuntimePolicy(node_name, {s.name: s.live for s in specs if s.changeable})


def declare_validated(
    node: Node,
    specs: Iterable[ParameterSpec],
    on_change: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Declare ``specs`` on ``node`` and validate them now and on every later change; return {name: value}.

    The validation callback is registered before the declarations, so start values from YAML or overrides pass
    through the same checks; a bad start value raises :class:`ParameterError` naming the parameter. After start-up,
    a change is refused unless :func:`runtime_policy` lets it through (``live`` specs only; never a parameter the
    client library declared, never a deletion); accepted changes are passed to ``on_change`` as {name: new value}
    (after validation, before they are applied, which is the rclpy contract of ``add_on_set_parameters_callback``).
    The policy is kept as ``node.parameter_policy``.
    """
    specs = list(specs)
    by_name = {s.name: s for s in specs}
    started = {"done": False}
    policy = runtime_policy(node.get_name(), specs)
    node.parameter_policy = policy

    def validate(params: list[Parameter]) -> SetParametersResult:
        changes: dict[str, Any] = {}
        for p in params:
            refused = policy.refusal(p.name, declared=node.has_parameter(p.name),
                                     deleting=p.type_ == Parameter.Type.NOT_SET)
            if refused is not None:
                node.get_logger().error(f"rejected parameter change: {refused}")
                return SetParametersResult(successful=False, reason=refused)
            spec = by_name.get(p.name)
            if spec is None:
                continue
            value = spec.value_of(p.value)
            reason = spec.check(value)
            if reason is not None:
                node.get_logger().error(f"rejected parameter {reason}")
                return SetParametersResult(successful=False, reason=reason)
            changes[p.name] = value
        if started["done"] and on_change is not None and changes:
            try:
                on_change(changes)
            except ValueError as err:  # the node refuses a combination it cannot apply
                node.get_logger().error(f"rejected parameter change: {err}")
                return SetParametersResult(successful=False, reason=str(err))
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(validate)
    values: dict[str, Any] = {}
    for spec in specs:
        try:
            param = node.declare_parameter(spec.name, spec.declared_default(), spec.descriptor())
        except InvalidParameterValueException as err:
            reason = _reason_from(err, spec)
            raise ParameterError(reason) from None
        values[spec.name] = spec.value_of(param.value)
    started["done"] = True
    return values


def values(specs: Iterable[ParameterSpec], overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """{name: value} of ``specs`` with ``overrides``, checked by the same validators as a node's start values (a
    bad value raises :class:`ParameterError` naming the parameter): the parameters of a node's ROS-free parts
    without a node (tests, tools)."""
    out: dict[str, Any] = {}
    overrides = dict(overrides or {})
    for spec in specs:
        value = spec.value_of(overrides.pop(spec.name, spec.declared_default()))
        reason = spec.check(value)
        if reason is not None:
            raise ParameterError(reason)
        out[spec.name] = value
    if overrides:
        raise ParameterError(f"{sorted(overrides)[0]}: not a parameter")
    return out


def _reason_from(err: Exception, spec: ParameterSpec) -> str:
    text = str(err)
    marker = f"{spec.name}: "
    i = text.find(marker)
    return text[i:].strip().rstrip("'\"") if i >= 0 else f"{spec.name}: {text}"


def describe(specs: Iterable[ParameterSpec]) -> str:
    """A Markdown table of the parameters (used to write docs/ros.md and to check it in tests)."""
    lines = ["| parameter | default | description |", "|---|---|---|"]
    for s in specs:
        extra = f" ({s.constraint})" if s.constraint else ""
        ro = f" Changeable at run time: {s.live}" if s.changeable else " Read-only after start-up."
        default = list(s.default) if s.is_list else s.default
        lines.append(f"| `{s.name}` | `{default!r}` | {s.description}{extra}{ro} |")
    return "\n".join(lines)
