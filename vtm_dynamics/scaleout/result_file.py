"""A finished map's Parquet file read a block of rows at a time.

So a map of any size is summarized, written as CSV and drawn with memory that does not grow with its rows (the file
itself: :mod:`.chunk_store`).

Memory: one row group of the columns asked for (:data:`vtm_dynamics.scaleout.chunk_store.ROW_GROUP_ROWS` rows in
a file this version wrote) and two blocks of at most :data:`BLOCK_ROWS` rows (the one handed on and the one before).
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vtm_dynamics.core.stopping.map_summary import MapSummary, Passes, summarize_passes

BLOCK_ROWS = 4_096  # rows per block handed to a reader of the file
SUMMARY_COLUMNS = ("state", "tcp_straight_distance_m", "stop_time_s", "stopped", "within_limits")


def result_passes(path: str, columns: Sequence[str] | None = None, rows: int = BLOCK_ROWS) -> Passes:
    """Passes over the map in ``path`` (:data:`vtm_dynamics.core.stopping.map_summary.Passes`): each call reads
    the file again and yields its rows in state order as blocks of at most ``rows`` rows, each a dict of numpy
    arrays of ``columns`` (default: every column, in the file's order)."""

    def blocks() -> Iterator[dict[str, np.ndarray]]:
        # a row group at a time, each block a copy, the row group let go before its last block is handed on (a
        # reader still holding the block before keeps no row group alive); pyarrow's iter_batches held more the
        # more row groups the file had: its arrow memory peaked at 5.7 MB for 20 000 UR5 rows, 9.6 MB for 80 000
        # and 20.5 MB for 640 000
        with pq.ParquetFile(path) as reader:
            for group in range(reader.num_row_groups):
                table = reader.read_row_group(group, columns=None if columns is None else list(columns),
                                              use_threads=False)
                n = table.num_rows
                for start in range(0, n, rows):
                    block = {name: np.array(table.column(name).slice(start, rows).to_numpy(), copy=True)
                             for name in table.column_names}
                    if start + rows >= n:
                        table = None
                    yield block

    return blocks


def result_rows(path: str) -> int:
    """The number of rows of the map in ``path``, from the file's metadata: no column is read."""
    with pq.ParquetFile(path) as reader:
        return int(reader.metadata.num_rows)


class MapFileError(ValueError):
    """A map file whose columns are not what a map holds (one line naming the column)."""


def read_columns(path: str, columns: Sequence[str]) -> dict[str, np.ndarray]:
    """The whole of the given columns of the map in ``path`` (those it has; a column it lacks is left out for the
    caller to name), no other column read. Each must hold one number per row (integer, floating or boolean type),
    checked from the schema before any value is read: a list or text column lets a small file expand without
    bound (5.6 kB of zstd held a list of 2 x 10^7 doubles in one row: 0.8 GB resident before the old reader
    refused it), so the row count the caller checked no longer bounds the memory. Raises :class:`MapFileError`."""
    with pq.ParquetFile(path) as reader:
        schema = reader.schema_arrow
        wanted = [c for c in columns if c in set(schema.names)]
        for name in wanted:
            kind = schema.field(name).type
            if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
                raise MapFileError(f"map: column {name[:80]!r} holds {str(kind)[:40]}, not one number per row")
        table = reader.read(columns=wanted, use_threads=False)
    return {name: table.column(name).to_numpy() for name in table.column_names}


def summarize_result(path: str) -> MapSummary:
    """The summary of the map in ``path`` (:func:`vtm_dynamics.core.stopping.map_summary.summarize_passes`),
    reading only the five columns it needs."""
    return summarize_passes(result_passes(path, SUMMARY_COLUMNS))


def read_rows(path: str, states: Iterable[int]) -> dict[str, np.ndarray]:
    """The rows of the given state numbers (every column, in file order), read a block at a time."""
    wanted = np.unique(np.asarray(list(states), dtype=np.int64))
    parts: list[dict[str, np.ndarray]] = []
    for block in result_passes(path)():
        keep = np.isin(block["state"], wanted)
        if keep.any():
            parts.append({name: values[keep] for name, values in block.items()})
    if not parts:
        return {}
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
