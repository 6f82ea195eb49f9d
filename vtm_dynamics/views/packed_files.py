"""Files a view page inlines unchanged from page to page (Drake's viewer script, the robot's mesh files), packed
once and kept in a cache in the process and on disk.

Packed: compressed (zlib's DEFLATE, which the page undoes with the browser's own ``DecompressionStream``) and in
base64, so that writing the UR5's page copies 0.97 MB of packed text (the viewer without its unused decoders,
the meshes baked) instead of reading, checking and copying 8.9 MB of raw files.

Key: the source file's resolved path, device, inode, size, modification and change times (one ``fstat`` of the
opened file, or one ``stat``), what it is packed as (its bytes, the viewer without its decoders, or a mesh baked
from them: ``baked_meshes``) and :data:`FORMAT`: a hit neither reads nor hashes the source. A file modified less
than :data:`SETTLE_S` before it is packed is not kept (its time stamp cannot yet tell a second change in the same
clock tick from none).

On disk: one file per entry in :func:`cache_directory` (``$VTM_VIEW_CACHE``, else ``$XDG_CACHE_HOME/vtm_dynamics/
views``, else ``~/.cache/vtm_dynamics/views``; ``VTM_VIEW_CACHE=off`` keeps the cache in the process only), named by
the key's sha256, written to a temporary name and renamed (``os.replace``), so no reader sees half an entry under
its name. An entry is served only when its header has this format and this key, and its payload the length and
checksum the header gives and no ``<`` (so it can never end the page element it goes into): a truncated, flipped,
edited or foreign file is packed again and replaced. The checksum is the sum of the payload's 64-bit words
(:func:`checksum`): it finds any one changed byte, a truncation and a zeroed block like a CRC-32, in a ninth of the
time (0.06 against 0.54 ms for 3.8 MB, which every page that reads the disk cache pays); what it can miss
(two changes that cancel, swapped words) the page's own check still finds: zlib's Adler-32 of every unpacked file.
The directory is kept under :data:`MAX_DISK_BYTES` (least recently used entries removed first, to the day); an entry
is at most :data:`MAX_ENTRY_BYTES`. A cache directory that cannot be written only costs the packing again: the page
is the same.

In the process: the entries used, least recently used dropped first beyond :data:`MAX_MEMORY_BYTES`. An entry
whose payload has at least :data:`MAP_MIN_BYTES` is mapped into memory (``mmap``), not read into new memory: a new
process reading the UR5's 1.6 MB of entries (before the viewer lost its decoders) paid about 1 ms in page faults
for the memory it filled, mapping them about 0.5 ms (checksum and '<' check included). A mapping keeps the entry
as it was checked: this module never rewrites an entry in place (a new one is renamed over it, pruning unlinks), so
a file under a mapping does not change; a process truncating an entry in place while it is mapped would make its
reader fault.

Also kept (:func:`kept_value`): short texts derived from a file that cost more to derive than to read back, e.g. a
COLLADA file's unit, which ``mesh_files`` parses from the file's head; same key, same entries, not packed.
"""

from __future__ import annotations

import base64
import hashlib
import mmap
import os
import re
import secrets
import stat
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

FORMAT = "vtm-packed/2 zlib-6 base64 sum64"
LEVEL = 6  # zlib's default: level 9 saves 1.5 % of the UR5's bytes for 2.5 x the packing time
SETTLE_S = 2.0  # [s] a file changed more recently than this is packed but not kept
MAX_ENTRY_BYTES = 64 * 1024 * 1024  # one entry on disk or in memory (a 32 MB mesh packs to <= 44 MB)
MAX_DISK_BYTES = 512 * 1024 * 1024  # all entries on disk
MAX_MEMORY_BYTES = 128 * 1024 * 1024  # all entries kept in the process
_ENTRY = re.compile(r"^[0-9a-f]{64}\.pack$")
MAP_MIN_BYTES = 64 * 1024  # an entry's payload this long is mapped from the file, not read into new memory
_HEX = re.compile(rb"[0-9a-f]{1,16}")
_TEMP = re.compile(r"^\.[0-9a-f]{64}\.[0-9a-f]{16}\.part$")
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TOUCH_AFTER_S = 86400.0  # [s] an entry used is marked used (its time stamp) at most once a day: a hit writes nothing
_TEMP_AGE_S = 600.0  # [s] a temporary file this old is a writer's leftover (it crashed): removed when pruning


