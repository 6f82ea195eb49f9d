"""Results of a chunked run on disk: one Parquet file per finished chunk, a manifest with the run's inputs.

Layout of a run directory::

    manifest.json              inputs (robot, brakes, map spec, software and engine settings), their sha256
                               ``inputs_hash``, chunk count
    chunks/chunk-000042.parquet one file per finished chunk (schema metadata: inputs hash, chunk, content checksum)
    failures.json              chunks that failed, each with its input and reason (absent when none failed)
    stopping_map.parquet       all rows in state order, written only once every chunk is done, in row groups of
                               ROW_GROUP_ROWS rows (the client holds one chunk or one row group at a time)

Every file is written to a temporary name in the same directory and renamed (``os.replace`` is atomic on POSIX), so a
reader never sees half a file under a final name. On resume a chunk file counts only if its metadata carries the
same inputs hash and its chunk number, the expected row count, and the sha256 of its column values equals the
checksum written with it (a chunk whose values were edited, metadata kept, is recomputed); anything else is
replaced by a recomputed chunk.

Careful with files: OUT (the user's argument) is opened once; everything inside it is reached through that folder's
descriptor, never through a path that could lead elsewhere. ``OUT/chunks`` and every file under the names above
must be what this module writes - a real folder, regular files - or the run stops with one line and touches
nothing (a symbolic link is never followed, read or deleted). The only files ever deleted are regular files under
those names and this module's own temporary files (``.<name>.<random>.part``); ``--overwrite`` deletes nothing else.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import stat
from typing import Any, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vtm_dynamics.core.bounded_file import NOT_REGULAR, BoundedFileError, read_bounded_file

FORMAT = "vtm-stopping-map/3"  # 3: the within_limits column (chunks of 2 lack it: not resumed)
_META_HASH = b"vtm_inputs_hash"
_META_CHUNK = b"vtm_chunk"
_META_CONTENT = b"vtm_content_sha256"
CHUNK_NAME = re.compile(r"^chunk-[0-9]{6}\.parquet$")
TEMP_NAME = re.compile(r"^\.(chunk-[0-9]{6}\.parquet|manifest\.json|failures\.json|stopping_map\.parquet)"
                       r"\.[A-Za-z0-9_]{1,32}\.part$")
ROW_GROUP_ROWS = 16_384  # rows per row group of the combined file (the client holds one while writing it)
SCRATCH_BLOCK = 8 * 1024 * 1024  # [bytes] read at a time when the combined file's checksum is computed
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


MAX_MANIFEST_BYTES = 16 * 1024 * 1024  # a manifest is a few kB (the inputs of one run); read no more than this


class StoreError(ValueError):
    """A run directory that cannot be used (one line)."""


def manifest_from_bytes(data: bytes) -> dict | None:
    """The JSON object in ``data``, or None when ``data`` holds none: malformed, another kind of value, over
    :data:`MAX_MANIFEST_BYTES`, or nested deeper than the JSON parser recurses (100,000 ``[`` raised
    ``RecursionError`` out of the tools)."""
    if len(data) > MAX_MANIFEST_BYTES:
        return None
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def read_manifest(path: str) -> dict | None:
    """The manifest in the file ``path`` (e.g. the ``manifest.json`` beside a map someone hands over), None when
    there is no such file. The file is data: it is opened without blocking (a FIFO there hung the reader), must be
    a regular file of at most :data:`MAX_MANIFEST_BYTES` (a link to ``/dev/zero`` was read until memory ran out)
    holding a JSON object; anything else is a one-line :class:`StoreError` naming the file by its base name."""
    name = os.path.basename(path)
    try:
        manifest = manifest_from_bytes(read_bounded_file(path, MAX_MANIFEST_BYTES))
    except FileNotFoundError:
        return None
    except OSError as err:
        raise StoreError(f"{name}: cannot be read ({err.strerror or type(err).__name__})") from None
    except BoundedFileError as err:
        if err.why == NOT_REGULAR:
            raise StoreError(f"{name}: not a regular file") from None
        raise StoreError(f"{name}: {err.size} bytes, more than {MAX_MANIFEST_BYTES}") from None
    if manifest is None:
        raise StoreError(f"{name}: not a JSON object (malformed, or nested too deeply)")
    return manifest


def inputs_hash(inputs: dict) -> str:
    """sha256 of the canonical JSON of ``inputs`` (sorted keys, exact float repr)."""
    text = json.dumps({"format": FORMAT, **inputs}, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_hash(columns: dict[str, np.ndarray]) -> str:
    """sha256 of the columns' names, dtypes and values in order: what a chunk's checksum covers."""
    h = hashlib.sha256()
    for name, values in columns.items():
        arr = np.ascontiguousarray(np.asarray(values))
        h.update(name.encode("utf-8") + b"\0" + arr.dtype.str.encode("ascii") + b"\0")
        h.update(len(arr).to_bytes(8, "little"))
        h.update(arr.tobytes())
    return h.hexdigest()


def _umask() -> int:
    """The process's file-creation mask (read from /proc where it is, else set and restored)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def table_of(columns: dict[str, np.ndarray], digest: str, chunk: int | None) -> pa.Table:
    """Arrow table of ``columns`` with the run's hash, the chunk number and the content checksum as metadata."""
    table = pa.table({k: pa.array(np.asarray(v)) for k, v in columns.items()})
    meta = {_META_HASH: digest.encode(), _META_CONTENT: content_hash(columns).encode()}
    if chunk is not None:
        meta[_META_CHUNK] = str(chunk).encode()
    return table.replace_schema_metadata(meta)


def _columns(table: pa.Table) -> dict[str, np.ndarray]:
    return {name: table.column(name).to_numpy() for name in table.column_names}


class _Folder:
    """A folder reached through a descriptor: files opened, written, replaced and deleted by name inside it."""

    def __init__(self, fd: int, shown: str) -> None:
        self.fd, self.shown = fd, shown

    def kind(self, name: str) -> str:
        """'missing', 'file' (regular), 'folder', 'symbolic link' or 'special file' - links not followed."""
        try:
            mode = os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return "missing"
        if stat.S_ISREG(mode):
            return "file"
        if stat.S_ISDIR(mode):
            return "folder"
        return "symbolic link" if stat.S_ISLNK(mode) else "special file"

    def require_file_or_missing(self, name: str) -> bool:
        """Whether ``name`` exists as a regular file; a StoreError if it is anything else."""
        kind = self.kind(name)
        if kind not in ("missing", "file"):
            raise StoreError(f"out: {self.shown}/{name} is not a regular file (a {kind}); nothing was changed - "
                             "remove it or choose another directory")
        return kind == "file"

    def open_read(self, name: str):
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self.fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise StoreError(f"out: {self.shown}/{name} is not a regular file")
        return os.fdopen(fd, "rb")

    def write_atomic(self, name: str, write: Any) -> None:
        tmp = f".{name}.{secrets.token_hex(8)}.part"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=self.fd)
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            if self.kind(tmp) == "file":
                os.unlink(tmp, dir_fd=self.fd)
            raise

    @contextlib.contextmanager
    def scratch(self) -> Iterator[int]:
        """A file descriptor of a new file no one else can reach: created under this module's temporary name and
        unlinked at once, so nothing is left behind, whatever happens."""
        tmp = f".stopping_map.parquet.{secrets.token_hex(8)}.part"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=self.fd)
        try:
            os.unlink(tmp, dir_fd=self.fd)
            yield fd
        finally:
            os.close(fd)

    def delete_own(self, name: str) -> None:
        """Delete ``name`` if it is a regular file (only ever called with this module's own names)."""
        if self.require_file_or_missing(name):
            os.unlink(name, dir_fd=self.fd)

    def names(self) -> list[str]:
        return os.listdir(self.fd)

    def close(self) -> None:
        os.close(self.fd)


