"""Results of a chunked run on disk: one Parquet file per finished chunk, a manifest with the run's inputs.

Layout of a run directory::

    manifest.json              inputs (robot, brakes, map spec), their sha256 ``inputs_hash``, chunk count
    chunks/chunk-000042.parquet one file per finished chunk (schema metadata: inputs hash, chunk, rows)
    failures.json              chunks that failed, each with its input and reason (absent when none failed)
    stopping_map.parquet       all rows in state order, written only once every chunk is done

Every file is written to a temporary name in the same directory and renamed (``os.replace`` is atomic on POSIX), so a
reader never sees half a file under a final name. On resume a chunk file counts only if its metadata carries the
same inputs hash, its chunk number and the expected row count and the file reads back whole; anything else is
deleted and recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

FORMAT = "vtm-stopping-map/1"
_META_HASH = b"vtm_inputs_hash"
_META_CHUNK = b"vtm_chunk"


class StoreError(ValueError):
    """A run directory that cannot be used (one line)."""


def inputs_hash(inputs: dict) -> str:
    """sha256 of the canonical JSON of ``inputs`` (sorted keys, exact float repr)."""
    text = json.dumps({"format": FORMAT, **inputs}, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _atomic_write(path: str, write: Any) -> None:
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".part", dir=folder)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; the run's files are read like any other output
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
    """Arrow table of ``columns`` with the run's hash (and chunk number) in the schema metadata."""
    table = pa.table({k: pa.array(np.asarray(v)) for k, v in columns.items()})
    meta = {_META_HASH: digest.encode()}
    if chunk is not None:
        meta[_META_CHUNK] = str(chunk).encode()
    return table.replace_schema_metadata(meta)


class ChunkStore:
    """The files of one run in ``root`` for the inputs hashed to ``digest`` with ``n_chunks`` chunks."""

    def __init__(self, root: str, digest: str, n_chunks: int, rows_of: Any) -> None:
        self.root, self.digest, self.n_chunks, self.rows_of = root, digest, n_chunks, rows_of
        self.chunk_dir = os.path.join(root, "chunks")

    # ---------------------------------------------------------------------------- paths
    def chunk_path(self, chunk: int) -> str:
        return os.path.join(self.chunk_dir, f"chunk-{chunk:06d}.parquet")

    @property
    def manifest_path(self) -> str:
        return os.path.join(self.root, "manifest.json")

    @property
    def result_path(self) -> str:
        return os.path.join(self.root, "stopping_map.parquet")

    @property
    def failures_path(self) -> str:
        return os.path.join(self.root, "failures.json")

    # ---------------------------------------------------------------------------- manifest
    def open(self, inputs: dict, overwrite: bool = False) -> None:
        """Create the directory and manifest, or check that an existing run has the same inputs."""
        os.makedirs(self.chunk_dir, exist_ok=True)
        if os.path.exists(self.manifest_path):
            try:
                with open(self.manifest_path, encoding="utf-8") as fh:
                    old = json.load(fh)
            except (OSError, ValueError):
                old = {}
            if old.get("inputs_hash") == self.digest:
                return
            if not overwrite:
                raise StoreError(f"out: {self.root} holds a run with other inputs (use another directory or "
                                 "--overwrite)")
            for name in os.listdir(self.chunk_dir):
                os.unlink(os.path.join(self.chunk_dir, name))
            for path in (self.result_path, self.failures_path):
                if os.path.exists(path):
                    os.unlink(path)
        manifest = {"format": FORMAT, "inputs_hash": self.digest, "n_chunks": self.n_chunks, "inputs": inputs}

        def write(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(manifest, fh, indent=1, sort_keys=True)
        _atomic_write(self.manifest_path, write)

    # ---------------------------------------------------------------------------- chunks
    def write_chunk(self, chunk: int, columns: dict[str, np.ndarray]) -> str:
        table = table_of(columns, self.digest, chunk)
        path = self.chunk_path(chunk)
        _atomic_write(path, lambda tmp: pq.write_table(table, tmp))
        return path

    def chunk_is_done(self, chunk: int) -> bool:
        """True if the chunk's file belongs to this run and reads back whole (else it is removed)."""
        path = self.chunk_path(chunk)
        if not os.path.exists(path):
            return False
        try:
            meta = pq.read_metadata(path)
            kv = meta.metadata or {}
            ok = (kv.get(_META_HASH) == self.digest.encode() and kv.get(_META_CHUNK) == str(chunk).encode()
                  and meta.num_rows == self.rows_of(chunk))
            if ok:
                pq.read_table(path)  # every column page decodes
        except Exception:  # noqa: BLE001 - a truncated or foreign file is not a result
            ok = False
        if not ok:
            os.unlink(path)
        return ok

    def done_chunks(self) -> set[int]:
        for name in os.listdir(self.chunk_dir):  # leftovers of an interrupted write are never results
            if name.endswith(".part"):
                os.unlink(os.path.join(self.chunk_dir, name))
        return {k for k in range(self.n_chunks) if self.chunk_is_done(k)}

    def write_failures(self, failures: Iterable[dict]) -> None:
        items = list(failures)
        if not items:
            if os.path.exists(self.failures_path):
                os.unlink(self.failures_path)
            return

        def write(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"inputs_hash": self.digest, "failures": items}, fh, indent=1)
        _atomic_write(self.failures_path, write)

    def combine(self) -> str:
        """Write all chunks, in chunk (= state) order, to the final Parquet file (atomically)."""
        tables = [pq.read_table(self.chunk_path(k)) for k in range(self.n_chunks)]
        table = pa.concat_tables(tables).replace_schema_metadata({_META_HASH: self.digest.encode()})
        _atomic_write(self.result_path, lambda tmp: pq.write_table(table, tmp))
        return self.result_path


def read_result(path: str) -> dict[str, np.ndarray]:
    """Columns of a finished map (numpy arrays)."""
    table = pq.read_table(path)
    return {name: table.column(name).to_numpy() for name in table.column_names}
