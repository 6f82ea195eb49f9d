"""The disk cache of generated M(q), h(q, v) modules (:mod:`vtm_dynamics.core.estop.generated_dynamics`).

An entry is Python source that is imported, i.e. executed, and Numba and Python keep compiled code (pickled index
files, byte code) in ``__pycache__`` beside it, which they also load. Whoever can write into the cache directory can
therefore run code in every process that uses it. So the cache is trusted only when it is private to the user:

- the directory (and its ``__pycache__``, if present) is a real directory, not a symbolic link, owned by the
  effective user and writable by nobody else (no group or other write bit); it is made with mode 0700;
- an entry is a regular file, opened without following a symbolic link, owned by the effective user, writable by
  nobody else, whose first and last lines name its cache key and whose second line is the sha256 of the rest (an
  entry cut short or edited is made again, not used);
- entries are written to a temporary file in the directory (mode 0600) and renamed over the old name, so two
  processes making the same entry at once each leave a complete file, and nothing is written elsewhere.

A directory that fails these checks raises :class:`UnsafeCacheError`; the caller then uses Pinocchio and says why.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)


class UnsafeCacheError(OSError):
    """The cache directory or an entry could be written by another user (module docstring)."""


def _private(info: os.stat_result, what: str, path: str) -> None:
    if info.st_uid != os.geteuid():
        raise UnsafeCacheError(f"{what} {path} is owned by user {info.st_uid}, not by this user ({os.geteuid()})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeCacheError(f"{what} {path} is writable by others (mode {stat.S_IMODE(info.st_mode):o}); "
                               "make it 0700 or choose another directory")


def safe_directory(folder: str) -> str:
    """``folder`` (made with mode 0700 if missing) after checking it is private to this user (module docstring)."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    for path in (folder, os.path.join(folder, "__pycache__")):
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafeCacheError(f"cache directory {path} is not a directory (a symbolic link or a file)")
        _private(info, "cache directory", path)
    return folder


def _body_digest(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def entry_text(key: str, body: str) -> str:
    """The file content of an entry: a line naming ``key``, the body's sha256, the body, a line ending ``key``."""
    body = body.rstrip("\n") + "\n"
    return f"# vtm_dynamics generated module; key {key}\n# sha256 {_body_digest(body)}\n{body}# end {key}\n"


def read_entry(path: str, key: str) -> bool:
    """Whether ``path`` holds a complete, unedited entry for ``key`` that only this user could have written
    (a missing, foreign, cut or edited entry: False; one writable by others: :class:`UnsafeCacheError`)."""
    try:
        fd = os.open(path, _READ)
    except OSError:  # missing, or a symbolic link (O_NOFOLLOW)
        return False
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            return False
        _private(info, "cache entry", path)
        text = fh.read(64 * 1024 * 1024).decode("utf-8", "replace")
    lines = text.split("\n")
    if len(lines) < 5 or lines[0] != f"# vtm_dynamics generated module; key {key}" or lines[-1] != "" \
            or lines[-2] != f"# end {key}" or not lines[1].startswith("# sha256 "):
        return False
    body = "\n".join(lines[2:-2]) + "\n"
    return lines[1] == f"# sha256 {_body_digest(body)}"


def write_entry(folder: str, path: str, text: str) -> None:
    """Write ``text`` to ``path`` in ``folder`` through a temporary file renamed over it (atomic)."""
    fd, tmp = tempfile.mkstemp(prefix=".mh_", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
