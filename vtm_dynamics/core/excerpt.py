"""Short, safe quotations of untrusted input for one-line error messages.

Error texts name the field and may show a little of the offending value, never more: a value from a message can be
megabytes long, and a value must never be mistaken for something the node read from disk.
"""

from __future__ import annotations

DEFAULT_EXCERPT_CHARS = 40


def excerpt(value: object, limit: int = DEFAULT_EXCERPT_CHARS) -> str:
    """``repr(value)`` cut to at most ``limit`` characters (``...(N chars)`` marks a cut)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...({len(text)} chars)"


def excerpt_list(values: "list[str] | tuple[str, ...]", count: int = 3, limit: int = DEFAULT_EXCERPT_CHARS) -> str:
    """The first ``count`` names, each cut by :func:`excerpt`'s rule, comma-separated (``+N more`` for the rest)."""
    shown = [v if len(v) <= limit else f"{v[:limit]}...({len(v)} chars)" for v in list(values)[:count]]
    rest = len(values) - len(shown)
    return ", ".join(shown) + (f" (+{rest} more)" if rest > 0 else "")


def clip(name: object, limit: int = DEFAULT_EXCERPT_CHARS) -> str:
    """``str(name)`` cut to ``limit`` characters, for names used inside a field path (``brakes.joints.<name>``)."""
    text = str(name)
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} chars)"


def first_line(err: BaseException) -> str:
    """The first line of an exception's text, or its type's name when it has none: what a one-line error message
    quotes of it."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
