"""The messages of an MCAP file, read as data in one linear pass with every size bounded before it is allocated.

MCAP (https://mcap.dev/spec) is a sequence of records ``opcode (u8), length (u64 LE), content``, between the magic
bytes ``\\x89MCAP0\\r\\n``. Read here: Schema (0x03), Channel (0x04) and Message (0x05) records, at the top level
and inside Chunk records (0x06, uncompressed, zstd or lz4), up to Data End (0x0F) or the Footer; everything else
(indexes, statistics, attachments, metadata, the summary section) is skipped without being read. Nothing is taken
from an index: what counts is what the data section holds.

Bounds (:class:`McapLimits`): a record longer than what is left of the file is a truncated file; a chunk whose
stated uncompressed size exceeds ``max_chunk_bytes``, or brings the chunks' total beyond ``max_decompressed_bytes``,
is refused before anything is decompressed, and its decompression stops at that stated size (a chunk that inflates
further is refused); a message longer than
``max_message_bytes`` is refused; the caller's ``deadline`` (monotonic seconds) bounds the time. Errors are
:class:`McapError` (a ValueError), one line, never quoting file contents. No ROS here, no index trusted.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import BinaryIO, Iterator

MAGIC = b"\x89MCAP0\r\n"
SCHEMA, CHANNEL, MESSAGE, CHUNK, FOOTER, DATA_END = 0x03, 0x04, 0x05, 0x06, 0x02, 0x0F
_HEADER = struct.Struct("<BQ")


class McapError(ValueError):
    """An MCAP file that cannot be read within the limits (one line)."""


@dataclass(frozen=True)
class McapLimits:
    """``max_chunk_bytes``: largest uncompressed chunk; ``max_message_bytes``: largest message; ``deadline``:
    monotonic time [s] after which reading stops with an error; ``max_decompressed_bytes``: all chunks of the file
    together, uncompressed (the caller's bound for the file's size, as for a compressed storage file)."""

    max_chunk_bytes: int = 256 * 1024 * 1024
    max_message_bytes: int = 64 * 1024 * 1024
    deadline: float = float("inf")
    max_decompressed_bytes: int = 2**62


@dataclass(frozen=True)
class Schema:
    id: int
    name: str
    encoding: str
    data: str


@dataclass(frozen=True)
class Channel:
    id: int
    schema_id: int
    topic: str
    message_encoding: str


@dataclass(frozen=True)
class Message:
    channel_id: int
    log_time: int  # [ns]
    data: bytes


class _Reader:
    """Little-endian primitives over a bytes object, every length checked against what is left."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = memoryview(data), 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise McapError("record: a field runs past the end of its record")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u16(self) -> int:
        return struct.unpack("<H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def string(self) -> str:
        return bytes(self.take(self.u32())).decode("utf-8", "replace")

    def rest(self) -> bytes:
        return bytes(self.take(len(self.data) - self.pos))


def _decompress(data: bytes, compression: str, size: int) -> bytes:
    """Exactly ``size`` bytes from ``data``, never allocating more than ``size + 1``."""
    if compression == "":
        out = data
    elif compression == "zstd":
        from vtm_dynamics.recordings.compression import zstd_decompressor

        d = zstd_decompressor()
        try:
            out = d.decompress(data, max_length=size + 1)
        except Exception:  # noqa: BLE001 - the library's error types differ by version; each is corrupt data
            raise McapError("chunk: zstd data is corrupt") from None
    elif compression == "lz4":
        import lz4.frame

        d = lz4.frame.LZ4FrameDecompressor()
        try:
            out = d.decompress(data, max_length=size + 1)
        except Exception:  # noqa: BLE001
            raise McapError("chunk: lz4 data is corrupt") from None
    else:
        raise McapError(f"chunk: compression {compression[:20]!r} is not supported (none, zstd, lz4)")
    if len(out) != size:
        raise McapError(f"chunk: decompresses to {'more' if len(out) > size else 'fewer'} bytes than the {size} it "
                        "states")
    return out


def _records(data: bytes, deadline: float) -> Iterator[tuple[int, _Reader]]:
    """(opcode, content) of the records in the bytes of a chunk."""
    pos, n = 0, len(data)
    while pos < n:
        if time.monotonic() > deadline:
            raise McapError("reading took longer than the time limit")
        if pos + 9 > n:
            raise McapError("chunk: truncated record header")
        op, length = _HEADER.unpack_from(data, pos)
        pos += 9
        if length > n - pos:
            raise McapError("chunk: a record runs past the end of its chunk")
        yield op, _Reader(data[pos:pos + length])
        pos += length


def read_mcap(f: BinaryIO, size: int, limits: McapLimits) -> Iterator[Schema | Channel | Message]:
    """Schemas, channels and messages of the MCAP file ``f`` of ``size`` bytes, in file order."""
    if f.read(len(MAGIC)) != MAGIC:
        raise McapError("not an MCAP file (magic bytes)")
    pos = len(MAGIC)
    inflated = [0]  # [bytes] the chunks' stated uncompressed sizes so far (each is checked to be exact)
    while True:
        if time.monotonic() > limits.deadline:
            raise McapError("reading took longer than the time limit")
        head = f.read(9)
        if len(head) == 0:
            return  # no Data End record: tolerated, everything up to here was whole
        if len(head) < 9:
            raise McapError("truncated record header")
        op, length = _HEADER.unpack(head)
        pos += 9
        if length > size - pos:
            raise McapError("a record runs past the end of the file (truncated)")
        if op in (DATA_END, FOOTER):
            return
        if op == CHUNK:
            yield from _chunk(f, length, limits, inflated)
        elif op in (SCHEMA, CHANNEL, MESSAGE):
            if op == MESSAGE and length > limits.max_message_bytes + 22:
                raise McapError(f"message: {length} bytes, more than max_message_bytes {limits.max_message_bytes}")
            if op != MESSAGE and length > limits.max_message_bytes:
                raise McapError(f"record of {length} bytes, more than max_message_bytes {limits.max_message_bytes}")
            item = _record(op, _Reader(_read_exact(f, length)), limits)
            if item is not None:
                yield item
        else:
            f.seek(length, 1)  # an index, attachment, statistics ...: not read
        pos += length


def _read_exact(f: BinaryIO, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise McapError("truncated record")
    return data


def _chunk(f: BinaryIO, length: int, limits: McapLimits, inflated: list[int]) -> Iterator[Schema | Channel | Message]:
    fixed = _read_exact(f, 28)  # start time, end time, uncompressed size, uncompressed crc
    _, _, uncompressed, _ = struct.unpack("<QQQI", fixed)
    if uncompressed > limits.max_chunk_bytes:
        raise McapError(f"chunk: states {uncompressed} bytes uncompressed, more than max_chunk_bytes "
                        f"{limits.max_chunk_bytes}")
    inflated[0] += uncompressed
    if inflated[0] > limits.max_decompressed_bytes:
        raise McapError(f"chunks: decompress to more than {limits.max_decompressed_bytes} bytes in all (the limit "
                        "of max_decompressed_bytes and max_decompression_ratio)")
    n = struct.unpack("<I", _read_exact(f, 4))[0]
    if n > 64 or 32 + n + 8 > length:
        raise McapError("chunk: malformed compression field")
    compression = _read_exact(f, n).decode("utf-8", "replace")
    records_length = struct.unpack("<Q", _read_exact(f, 8))[0]
    if records_length != length - 32 - n - 8:
        raise McapError("chunk: its records length does not match the record")
    data = _decompress(_read_exact(f, records_length), compression, uncompressed)
    for op, rec in _records(data, limits.deadline):
        item = _record(op, rec, limits)
        if item is not None:
            yield item


def _record(op: int, rec: _Reader, limits: McapLimits) -> Schema | Channel | Message | None:
    if op == SCHEMA:
        sid = rec.u16()
        name, encoding = rec.string(), rec.string()
        data = bytes(rec.take(rec.u32())).decode("utf-8", "replace")
        return Schema(sid, name, encoding, data)
    if op == CHANNEL:
        cid, sid = rec.u16(), rec.u16()
        topic, encoding = rec.string(), rec.string()
        return Channel(cid, sid, topic, encoding)
    if op == MESSAGE:
        cid = rec.u16()
        rec.u32()  # sequence
        log_time = rec.u64()
        rec.u64()  # publish time
        data = rec.rest()
        if len(data) > limits.max_message_bytes:
            raise McapError(f"message: {len(data)} bytes, more than max_message_bytes {limits.max_message_bytes}")
        return Message(cid, log_time, data)
    return None
