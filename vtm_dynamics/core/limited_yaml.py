"""YAML text with limits: size, nesting depth and node count are checked before or during parsing.

PyYAML composes nested collections by recursion, so 1,000 nested brackets raise ``RecursionError`` and a large
document costs memory and seconds. :func:`load_yaml_text` refuses text over ``max_bytes`` and flow nesting deeper
than ``max_depth`` before parsing (one linear pre-scan), counts depth and nodes while composing (one pass) and
refuses aliases unless allowed (a message has no use for them, and merge keys over aliases can make construction
quadratic). Every failure is the caller's ``error`` type (a ValueError) with one line starting with the field
name. Safe types only (``yaml.SafeLoader``).
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.events import AliasEvent

DEFAULT_MAX_YAML_BYTES = 64 * 1024  # a brake configuration of a 50-joint robot is ~5 KiB
DEFAULT_MAX_YAML_DEPTH = 20  # the brake format needs 4 levels
DEFAULT_MAX_YAML_NODES = 20_000


class _LimitExceeded(Exception):
    pass


# the characters the flow-depth pre-scan looks at: brackets, quotes, escapes, comment starts and line ends
_FLOW_TOKENS = re.compile(r"""[\[\]{}'"\\#\n]""")


_NODE_START = " \t\r\n[{,:?-"  # a quoted scalar starts after one of these (or at the start of the text)


def flow_depth_exceeds(text: str, max_depth: int) -> bool:
    """Whether flow collections (``[``, ``{``) nest deeper than ``max_depth`` anywhere in ``text``.

    One linear pass over the indicator characters, before any parsing: PyYAML's scanner reads ahead over unclosed
    brackets (looking for a possible key) before its composer can count depth. Brackets inside quoted scalars and
    comments are skipped; a quote inside a plain scalar (``it's``) starts no quoted scalar. Where this reading
    differs from YAML's (a quote right after ``-``, ``:`` or ``?`` inside a plain scalar), brackets inside strings
    may be counted: such a text needs more than ``max_depth`` of them to be refused, and the brake format has no
    such strings. Brackets it misses are still counted by the composer."""
    depth = 0
    quote = ""
    comment = False
    skip_to = -1
    for m in _FLOW_TOKENS.finditer(text):
        i, c = m.start(), m.group()
        if i < skip_to:
            continue  # the character after a backslash in a double-quoted scalar
        if comment:
            comment = c != "\n"
        elif quote == "'":
            if c == "'":
                if text.startswith("'", i + 1):
                    skip_to = i + 2  # '' is an escaped quote
                else:
                    quote = ""
        elif quote == '"':
            if c == "\\":
                skip_to = i + 2
            elif c == '"':
                quote = ""
        elif c in "'\"":
            if i == 0 or text[i - 1] in _NODE_START:  # else part of a plain scalar (it's)
                quote = c
        elif c == "#":
            comment = i == 0 or text[i - 1] in " \t\r\n"
        elif c in "[{":
            depth += 1
            if depth > max_depth:
                return True
        elif c in "]}":
            depth = max(0, depth - 1)
    return False


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
    if flow_depth_exceeds(text, max_depth):
        raise error(f"{at} nested deeper than {max_depth} levels (max_depth)")
    loader = None
    try:  # the loader's reader checks the characters as it is built: its errors are the caller's one line too
        loader = _LimitedLoader(text, max_depth, max_nodes, allow_aliases)
        return loader.get_single_data()
    except _LimitExceeded as err:
        raise error(f"{at} {err}") from None
    except yaml.YAMLError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else "YAML error"
        where = f" {source}" if source else ""
        raise error(f"{field}: cannot parse{where}: {first[:120]}") from None
    except (RecursionError, MemoryError) as err:  # not reachable within the limits; never let it escape
        raise error(f"{at} YAML too complex ({type(err).__name__})") from None
    except (ValueError, TypeError, AttributeError, ArithmeticError) as err:
        # PyYAML's constructors convert scalars with plain Python calls: a date like 2020-13-45 or an int of over
        # 4300 digits raised ValueError, `!!timestamp "x"` AttributeError, none of them the caller's error
        raise error(f"{at} a value cannot be read ({type(err).__name__})") from None  # its text may quote the input
    finally:
        if loader is not None:
            loader.dispose()
