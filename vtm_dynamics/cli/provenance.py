"""What produced an output: software version and commit, the hashes of the model and brake files, the date.

Every file the command lines write for the record (summaries, JSON, CSV headers, PDF reports, plot titles) carries
these, so that a figure in a risk assessment can be traced to the exact model, brakes and software that made it.
Standard library only (the command lines import it before their heavy imports).
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import math
import os
import subprocess
from typing import Iterable

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def finite_or_none(x: float) -> float | None:
    """``x`` as a float, or None (JSON ``null``) where it is inf or nan: strict JSON has no Infinity or NaN."""
    return float(x) if math.isfinite(x) else None


def json_ready(value: object) -> object:
    """``value`` with every non-finite float in its dicts, lists and tuples replaced by None, for
    ``json.dump(..., allow_nan=False)``: a stop that did not end within the horizon is ``null``, not ``Infinity``."""
    if isinstance(value, float):
        return finite_or_none(value)
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def text_sha256(text: str) -> str:
    """sha256 hex digest of a text (UTF-8), e.g. a URDF model's."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha256(path: str) -> str:
    """sha256 hex digest of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """``git describe --always --dirty`` of the source tree the package runs from, or None (an installed package,
    no git, or not a repository). Asked once per process, with a 2 s limit."""
    if not os.path.exists(os.path.join(_PACKAGE_ROOT, ".git")):
        return None
    try:
        out = subprocess.run(["git", "-C", _PACKAGE_ROOT, "describe", "--always", "--dirty", "--abbrev=12"],
                             capture_output=True, text=True, timeout=2.0, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return text if out.returncode == 0 and text and len(text) < 80 else None


def software() -> dict:
    """``{"name", "version", "git_commit"}`` of the running vtm_dynamics (commit None when not from a git tree)."""
    from vtm_dynamics import __version__

    return {"name": "vtm_dynamics", "version": __version__, "git_commit": git_commit()}


def software_line() -> str:
    """``vtm_dynamics 0.1.0 (git 1a2b3c4d5e6f)`` or ``vtm_dynamics 0.1.0 (not from a git tree)``."""
    s = software()
    return f"{s['name']} {s['version']} ({'git ' + s['git_commit'] if s['git_commit'] else 'not from a git tree'})"


def now_utc() -> str:
    """The current UTC time, ISO 8601 to the second (the date a report was made)."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def comment_lines(items: Iterable[tuple[str, object]], prefix: str = "# ") -> list[str]:
    """``# key: value`` lines (CSV headers): readers that skip comments (numpy, pandas ``comment='#'``) read on."""
    return [f"{prefix}{key}: {value}" for key, value in items]
