"""Reading a file an input names: a regular file of a bounded size, checked on the open file before it is read.

A path a user or a map hands over may name a FIFO (opening it for reading blocks until a writer comes: for ever), a
device (``/dev/zero`` reads until memory runs out) or a file larger than anything the reader needs. The file is
opened without blocking, its status taken from the open descriptor (so the file checked is the file read), and
only then read, one byte beyond the cap to see a file that grew in between. The callers turn the reasons into their
own one-line errors.
"""

from __future__ import annotations

import os
import stat

NOT_REGULAR = "not a regular file"
TOO_LARGE = "too large"
GREW = "grew beyond the cap while read"


class BoundedFileError(ValueError):
    """The file is no regular file, or larger than the cap: ``why`` (:data:`NOT_REGULAR`, :data:`TOO_LARGE`,
    :data:`GREW`) and its ``size`` [bytes] as found."""

    def __init__(self, why: str, size: int) -> None:
        super().__init__(why)
        self.why, self.size = why, int(size)


def read_bounded_file(path: str, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path`` of at most ``max_bytes`` (module docstring). Raises
    :class:`BoundedFileError`, or the ``OSError`` of opening or reading it (``FileNotFoundError`` when there is none)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:  # checked on the descriptor before a file object is made of it (that refuses a directory on its own terms)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BoundedFileError(NOT_REGULAR, info.st_size)
        if info.st_size > max_bytes:
            raise BoundedFileError(TOO_LARGE, info.st_size)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise BoundedFileError(GREW, len(data))
    return data
