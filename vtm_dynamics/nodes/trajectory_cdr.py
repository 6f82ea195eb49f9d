"""A ``trajectory_msgs/JointTrajectory`` as numpy arrays, read from its serialized form without one Python object
per point.

Why: ``rclpy.serialization.deserialize_message`` builds a Python object for every point and every array of a
trajectory. For 100,000 points that is about 1-3 s of work in which the interpreter lock is held for tens of
milliseconds at a time, plus stop-the-world collector passes and a long deallocation at the end - other threads of
the node (its control loop) stall meanwhile. Reading the bytes directly is a short loop of integer reads per point
(the interpreter switches threads between them) and one vectorised gather of all values.

Format: the serialized message of the ROS 2 middleware layers, a 4-byte encapsulation header followed by plain CDR
(XCDR version 1), little or big endian: integers aligned to their size and doubles to 8 bytes, counted from the
end of the header; strings as uint32 length (including the terminating NUL) and bytes; sequences as uint32 count
and elements. Any other encapsulation raises :class:`UnsupportedEncoding` (the caller then uses the middleware's
own deserializer). Every length is checked against the bytes present: malformed data raises
:class:`TrajectoryError` naming ``message``, never anything else. No ROS imports here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from vtm_dynamics.core.projection.desired_trajectory import TrajectoryError

FIELDS = ("positions", "velocities", "accelerations", "effort")
CHUNK = 256  # points read between two calls of ``pause``
_ORIGIN = 4  # alignment is counted from the end of the encapsulation header
_ENDIAN = {b"\x00\x01": "<", b"\x00\x00": ">"}  # CDR_LE, CDR_BE


class UnsupportedEncoding(ValueError):
    """The bytes are not plain CDR version 1 (e.g. XCDR2); use the middleware's deserializer instead."""


@dataclass(frozen=True, eq=False)
class TrajectoryArrays:
    """The content of one JointTrajectory message.

    ``stamp`` = ``header.stamp`` [s]; ``times`` [s] per point (``time_from_start``); ``counts[field]`` the number
    of values each point gives for ``field`` (one of :data:`FIELDS`); the values themselves come from
    :meth:`rows` once the counts are known to be right.
    """

    stamp: float
    joint_names: tuple[str, ...]
    times: np.ndarray
    counts: dict[str, np.ndarray]
    starts: dict[str, np.ndarray]
    values: np.ndarray

    @property
    def n_points(self) -> int:
        return int(self.times.shape[0])

    def rows(self, field: str, width: int) -> np.ndarray:
        """(points, width) values of ``field``; rows of points that give none are NaN. The caller has checked that
        every count is 0 or ``width``."""
        given = self.counts[field] == width
        out = np.full((self.n_points, width), np.nan)
        if width and given.any():
            index = self.starts[field][given][:, None] + np.arange(width)[None, :]
            out[given] = self.values[index]
        return out

    @staticmethod
    def from_message(msg: Any) -> "TrajectoryArrays":
        """The same arrays from a deserialized message object (used where the bytes are not plain CDR)."""
        points = msg.points
        k = len(points)
        counts = {f: np.zeros(k, dtype=np.int64) for f in FIELDS}
        starts = {f: np.zeros(k, dtype=np.int64) for f in FIELDS}
        chunks: list[np.ndarray] = []
        times = np.empty(k)
        used = 0
        for i, pt in enumerate(points):
            d = pt.time_from_start
            times[i] = float(d.sec) + 1e-9 * float(d.nanosec)
            for f in FIELDS:
                values = np.asarray(getattr(pt, f), dtype=float)
                counts[f][i], starts[f][i] = values.size, used
                chunks.append(values)
                used += values.size
        values = np.concatenate(chunks) if chunks else np.zeros(0)
        stamp = float(msg.header.stamp.sec) + 1e-9 * float(msg.header.stamp.nanosec)
        return TrajectoryArrays(stamp, tuple(msg.joint_names), times, counts, starts, values)


