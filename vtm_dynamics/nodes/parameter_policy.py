"""Which node parameters may change while a node runs: the rule every vtm_dynamics node applies to the standard
parameter services (what ``ros2 param set`` and ``ros2 param load`` call), with no rclpy in it.

Parameters are configuration, not a control channel (docs/ros.md, "Parameters at run time"). Any node on the same
domain can call a node's ``set_parameters`` services, so a parameter that guards safety (trigger sources, age and
stamp limits, caps, brake and model files, timeouts, gains, limits, the clock source ``use_sim_time``) must not
change after start-up. The rule:

* During start-up every declared parameter takes its value from YAML or overrides, checked by its validator.
* After start-up a change is accepted only for a parameter the node lists as *live*, each with the reason why a
  change at run time is safe (presentation only: marker sizes); every other change, of a parameter of ours or of
  one the client library declares itself (``use_sim_time``, ``start_type_description_service``, QoS overrides), is
  refused with the one-line reason :func:`RuntimePolicy.refusal` gives. Deleting a parameter (a value of type
  NOT_SET) is refused for every parameter.

The node tells a declaration from a change by whether the name is already declared (a remote client cannot
declare: undeclared parameters are not allowed - except an empty name, which slips through rclpy's check and is
refused here), so parameters declared after the first ones still start normally.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

#: The reason given for a refused change; ``{name}`` is the parameter.
READ_ONLY = ("{name}: read-only after start-up (safety configuration: set it in the node's YAML or on the command "
             "line and restart the node)")
DELETE = "{name}: parameters cannot be deleted at run time"
EMPTY = "parameter name: empty (no parameter has an empty name)"


@dataclass(frozen=True)
class RuntimePolicy:
    """The parameters of one node that may change at run time: {name: why a change is safe}."""

    node: str
    live: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, why in self.live.items():
            if not why.strip():
                raise ValueError(f"{self.node}: live parameter {name!r} needs the reason why a change is safe")

    def refusal(self, name: str, *, declared: bool, deleting: bool = False) -> str | None:
        """Why a set request for ``name`` is refused, or None to let the value's own validator judge it.

        ``declared``: the parameter exists already (a change; else this is its declaration at start-up);
        ``deleting``: the request carries no value (type NOT_SET). An empty name is always refused: rclpy's check
        for undeclared names tests the names' truth value, so a request naming ``""`` would otherwise declare it."""
        if not name:
            return EMPTY
        if not declared:
            return None
        if deleting:
            return DELETE.format(name=name)
        if name not in self.live:
            return READ_ONLY.format(name=name)
        return None

    def is_live(self, name: str) -> bool:
        return name in self.live

    def table(self) -> str:
        """Markdown rows ``| node | parameter | why a change is safe |`` (docs/ros.md)."""
        if not self.live:
            return f"| `{self.node}` | none | every parameter is read-only after start-up |"
        return "\n".join(f"| `{self.node}` | `{name}` | {why} |" for name, why in sorted(self.live.items()))


def policy_of(node: str, live: Iterable[tuple[str, str]]) -> RuntimePolicy:
    """The policy of ``node`` from (name, reason) pairs of its live parameters."""
    return RuntimePolicy(node, dict(live))
