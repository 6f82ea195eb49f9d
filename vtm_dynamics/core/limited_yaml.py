"""YAML text with limits: size, nesting depth and node count are checked before or during parsing.

PyYAML composes nested collections by recursion, so 1,000 nested brackets raise ``RecursionError`` and a large
document costs memory and seconds. :func:`load_yaml_text` refuses text over ``max_bytes`` before parsing, counts
depth and nodes while composing (one pass) and refuses aliases unless allowed (a message has no use for them, and
merge keys over aliases can make construction quadratic). Every failure is the caller's ``error`` type (a
ValueError) with one line starting with the field name. Safe types only (``yaml.SafeLoader``).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import AliasEvent

DEFAULT_MAX_YAML_BYTES = 64 * 1024  # a brake configuration of a 50-joint robot is ~5 KiB
DEFAULT_MAX_YAML_DEPTH = 20  # the brake format needs 4 levels
DEFAULT_MAX_YAML_NODES = 20_000


class _LimitExceeded(Exception):
    pass


class _LimitedLoader(yaml.SafeLoader):
    """SafeLoader that counts composition depth and nodes and may refuse aliases."""

    def __init__(self, stream: str, max_depth: int, max_nodes: int, allow_aliases: bool) -> None:
        super().__init__(stream)
        self._max_depth = max_depth
        self._max_nodes = max_nodes
        self._allow_aliases = allow_aliases
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent, index):  # type: ignore[override]
        if not self._allow_aliases and self.check_event(AliasEvent):
            raise _LimitExceeded("aliases (*name) are not allowed")
        self._nodes += 1
        if self._nodes > self._max_nodes:
            raise _LimitExceeded(f"more than {self._max_nodes} nodes (max_nodes)")
        self._depth += 1
        try:
            if self._depth > self._max_depth:
                raise _LimitExceeded(f"nested deeper than {self._max_depth} levels (max_depth)")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_yaml_text(
    text: str, field: str, error: type[ValueError] = ValueError, *, max_bytes: int = DEFAULT_MAX_YAML_BYTES,
    max_depth: int = DEFAULT_MAX_YAML_DEPTH, max_nodes: int = DEFAULT_MAX_YAML_NODES, allow_aliases: bool = False,
    source: str = "",
) -> Any:
    """Parse one YAML document from ``text`` within the limits; ``error("<field>: ...")`` (one line) otherwise.

    ``max_bytes`` [bytes of UTF-8], ``max_depth`` [nested collections], ``max_nodes`` [scalars + collections].
    ``source`` (e.g. a file's base name) is named in the message after the field.
    """
    at = f"{field}: {source}:" if source else f"{field}:"
    if not isinstance(text, str):
        raise error(f"{at} expected YAML text, got {type(text).__name__}")
    if len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise error(f"{at} more than {max_bytes} bytes of YAML (max_bytes)")
    loader = _LimitedLoader(text, max_depth, max_nodes, allow_aliases)
    try:
        return loader.get_single_data()
    except _LimitExceeded as err:
        raise error(f"{at} {err}") from None
    except yaml.YAMLError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else "YAML error"
        where = f" {source}" if source else ""
        raise error(f"{field}: cannot parse{where}: {first[:120]}") from None
    except (RecursionError, MemoryError) as err:  # not reachable within the limits; never let it escape
        raise error(f"{at} YAML too complex ({type(err).__name__})") from None
    finally:
        loader.dispose()
