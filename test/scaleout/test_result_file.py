"""A finished map read back a block at a time: every row once, in state order, in blocks no longer than asked;
its summary the one of all rows at once; the rows of given states found wherever they are."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vtm_dynamics.core.stopping.workspace_map import summarize
from vtm_dynamics.scaleout.result_file import read_columns, read_rows, result_passes, result_rows, summarize_result


@pytest.fixture
def map_file(tmp_path):
    """A map file of 1000 rows in row groups of 300, some states not stopped (its columns as a map has them)."""
    rng = np.random.default_rng(5)
    n = 1000
    stopped = rng.random(n) > 0.01
    columns = {"state": np.arange(n, dtype=np.int64), "tcp_x_m": rng.uniform(-0.8, 0.8, n),
               "tcp_straight_distance_m": rng.uniform(0.0, 0.4, n),
               "stop_time_s": np.where(stopped, rng.uniform(0.05, 0.5, n), np.inf), "stopped": stopped,
               "within_limits": np.ones(n, bool)}
    path = str(tmp_path / "stopping_map.parquet")
    pq.write_table(pa.table(columns), path, row_group_size=300)
    return path, columns


def test_the_blocks_hold_every_row_once_in_order_and_no_more_rows_than_asked(map_file):
    path, columns = map_file
    blocks = list(result_passes(path, ("state", "stopped"), rows=128)())
    assert all(0 < len(b["state"]) <= 128 for b in blocks) and all(list(b) == ["state", "stopped"] for b in blocks)
    np.testing.assert_array_equal(np.concatenate([b["state"] for b in blocks]), columns["state"])
    np.testing.assert_array_equal(np.concatenate([b["stopped"] for b in blocks]), columns["stopped"])
    assert [len(b["state"]) for b in list(result_passes(path)())] == [300, 300, 300, 100]  # default: a row group


def test_the_summary_read_a_block_at_a_time_is_the_summary_of_all_rows(map_file):
    path, columns = map_file
    assert summarize_result(path) == summarize(columns)


def test_the_rows_of_given_states_are_found_in_any_row_group(map_file):
    path, columns = map_file
    rows = read_rows(path, [999, 5, 301, 5])
    np.testing.assert_array_equal(rows["state"], [5, 301, 999])
    np.testing.assert_array_equal(rows["tcp_x_m"], columns["tcp_x_m"][[5, 301, 999]])


def test_the_row_count_and_the_columns_asked_for_are_read_without_the_others(map_file):
    path, columns = map_file
    assert result_rows(path) == 1000
    got = read_columns(path, ("stopped", "state", "q_elbow_joint"))  # a column the map lacks is left out
    assert sorted(got) == ["state", "stopped"]
    np.testing.assert_array_equal(got["state"], columns["state"])
    np.testing.assert_array_equal(got["stopped"], columns["stopped"])


@pytest.mark.parametrize("column", [
    pa.ListArray.from_arrays(pa.array([0, 200_000], pa.int32()), pa.array(np.zeros(200_000))),  # one row, many values
    pa.array(["0.1"]),
])
def test_a_column_that_is_not_one_number_per_row_is_refused_from_the_schema(tmp_path, column):
    from vtm_dynamics.scaleout.result_file import MapFileError

    path = str(tmp_path / "stopping_map.parquet")
    pq.write_table(pa.table({"state": pa.array([0], pa.int64()), "q_elbow": column}), path, compression="zstd")
    assert result_rows(path) == 1  # the row count alone does not bound what the row holds
    with pytest.raises(MapFileError, match="column 'q_elbow' holds .*not one number per row"):
        read_columns(path, ["state", "q_elbow"])