@dataclass(frozen=True)
class PackedFile:
    """A file as the page holds it: ``text``, the base64 (ASCII) of its zlib-compressed bytes (bytes, or a read-only
    view of a disk cache entry mapped into memory), and ``size``, the number of bytes it decompresses to."""

    text: bytes | memoryview
    size: int


def pack(data: bytes) -> PackedFile:
    """``data`` packed (module docstring)."""
    return PackedFile(base64.b64encode(zlib.compress(data, LEVEL)), len(data))


def checksum(text: bytes) -> int:
    """The sum, modulo 2**64, of ``text`` read as little-endian 64-bit words (the last one padded with zeros)."""
    whole = len(text) // 8
    words = int(np.frombuffer(text, dtype="<u8", count=whole).sum(dtype=np.uint64)) if whole else 0
    return (words + int.from_bytes(text[8 * whole:], "little")) % (1 << 64)


def cache_key(path: str, info: os.stat_result, kind: str = "file") -> tuple:
    """The cache key of the file at the resolved ``path`` with status ``info``, packed as ``kind`` ('file': its
    bytes; another name: what the caller's ``read`` makes of them, e.g. a baked mesh)."""
    return (FORMAT, kind, path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def cache_directory() -> str | None:
    """Where packed files are kept on disk (module docstring), or None when ``VTM_VIEW_CACHE=off``."""
    explicit = os.environ.get("VTM_VIEW_CACHE", "").strip()
    if explicit:
        return None if explicit.lower() == "off" else os.path.abspath(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "vtm_dynamics", "views")


class ProcessCache:
    """The entries kept in this process: least recently used dropped first beyond MAX_MEMORY_BYTES."""

    def __init__(self) -> None:
        self.items: OrderedDict[tuple, PackedFile] = OrderedDict()
        self.total = 0
        self.lock = threading.Lock()

    def get(self, key: tuple) -> PackedFile | None:
        with self.lock:
            item = self.items.get(key)
            if item is not None:
                self.items.move_to_end(key)
            return item

    def put(self, key: tuple, item: PackedFile) -> None:
        with self.lock:
            if key in self.items or len(item.text) > MAX_MEMORY_BYTES:
                return
            self.items[key] = item
            self.total += len(item.text)
            while self.total > MAX_MEMORY_BYTES:
                self.total -= len(self.items.popitem(last=False)[1].text)

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.total = 0


_memory = ProcessCache()


def clear_memory() -> None:
    """Forget the entries kept in this process (the disk cache stays): the next page is as a new process's."""
    _memory.clear()


def _digest(key: tuple) -> str:
    return hashlib.sha256(repr(key).encode("utf-8")).hexdigest()


def entry_name(key: tuple) -> str:
    """The name of the disk cache's entry for ``key`` (:func:`cache_key`) in :func:`cache_directory`."""
    return f"{_digest(key)}.pack"


_HEADER_MAX = 256  # bytes: FORMAT, the digest and three numbers


def _header(digest: str, item: PackedFile) -> bytes:
    return f"{FORMAT}\n{digest} {item.size:x} {len(item.text):x} {checksum(item.text):x}\n".encode("ascii")


def _header_fields(digest: str, head: bytes) -> tuple[int, int, int, int] | None:
    """(unpacked size, payload offset, payload length, checksum) from an entry's first bytes ``head`` when they are a
    header of this format and key ``digest``, else None."""
    lead = f"{FORMAT}\n{digest} ".encode("ascii")
    end = head.find(b"\n", len(lead))
    if not head.startswith(lead) or end < 0:
        return None
    fields = head[len(lead):end].split(b" ")
    if len(fields) != 3 or not all(_HEX.fullmatch(f) for f in fields):
        return None
    return int(fields[0], 16), end + 1, int(fields[1], 16), int(fields[2], 16)


def _read_entry(folder: str, digest: str) -> PackedFile | None:
    """The entry of key ``digest`` in ``folder`` when it is intact (module docstring), else None."""
    path = os.path.join(folder, f"{digest}.pack")  # entry_name
    try:
        fd = os.open(path, _READ)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
            return None
        fields = _header_fields(digest, os.pread(fd, _HEADER_MAX, 0))
        if fields is None or fields[1] + fields[2] != info.st_size:
            return None
        size, start, length, total = fields
        if length >= MAP_MIN_BYTES:
            mapped = mmap.mmap(fd, info.st_size, access=mmap.ACCESS_READ)
            text: bytes | memoryview = memoryview(mapped)[start:]
            lt = mapped.find(b"<", start)
        else:
            text = os.pread(fd, length + 1, start)  # the payload alone: not copied out of a larger buffer
            lt = text.find(b"<")
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if len(text) != length or checksum(text) != total or lt >= 0:
        return None
    if time.time() - info.st_mtime > _TOUCH_AFTER_S:  # pruning removes the least recently used first
        try:
            os.utime(path, follow_symlinks=False)
        except OSError:
            pass
    return PackedFile(text, size)


def _write_entry(folder: str, digest: str, item: PackedFile) -> None:
    """Store ``item`` under ``digest`` atomically, then prune the directory; any OSError is the caller's."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    temp = os.path.join(folder, f".{digest}.{secrets.token_hex(8)}.part")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(_header(digest, item) + item.text)
        os.replace(temp, os.path.join(folder, f"{digest}.pack"))
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    prune(folder)


def prune(folder: str, limit: int = MAX_DISK_BYTES) -> None:
    """Remove the least recently used entries of ``folder`` until the rest holds at most ``limit`` bytes, and
    temporary files left by a writer that stopped. Only regular files with this module's names are touched."""
    entries, now = [], time.time()
    for name in os.listdir(folder):
        entry, temp = _ENTRY.match(name), _TEMP.match(name)
        if not (entry or temp):
            continue
        try:
            info = os.stat(os.path.join(folder, name), follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        if temp:
            if now - info.st_mtime > _TEMP_AGE_S:
                _remove(folder, name)
            continue
        entries.append((info.st_mtime_ns, info.st_size, name))
    total = sum(size for _, size, _ in entries)
    for _, size, name in sorted(entries):
        if total <= limit:
            break
        _remove(folder, name)
        total -= size


def _remove(folder: str, name: str) -> None:
    try:
        os.unlink(os.path.join(folder, name))
    except OSError:
        pass


def packed_file(path: str, info: os.stat_result, read: Callable[[], bytes], kind: str = "file") -> PackedFile:
    """The file at the resolved ``path`` with status ``info`` (of the descriptor ``read`` reads) packed as ``kind``
    (:func:`cache_key`): from the cache (memory, then disk) when it holds this key intact, else ``read()`` packed
    and kept (module docstring); what ``read`` raises is the caller's."""
    return _kept(cache_key(path, info, kind), info, lambda: pack(read()))


_VALUE = re.compile(r"[ -;=-~]{1,200}")  # printable ASCII without '<', one line


def kept_value(path: str, info: os.stat_result, kind: str, make: Callable[[], str]) -> str:
    """A short text ``make()`` derives from the file at the resolved ``path`` with status ``info`` (e.g. a COLLADA
    file's unit, which costs a parse of the file's head), kept in the same cache as the packed files under the
    key of ``kind`` (:func:`cache_key`), as it is (not packed): at most 200 printable ASCII characters without
    ``<``; a text that is not is returned but not kept. What ``make`` raises is the caller's."""
    made: list[str] = []

    def item() -> PackedFile:
        made.append(make())
        text = made[0].encode("ascii", "replace")
        return PackedFile(text, len(text))

    kept = _kept(cache_key(path, info, kind), info, item,
                 keep=lambda it: _VALUE.fullmatch(bytes(it.text).decode("ascii", "replace")) is not None)
    return made[0] if made else bytes(kept.text).decode("ascii")


def _kept(key: tuple, info: os.stat_result, make: Callable[[], PackedFile],
          keep: Callable[[PackedFile], bool] = lambda item: True) -> PackedFile:
    """The cache's item for ``key`` (memory, then disk) when it holds it intact and ``keep`` accepts it, else
    ``make()``, kept when ``keep`` accepts it and the file has settled (module docstring)."""
    item = _memory.get(key)
    if item is not None:
        return item
    folder, digest = cache_directory(), _digest(key)
    item = _read_entry(folder, digest) if folder is not None else None
    if item is not None and not keep(item):
        item = None
    if item is None:
        item = make()
        if not keep(item):
            return item
        settled = time.time_ns() - info.st_mtime_ns > SETTLE_S * 1e9
        if not settled or len(item.text) + _HEADER_MAX > MAX_ENTRY_BYTES:
            return item
        if folder is not None:
            try:
                _write_entry(folder, digest, item)
            except OSError:
                pass  # a cache that cannot be written costs the packing again, nothing else
    _memory.put(key, item)
    return item
