"""A rosbag2 folder read as data, inside itself: its ``metadata.yaml``, its storage files (sqlite3 or MCAP, either
compressed with zstd per file or per message) and the raw messages of chosen topics, every size and time bounded.

Rules (each one a file that once reached outside its bag or stalled the reader):

* **Inside the folder, by name.** The folder is opened once (a directory descriptor); every file is opened
  relative to it. A storage file named in ``metadata.yaml`` must be a plain name (no separator, no ``..``, no
  control character, none of ``% ? #``, which SQLite's URI syntax would interpret), a regular file (a symbolic
  link, FIFO, device or folder is refused; FIFOs are opened non-blocking so they cannot hang the reader).
* **No URI parsing of paths.** SQLite opens ``/proc/self/fd/<n>`` of the already opened file, read-only and
  immutable, so neither the folder's name (any legal character, ``#`` included) nor the file's is ever parsed.
* **Tables, not code.** The SQLite schema must hold ``topics`` and ``messages`` as tables (and
  ``message_definitions`` as a table if present); views and triggers are never queried, untrusted schema functions
  are off, every statement runs under a time limit (a progress handler) and blobs beyond ``max_message_bytes`` are
  an error of SQLite itself.
* **Decompression bounded before allocation** (:mod:`.compression`); MCAP chunks likewise (:mod:`.mcap_records`),
  each chunk and all of a file's chunks together (the same limit as a compressed storage file of that size).
* **Counts from what is read.** The index counts of ``metadata.yaml`` or of the storage are never trusted: the
  reader counts the messages it yields and stops at ``max_messages``.

Errors: :class:`BagError` (a ValueError), one line naming the bag by base name and the file by its name; file
contents are never quoted.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import stat
import tempfile
import time
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

from vtm_dynamics.core.limited_yaml import load_yaml_text
from vtm_dynamics.recordings.compression import DecompressionError, decompress_file, decompress_message, file_limit
from vtm_dynamics.recordings.mcap_records import Channel, McapError, McapLimits, Message, Schema, read_mcap

_NAME = re.compile(r"^[^/\\\x00-\x1f\x7f%?#]{1,255}$")
STORAGES = ("mcap", "sqlite3")


class BagError(ValueError):
    """A bag that cannot be read as data within its limits (one line)."""


@dataclass(frozen=True)
class BagLimits:
    """What a bag may cost. ``max_messages``: messages of the chosen topics; ``max_message_bytes``: one message
    (decompressed); ``max_chunk_bytes``: one MCAP chunk (uncompressed); ``max_decompressed_bytes``,
    ``max_decompression_ratio``, ``min_decompressed_bytes``: a zstd-compressed storage file (:mod:`.compression`)
    and all chunks of an MCAP file together;
    ``max_metadata_bytes``: metadata.yaml; ``max_files``, ``max_topics``: entries; ``max_seconds``: reading time."""

    max_messages: int = 5_000_000
    max_message_bytes: int = 64 * 1024 * 1024
    max_chunk_bytes: int = 256 * 1024 * 1024
    max_decompressed_bytes: int = 16 * 1024 * 1024 * 1024
    max_decompression_ratio: float = 1000.0
    min_decompressed_bytes: int = 64 * 1024 * 1024
    max_metadata_bytes: int = 1024 * 1024
    max_files: int = 1000
    max_topics: int = 10_000
    max_seconds: float = 3600.0


@dataclass(frozen=True)
class Topic:
    """A topic of the bag: ``name``, ``type_name`` (``pkg/msg/Type``) and its message definition as stored
    (``definition_format`` "ros2msg" / "ros2idl" / "" when the bag has none)."""

    name: str
    type_name: str
    definition_format: str = ""
    definition: str = ""


@dataclass
class _Meta:
    storage: str
    files: list[str]
    compression: str  # "", "file" or "message"
    topics: dict[str, str] = field(default_factory=dict)  # name -> type (metadata.yaml: for the error texts only)


class BagFolder:
    """An open bag folder (a context manager): ``storage``, ``topics`` of every storage file, and
    :meth:`messages`. ``path`` is the user's (a trusted argument); nothing inside it is followed."""

    def __init__(self, path: str, limits: BagLimits = BagLimits()) -> None:
        self.name = os.path.basename(os.path.normpath(path)) or path
        self.limits = limits
        self.deadline = time.monotonic() + limits.max_seconds
        self._stack = ExitStack()
        try:
            self._dir = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            raise BagError(f"{self.name}: not a rosbag2 directory (expected a folder with metadata.yaml)") from None
        self._stack.callback(os.close, self._dir)
        try:
            self.meta = self._metadata()
            self._files = [self._storage_file(n) for n in self.meta.files]
            self.topics = self._read_topics()
        except BaseException:
            self._stack.close()
            raise

    def __enter__(self) -> "BagFolder":
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def close(self) -> None:
        self._stack.close()

    @property
    def storage(self) -> str:
        return self.meta.storage

    def _error(self, text: str) -> BagError:
        return BagError(f"{self.name}: {text}")

    # ------------------------------------------------------------------------------------ files inside the folder
    def _open_inside(self, name: str, what: str) -> BinaryIO:
        """The regular file ``name`` of the folder, opened without following links or blocking on a FIFO."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self._dir)
        except FileNotFoundError:
            raise self._error(f"{what} {name!r} is missing") from None
        except OSError as err:
            kind = "a symbolic link" if os.path.islink(f"/proc/self/fd/{self._dir}/{name}") else err.strerror
            raise self._error(f"{what} {name!r} cannot be opened ({kind}); only regular files inside the bag "
                              "are read") from None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise self._error(f"{what} {name!r} is not a regular file; only regular files inside the bag are read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")

    def _metadata(self) -> _Meta:
        try:
            os.stat("metadata.yaml", dir_fd=self._dir, follow_symlinks=False)
        except FileNotFoundError:
            raise self._error("not a readable rosbag2 recording (no metadata.yaml in the folder)") from None
        with self._open_inside("metadata.yaml", "metadata file") as f:
            raw = f.read(self.limits.max_metadata_bytes + 1)
        if len(raw) > self.limits.max_metadata_bytes:
            raise self._error(f"metadata.yaml: more than {self.limits.max_metadata_bytes} bytes")
        try:
            doc = load_yaml_text(raw.decode("utf-8"), "metadata.yaml", BagError, max_bytes=self.limits.max_metadata_bytes,
                                 max_nodes=200_000)
            info = doc["rosbag2_bagfile_information"]
            storage = str(info["storage_identifier"])
            files = [self._file_name(str(x)) for x in info["relative_file_paths"]]
            mode = str(info.get("compression_mode") or "").lower()
            fmt = str(info.get("compression_format") or "").lower()
            topics = {str(t["topic_metadata"]["name"]): str(t["topic_metadata"]["type"])
                      for t in (info.get("topics_with_message_count") or [])[: self.limits.max_topics]}
        except BagError as err:
            raise self._error(str(err)) from None
        except (KeyError, TypeError, AttributeError, UnicodeDecodeError, ValueError):
            raise self._error("metadata.yaml: not rosbag2 metadata (missing or malformed fields)") from None
        if storage not in STORAGES:
            raise self._error(f"metadata.yaml: storage {storage[:40]!r} is not supported (mcap, sqlite3)")
        mode = "" if mode == "none" else mode
        if mode not in ("", "file", "message"):
            raise self._error(f"metadata.yaml: compression_mode {mode[:20]!r} is not supported")
        if mode and fmt != "zstd":
            raise self._error(f"metadata.yaml: compression_format {fmt[:20]!r} is not supported (zstd)")
        if not files or len(files) > self.limits.max_files:
            raise self._error(f"metadata.yaml: relative_file_paths must name 1 to {self.limits.max_files} files")
        return _Meta(storage, files, mode, topics)

    def _file_name(self, entry: str) -> str:
        """A storage file's name from ``relative_file_paths``: a plain name inside the folder. (rosbag2 before
        version 4 wrote ``<bag>/<file>``: that prefix, and only that, is dropped.)"""
        if entry.startswith(self.name + "/"):
            entry = entry[len(self.name) + 1:]
        if not _NAME.match(entry) or entry in (".", ".."):
            shown = entry[:60].encode("unicode_escape").decode("ascii")
            raise BagError(f"metadata.yaml: relative_file_paths: {shown!r} is not a file name inside the bag")
        return entry

    def _storage_file(self, name: str) -> BinaryIO:
        f = self._open_inside(name, "storage file")
        self._stack.callback(f.close)
        if self.meta.compression != "file":
            return f
        size = os.fstat(f.fileno()).st_size
        limit = file_limit(size, self.limits.max_decompressed_bytes, self.limits.max_decompression_ratio,
                           self.limits.min_decompressed_bytes)
        # a named file in a private folder (SQLite opens the file by the name its descriptor resolves to); the
        # folder is removed when the bag is closed, whatever happens
        folder = tempfile.mkdtemp(prefix="vtm-bag-")
        self._stack.callback(shutil.rmtree, folder, True)
        out = open(os.path.join(folder, "storage"), "w+b")
        self._stack.callback(out.close)
        try:
            decompress_file(f, out, limit)
        except DecompressionError as err:
            raise self._error(f"{name}: {err}") from None
        out.seek(0)
        return out

    # ------------------------------------------------------------------------------------------------ topics
    def _read_topics(self) -> dict[str, Topic]:
        topics: dict[str, Topic] = {}
        for f in self._files:
            for t in (self._sqlite_topics(f) if self.storage == "sqlite3" else self._mcap_topics(f)):
                if t.name not in topics or not topics[t.name].definition:
                    topics[t.name] = t
                if len(topics) > self.limits.max_topics:
                    raise self._error(f"more than {self.limits.max_topics} topics")
        return topics

    def _mcap_topics(self, f: BinaryIO) -> list[Topic]:
        schemas: dict[int, Schema] = {}
        out = {}
        for item in self._mcap(f, topics_only=True):
            if isinstance(item, Schema):
                schemas[item.id] = item
            elif isinstance(item, Channel):
                s = schemas.get(item.schema_id)
                out[item.topic] = Topic(item.topic, s.name if s else "", s.encoding if s else "", s.data if s else "")
        return list(out.values())

    def _mcap(self, f: BinaryIO, topics_only: bool = False) -> Iterator[Schema | Channel | Message]:
        f.seek(0)
        size = os.fstat(f.fileno()).st_size
        # all chunks together are bounded like a compressed storage file: before, only each chunk was, and a few
        # megabytes of chunks inflating 1000-fold each kept the reader decompressing until the time limit
        total = file_limit(size, self.limits.max_decompressed_bytes, self.limits.max_decompression_ratio,
                           self.limits.min_decompressed_bytes)
        limits = McapLimits(self.limits.max_chunk_bytes, self.limits.max_message_bytes, self.deadline, total)
        try:
            for item in read_mcap(f, size, limits):
                if topics_only and isinstance(item, Message):
                    continue
                yield item
        except McapError as err:
            raise self._error(f"corrupt or truncated MCAP file: {err}") from None

    def _sqlite(self, f: BinaryIO) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(f"file:/proc/self/fd/{f.fileno()}?mode=ro&immutable=1", uri=True,
                                   check_same_thread=False)
        except (sqlite3.Error, UnicodeDecodeError):
            raise self._error("not a readable sqlite3 storage file") from None
        conn.text_factory = lambda b: b.decode("utf-8", "replace")  # text is data: broken UTF-8 is no crash
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(1_000_000, self.limits.max_message_bytes))
        deadline = self.deadline
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA temp_store = MEMORY")
        return conn

    def _sqlite_query(self, conn: sqlite3.Connection, sql: str, args: tuple = ()) -> Iterator[tuple]:
        if time.monotonic() > self.deadline:
            raise self._error(f"sqlite3 storage: reading took longer than the time limit ({self.limits.max_seconds:g} s)")
        try:
            yield from conn.execute(sql, args)
        except sqlite3.OperationalError as err:
            if "interrupted" in str(err):
                raise self._error(f"sqlite3 storage: reading took longer than the time limit "
                                  f"({self.limits.max_seconds:g} s)") from None
            raise self._error(f"corrupt sqlite3 storage ({type(err).__name__})") from None
        except (sqlite3.Error, UnicodeDecodeError) as err:  # SQLite's message may quote broken schema text
            raise self._error(f"corrupt sqlite3 storage ({type(err).__name__})") from None

    def _sqlite_tables(self, conn: sqlite3.Connection) -> dict[str, str]:
        kinds = {name: kind for kind, name in self._sqlite_query(
            conn, "SELECT type, name FROM sqlite_master WHERE name IN "
                  "('topics', 'messages', 'message_definitions')")}
        for name in ("topics", "messages"):
            if kinds.get(name) != "table":
                raise self._error(f"sqlite3 storage: {name!r} is {'missing' if name not in kinds else 'no table'}")
        if kinds.get("message_definitions", "table") != "table":
            raise self._error("sqlite3 storage: 'message_definitions' is no table")
        return kinds

    def _sqlite_topics(self, f: BinaryIO) -> list[Topic]:
        with closing(self._sqlite(f)) as conn:
            kinds = self._sqlite_tables(conn)
            definitions: dict[str, tuple[str, str]] = {}
            if "message_definitions" in kinds:
                for type_name, encoding, text in self._sqlite_query(
                        conn, "SELECT topic_type, encoding, encoded_message_definition FROM message_definitions "
                              "LIMIT ?", (self.limits.max_topics + 1,)):
                    definitions[str(type_name)] = (str(encoding), str(text))
            rows = list(self._sqlite_query(conn, "SELECT name, type, serialization_format FROM topics LIMIT ?",
                                           (self.limits.max_topics + 1,)))
        out = []
        for name, type_name, fmt in rows:
            if fmt != "cdr":
                raise self._error(f"topic {str(name)[:80]!r}: serialization format {str(fmt)[:20]!r} is not "
                                  "supported (cdr)")
            enc, text = definitions.get(str(type_name), ("", ""))
            out.append(Topic(str(name), str(type_name), enc, text))
        return out

    # ------------------------------------------------------------------------------------------------ messages
    def messages(self, topics: set[str]) -> Iterator[tuple[str, int, bytes]]:
        """(topic, receive time [ns], CDR bytes) of every message on ``topics``, in storage order; at most
        ``max_messages`` (counted as read: more is an error)."""
        count = 0
        for f in self._files:
            source = self._sqlite_messages(f, topics) if self.storage == "sqlite3" else self._mcap_messages(f, topics)
            for topic, stamp, data in source:
                count += 1
                if count > self.limits.max_messages:
                    raise self._error(f"more than max_messages {self.limits.max_messages} messages on "
                                      f"{', '.join(sorted(topics))}")
                if self.meta.compression == "message":
                    try:
                        data = decompress_message(data, self.limits.max_message_bytes)
                    except DecompressionError as err:
                        raise self._error(f"{topic}: {err}") from None
                yield topic, stamp, data

    def _sqlite_messages(self, f: BinaryIO, topics: set[str]) -> Iterator[tuple[str, int, bytes]]:
        with closing(self._sqlite(f)) as conn:
            self._sqlite_tables(conn)
            ids = {int(i): str(n) for i, n in self._sqlite_query(conn, "SELECT id, name FROM topics")
                   if str(n) in topics}
            if not ids:
                return
            marks = ",".join("?" * len(ids))
            for topic_id, stamp, data in self._sqlite_query(
                    conn, f"SELECT topic_id, timestamp, data FROM messages WHERE topic_id IN ({marks})",
                    tuple(ids)):
                if not isinstance(data, bytes) or not isinstance(stamp, int):
                    raise self._error("corrupt sqlite3 storage (a message row is not a timestamp and bytes)")
                yield ids[int(topic_id)], stamp, data

    def _mcap_messages(self, f: BinaryIO, topics: set[str]) -> Iterator[tuple[str, int, bytes]]:
        channels: dict[int, str] = {}
        for item in self._mcap(f):
            if isinstance(item, Channel):
                if item.message_encoding != "cdr":
                    raise self._error(f"topic {item.topic[:80]!r}: message encoding "
                                      f"{item.message_encoding[:20]!r} is not supported (cdr)")
                channels[item.id] = item.topic
            elif isinstance(item, Message):
                topic = channels.get(item.channel_id)
                if topic is None:
                    raise self._error("corrupt MCAP file: a message of an unknown channel")
                if topic in topics:
                    yield topic, item.log_time, item.data

    def count_messages(self) -> dict[str, int]:
        """Messages per topic, counted by reading them (bounded like :meth:`messages`)."""
        counts: dict[str, int] = {}
        for topic, _, _ in self.messages(set(self.topics)):
            counts[topic] = counts.get(topic, 0) + 1
        return counts