def read_joint_trajectory(raw: bytes, max_points: int, max_names: int,
                          pause: Callable[[], None] | None = None) -> TrajectoryArrays:
    """Read a serialized JointTrajectory. Refuses (:class:`TrajectoryError`) more than ``max_points`` points or
    ``max_names`` joint names before reading them, and malformed bytes; raises :class:`UnsupportedEncoding` for an
    encapsulation other than plain CDR. Time linear in the size of the message. ``pause`` (if given) is called
    after every :data:`CHUNK` points."""
    buf = memoryview(raw).cast("B")
    size = len(buf)
    endian = _ENDIAN.get(bytes(buf[:2]))
    if size < _ORIGIN or endian is None:
        raise UnsupportedEncoding(f"message: encapsulation {bytes(buf[:2]).hex()} is not plain CDR")
    u32 = struct.Struct(endian + "I").unpack_from
    i32 = struct.Struct(endian + "i").unpack_from
    try:
        sec = i32(buf, 4)[0]
        nanosec = u32(buf, 8)[0]
        off, _frame = _string(buf, 12, u32, size)
        off = _align4(off)
        n_names = u32(buf, off)[0]
        off += 4
        if n_names > max_names:
            raise TrajectoryError(f"joint_names: {n_names} names, more than the model's {max_names} joints")
        names = []
        for _ in range(n_names):
            off, name = _string(buf, _align4(off), u32, size)
            names.append(name)
        off = _align4(off)
        k = u32(buf, off)[0]
        off += 4
        if k > max_points:
            raise TrajectoryError(f"points: {k} points, more than max_trajectory_points {max_points}")
        if k * 20 > size - off:  # a point takes at least 4 counts and a duration
            raise TrajectoryError(f"message: {k} points cannot fit in {size} bytes")
        counts = [np.zeros(k, dtype=np.int64) for _ in FIELDS]
        starts = [np.zeros(k, dtype=np.int64) for _ in FIELDS]
        secs = np.zeros(k, dtype=np.int64)
        nanosecs = np.zeros(k, dtype=np.int64)
        i = 0
        while i < k:
            if i == 2 and _read_uniform(raw, endian, uniform_from, k, size, counts, starts, secs, nanosecs):
                break  # points 1..k-1 share point 1's layout: read at once
            if pause is not None and i % CHUNK == CHUNK - 1:
                pause()
            layout = _read_point(buf, off, size, u32, i)
            for f in range(4):
                counts[f][i] = layout.counts[f]
                starts[f][i] = (layout.data[f] - _ORIGIN) >> 3
            secs[i] = i32(buf, layout.duration)[0]
            nanosecs[i] = u32(buf, layout.duration + 4)[0]
            if i == 1:
                uniform_from = layout
            off = layout.end
            i += 1
    except struct.error:
        raise TrajectoryError("message: the serialized data ends early") from None
    except UnicodeDecodeError:
        raise TrajectoryError("message: a string is not valid UTF-8") from None
    values = np.frombuffer(raw, dtype=endian + "f8", offset=_ORIGIN, count=(size - _ORIGIN) // 8)
    return TrajectoryArrays(
        stamp=float(sec) + 1e-9 * float(nanosec),
        joint_names=tuple(names),
        times=secs.astype(float) + 1e-9 * nanosecs.astype(float),
        counts=dict(zip(FIELDS, counts)),
        starts=dict(zip(FIELDS, starts)),
        values=values.astype(float, copy=False),
    )


@dataclass(frozen=True)
class _PointLayout:
    """Where one point's parts lie in the buffer: absolute byte offsets of its start, of the four counts, of the
    four value arrays (meaningless where the count is 0), of its duration, and of its end."""

    start: int
    counts: tuple[int, ...]
    count_at: tuple[int, ...]
    data: tuple[int, ...]
    duration: int
    end: int


def _read_point(buf: memoryview, off: int, size: int, u32: Any, i: int) -> _PointLayout:
    start = off
    counts, count_at, data = [], [], []
    for f in range(4):
        off = _align4(off)
        n = u32(buf, off)[0]
        count_at.append(off)
        off += 4
        if n:
            off = _ORIGIN + ((off - _ORIGIN + 7) & ~7)
            if off + 8 * n > size:
                raise TrajectoryError(f"message: points[{i}].{FIELDS[f]} runs past the end of the data")
        counts.append(n)
        data.append(off)
        off += 8 * n
    off = _align4(off)
    if off + 8 > size:
        raise TrajectoryError(f"message: points[{i}].time_from_start runs past the end of the data")
    return _PointLayout(start, tuple(counts), tuple(count_at), tuple(data), off, off + 8)


def _read_uniform(raw: bytes, endian: str, first: _PointLayout, k: int, size: int, counts: list[np.ndarray],
                  starts: list[np.ndarray], secs: np.ndarray, nanosecs: np.ndarray) -> bool:
    """Fill points 1..k-1 in a few array operations if they all have the layout of point 1 (same counts, a stride
    that keeps the 8-byte alignment); return False (nothing trusted) otherwise.

    Exact, not a guess: a point that starts at the same alignment with the same counts has the same padding and
    length, so if the counts read at ``first.start + j * stride`` agree for every j, those are the points."""
    stride = first.end - first.start
    if stride % 8 or k < 3:
        return False
    j = np.arange(k - 1, dtype=np.int64)
    base = first.start + j * stride  # start of point j + 1
    if int(base[-1]) + stride > size:
        return False
    words = np.frombuffer(raw, dtype=endian + "u4", count=size // 4)
    for f in range(4):
        if not np.all(words[(base + (first.count_at[f] - first.start)) // 4] == first.counts[f]):
            return False
    for f in range(4):
        counts[f][1:] = first.counts[f]
        starts[f][1:] = (base + (first.data[f] - first.start) - _ORIGIN) >> 3
    at = (base + (first.duration - first.start)) // 4
    secs[1:] = words[at].astype(np.int64)
    secs[1:] = np.where(secs[1:] >= 2**31, secs[1:] - 2**32, secs[1:])  # int32
    nanosecs[1:] = words[at + 1]
    return True


def _align4(off: int) -> int:
    return (off + 3) & ~3


def _string(buf: memoryview, off: int, u32: Any, size: int) -> tuple[int, str]:
    n = u32(buf, off)[0]
    off += 4
    if off + n > size:
        raise TrajectoryError("message: a string runs past the end of the data")
    text = bytes(buf[off:off + max(n - 1, 0)]).decode("utf-8")
    return off + n, text
