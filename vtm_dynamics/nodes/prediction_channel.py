"""The channel between the node and its prediction process (:mod:`prediction_process`): the child's stdin and
stdout, in frames of an 8-byte little-endian length and a pickle, read and written by a deadline so that a side
that stops reading or writing cannot block the other beyond it. The child is this package's own code, started by
the node: the frames never come from the ROS graph or a file. Frames are capped at :data:`MAX_FRAME` bytes both
ways.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import time
from typing import Any, BinaryIO, Callable

#: [bytes] largest frame either side reads
MAX_FRAME = 256 * 1024 * 1024
_HEADER = struct.Struct("<Q")


class ChannelError(RuntimeError):
    """The child's channel failed: ended, timed out or a malformed frame."""


Deadline = float | Callable[[], float] | None  # monotonic [s], or a function giving it (it may move), or none


def _left(deadline: Deadline) -> float | None:
    if deadline is None:
        return None
    return (deadline() if callable(deadline) else deadline) - time.monotonic()


def _ready(fd: int, deadline: Deadline, write: bool) -> None:
    """Wait until ``fd`` can be read (written), or raise when ``deadline`` has passed."""
    while True:
        left = _left(deadline)
        if left is None:
            return
        if left <= 0:
            raise ChannelError("no answer in time")
        ready = select.select([], [fd], [], min(left, 0.05)) if write else select.select([fd], [], [], min(left, 0.05))
        if ready[1 if write else 0]:
            return


def write_frame(stream: BinaryIO, obj: Any, deadline: Deadline = None) -> None:
    """One frame of ``obj`` to ``stream``, by ``deadline``: a reader that stops reading cannot block the
    writer beyond it."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) > MAX_FRAME:
        raise ChannelError(f"frame of {len(data)} bytes over {MAX_FRAME}")
    stream.flush()
    view = memoryview(_HEADER.pack(len(data)) + data)
    fd = stream.fileno()
    while view:
        _ready(fd, deadline, write=True)
        view = view[os.write(fd, view[:1 << 16]):]


def _read_exactly(fd: int, n: int, deadline: Deadline) -> bytes:
    chunks, got = [], 0
    while got < n:
        _ready(fd, deadline, write=False)
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise ChannelError("the prediction process ended")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, deadline: Deadline = None) -> Any:
    """One frame from ``fd``, by ``deadline``."""
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size, deadline))
    if size > MAX_FRAME:
        raise ChannelError(f"frame of {size} bytes over {MAX_FRAME}")
    return pickle.loads(_read_exactly(fd, size, deadline))