class ChunkStore:
    """The files of one run in ``root`` for the inputs hashed to ``digest`` with ``n_chunks`` chunks."""

    def __init__(self, root: str, digest: str, n_chunks: int, rows_of: Any) -> None:
        self.root, self.digest, self.n_chunks, self.rows_of = root, digest, n_chunks, rows_of
        self._root: _Folder | None = None
        self._chunks: _Folder | None = None

    # ---------------------------------------------------------------------------- paths (for messages and readers)
    def chunk_name(self, chunk: int) -> str:
        return f"chunk-{chunk:06d}.parquet"

    def chunk_path(self, chunk: int) -> str:
        return os.path.join(self.root, "chunks", self.chunk_name(chunk))

    @property
    def manifest_path(self) -> str:
        return os.path.join(self.root, "manifest.json")

    @property
    def result_path(self) -> str:
        return os.path.join(self.root, "stopping_map.parquet")

    @property
    def failures_path(self) -> str:
        return os.path.join(self.root, "failures.json")

    # ---------------------------------------------------------------------------- folders
    def _folders(self) -> tuple[_Folder, _Folder]:
        if self._root is None:
            try:
                os.makedirs(self.root, exist_ok=True)
                root = _Folder(os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), self.root)
            except OSError as err:  # a file in the way, a read-only place, an empty name: one line naming out
                why = ("it exists and is not a directory" if os.path.lexists(self.root)
                       and not os.path.isdir(self.root) else err.strerror or type(err).__name__)
                raise StoreError(f"out: cannot use {self.root!r} as the run directory ({why})") from None
            kind = root.kind("chunks")
            if kind == "missing":
                os.mkdir("chunks", 0o755, dir_fd=root.fd)
            elif kind != "folder":
                root.close()
                raise StoreError(f"out: {self.root}/chunks is not a folder (a {kind}); nothing was changed - "
                                 "remove it or choose another directory")
            self._root = root
            self._chunks = _Folder(os.open("chunks", _DIR, dir_fd=root.fd), os.path.join(self.root, "chunks"))
        return self._root, self._chunks

    def close(self) -> None:
        for folder in (self._chunks, self._root):
            if folder is not None:
                folder.close()
        self._root = self._chunks = None

    # ---------------------------------------------------------------------------- manifest
    def open(self, inputs: dict, overwrite: bool = False) -> None:
        """Create the directory and manifest, or check that an existing run has the same inputs."""
        root, chunks = self._folders()
        for name in ("manifest.json", "stopping_map.parquet", "failures.json"):
            root.require_file_or_missing(name)
        for name in chunks.names():
            if CHUNK_NAME.match(name) or TEMP_NAME.match(name):
                chunks.require_file_or_missing(name)
        if root.kind("manifest.json") == "file":
            try:
                with root.open_read("manifest.json") as fh:
                    old = manifest_from_bytes(fh.read(MAX_MANIFEST_BYTES + 1)) or {}
            except OSError:
                old = {}
            if old.get("inputs_hash") == self.digest:
                return
            if not overwrite:
                raise StoreError(f"out: {self.root} holds a run with other inputs (use another directory or "
                                 "--overwrite)")
            for name in chunks.names():  # only this module's own names; anything else stays
                if CHUNK_NAME.match(name) or TEMP_NAME.match(name):
                    chunks.delete_own(name)
            for name in ("stopping_map.parquet", "failures.json"):
                root.delete_own(name)
        manifest = {"format": FORMAT, "inputs_hash": self.digest, "n_chunks": self.n_chunks, "inputs": inputs}
        root.write_atomic("manifest.json",
                          lambda f: f.write(json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")))

    # ---------------------------------------------------------------------------- chunks
    def write_chunk(self, chunk: int, columns: dict[str, np.ndarray]) -> str:
        table = table_of(columns, self.digest, chunk)
        _, chunks = self._folders()
        chunks.write_atomic(self.chunk_name(chunk), lambda f: pq.write_table(table, f))
        return self.chunk_path(chunk)

    def _read_chunk(self, chunk: int) -> dict[str, np.ndarray] | None:
        """The chunk's columns if its file belongs to this run and its values match their checksum, else None."""
        _, chunks = self._folders()
        name = self.chunk_name(chunk)
        if not chunks.require_file_or_missing(name):
            return None
        try:
            with chunks.open_read(name) as fh:
                table = pq.read_table(fh)
            kv = table.schema.metadata or {}
            columns = _columns(table)
            ok = (kv.get(_META_HASH) == self.digest.encode() and kv.get(_META_CHUNK) == str(chunk).encode()
                  and table.num_rows == self.rows_of(chunk)
                  and kv.get(_META_CONTENT) == content_hash(columns).encode())
        except StoreError:
            raise
        except Exception:  # noqa: BLE001 - a truncated or foreign file is not a result
            ok = False
        return columns if ok else None

    def chunk_is_done(self, chunk: int) -> bool:
        """True if the chunk's file belongs to this run and its values are intact (else the file is removed)."""
        if self._read_chunk(chunk) is not None:
            return True
        self._folders()[1].delete_own(self.chunk_name(chunk))
        return False

    def done_chunks(self) -> set[int]:
        _, chunks = self._folders()
        for name in chunks.names():  # leftovers of an interrupted write are never results
            if TEMP_NAME.match(name):
                chunks.delete_own(name)
        return {k for k in range(self.n_chunks) if self.chunk_is_done(k)}

    def write_failures(self, failures: Iterable[dict]) -> None:
        items = list(failures)
        root, _ = self._folders()
        if not items:
            root.delete_own("failures.json")
            return
        text = json.dumps({"inputs_hash": self.digest, "failures": items}, indent=1).encode("utf-8")
        root.write_atomic("failures.json", lambda f: f.write(text))

    def combine(self) -> str:
        """Write all chunks, in chunk (= state) order, to the final Parquet file (atomically), holding one chunk and
        one row group at a time; every chunk's values are checked against their checksum once more on the way.

        The file's checksum covers each column whole, one after the other (:func:`content_hash`), while the chunks
        come row by row: the first pass places each chunk's columns in a scratch file laid out column after
        column (about the map's size on disk, deleted as soon as it is made), hashes it, and the second writes
        the Parquet file from it in row groups of :data:`ROW_GROUP_ROWS` rows."""
        root, _ = self._folders()
        total = sum(self.rows_of(k) for k in range(self.n_chunks))
        with root.scratch() as scratch:
            layout = self._spill(scratch, total)
            h = hashlib.sha256()
            for name, dtype, offset in layout:
                h.update(name.encode("utf-8") + b"\0" + dtype.str.encode("ascii") + b"\0" + total.to_bytes(8, "little"))
                for start in range(0, total * dtype.itemsize, SCRATCH_BLOCK):
                    h.update(_pread(scratch, min(SCRATCH_BLOCK, total * dtype.itemsize - start), offset + start))
            schema = pa.schema([(name, pa.from_numpy_dtype(dtype)) for name, dtype, _ in layout],
                               metadata={_META_HASH: self.digest.encode(), _META_CONTENT: h.hexdigest().encode()})

            def write(f) -> None:
                with pq.ParquetWriter(f, schema) as writer:
                    for start in range(0, total, ROW_GROUP_ROWS):
                        n = min(ROW_GROUP_ROWS, total - start)
                        writer.write_table(pa.table(
                            {name: pa.array(np.frombuffer(_pread(scratch, n * dtype.itemsize,
                                                                 offset + start * dtype.itemsize), dtype=dtype))
                             for name, dtype, offset in layout}, schema=schema))

            root.write_atomic("stopping_map.parquet", write)
        return self.result_path

    def _spill(self, scratch: int, total: int) -> list[tuple[str, np.dtype, int]]:
        """Every chunk's columns checked and written into ``scratch`` column after column; the columns' names,
        dtypes and offsets there."""
        layout: list[tuple[str, np.dtype, int]] = []
        row = 0
        for k in range(self.n_chunks):
            columns = self._read_chunk(k)
            if columns is None:
                raise StoreError(f"out: {self.chunk_path(k)} changed during the run (checksum or metadata); run again "
                                 "to recompute it")
            arrays = {name: np.ascontiguousarray(values) for name, values in columns.items()}
            if not layout:
                offset = 0
                for name, values in arrays.items():
                    if values.dtype.kind not in "biuf":
                        raise StoreError(f"out: {self.chunk_path(k)}: column {name} is not numeric")
                    layout.append((name, values.dtype, offset))
                    offset += total * values.dtype.itemsize
            if [(name, values.dtype) for name, values in arrays.items()] != [(n, d) for n, d, _ in layout]:
                raise StoreError(f"out: {self.chunk_path(k)} has other columns than chunk 0; run again with "
                                 "--overwrite")
            for name, dtype, offset in layout:
                data, at = memoryview(arrays[name].tobytes()), offset + row * dtype.itemsize
                while data:  # a regular file may take fewer bytes than given (a full disk raises)
                    done = os.pwrite(scratch, data, at)
                    data, at = data[done:], at + done
            row += len(arrays[layout[0][0]])
        return layout


def _pread(fd: int, n: int, offset: int) -> bytes:
    """Exactly ``n`` bytes at ``offset`` (a scratch file that ends early is an error, never short data)."""
    parts, got = [], 0
    while got < n:
        part = os.pread(fd, n - got, offset + got)
        if not part:
            raise StoreError("out: the scratch file of the combined map ended early")
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def read_result(path: str) -> dict[str, np.ndarray]:
    """Columns of a finished map (numpy arrays)."""
    table = pq.read_table(path)
    return _columns(table)
