"""Decompression of recordings with the output bounded before it is allocated.

rosbag2 compresses with zstd either each message (``compression_mode: message``) or each storage file
(``compression_mode: file``, e.g. ``bag_0.db3.zstd``). A few kilobytes of zstd can state or produce gigabytes, so
neither is ever decompressed in one call: a message is decompressed with an output limit of ``max_bytes + 1``
(one byte more tells "too large" from "exactly at the limit"), a file is streamed in pieces into the caller's file
and stops once more than its limit has come out. :func:`file_limit` gives the limit of a compressed file: at most
``max_bytes``, and no more than ``max_ratio`` times its compressed size (a legitimate recording compresses a few
times, a bomb thousands of times), but never less than ``min_bytes``.

Errors: :class:`DecompressionError` (a ValueError), one line naming the limit.
"""

from __future__ import annotations

import sys
from typing import BinaryIO

PIECE = 1024 * 1024  # [bytes] output read per step when streaming a file


class DecompressionError(ValueError):
    """Compressed data that is corrupt or decompresses beyond its limit (one line)."""


def zstd_module():
    if sys.version_info >= (3, 14):  # the standard library's module (PEP 784)
        from compression import zstd
    else:  # its backport, installed with rosbags
        from backports import zstd
    return zstd


def zstd_decompressor():
    """A one-frame zstd decompressor whose ``decompress(data, max_length)`` bounds its output."""
    return zstd_module().ZstdDecompressor()


def decompress_message(data: bytes, max_bytes: int) -> bytes:
    """The single zstd frame ``data`` decompressed, at most ``max_bytes`` bytes."""
    d = zstd_decompressor()
    try:
        out = d.decompress(data, max_length=max_bytes + 1)
    except Exception:  # noqa: BLE001 - the library's error types differ by version; each is corrupt data
        raise DecompressionError("message: zstd data is corrupt") from None
    if len(out) > max_bytes:
        raise DecompressionError(f"message: decompresses to more than max_message_bytes {max_bytes}")
    if not d.eof or d.unused_data:
        raise DecompressionError("message: zstd data is truncated or holds more than one frame")
    return out


def file_limit(compressed_size: int, max_bytes: int, max_ratio: float, min_bytes: int) -> int:
    """The most bytes a compressed file of ``compressed_size`` may decompress to (module docstring)."""
    return int(min(max_bytes, max(min_bytes, max_ratio * compressed_size)))


def decompress_file(src: BinaryIO, dst: BinaryIO, limit: int) -> int:
    """Stream the zstd file ``src`` into ``dst``; at most ``limit`` bytes; returns the bytes written."""
    zstd = zstd_module()
    written = 0
    try:
        with zstd.ZstdFile(src, "rb") as stream:
            while True:
                piece = stream.read(min(PIECE, limit + 1 - written))
                if not piece:
                    return written
                written += len(piece)
                if written > limit:
                    raise DecompressionError(f"storage file: decompresses to more than {limit} bytes (the limit "
                                             "of max_decompressed_bytes and max_decompression_ratio)")
                dst.write(piece)
    except DecompressionError:
        raise
    except Exception:  # noqa: BLE001 - corrupt or truncated zstd data
        raise DecompressionError("storage file: zstd data is corrupt or truncated") from None
