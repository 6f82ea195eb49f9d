"""The combined file of a map: the chunks' rows in state order with their checksum, written a row group at a time
(the client never holds the map whole) - the same table and checksum as the chunk files joined in memory."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vtm_dynamics.cli.stopping_robots import load_robot
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.stopping.workspace_map import MapSpec, evaluate_chunk
from vtm_dynamics.scaleout import chunk_store
from vtm_dynamics.scaleout.chunk_store import ChunkStore, StoreError, content_hash

N, CHUNK = 23, 5  # the last chunk is short


@pytest.fixture(scope="module")
def chunks():
    """A small real UR5 map, chunk by chunk, with states that did not stop among them or not."""
    ur5 = load_robot("ur5")
    spec = MapSpec(n_states=N, chunk_size=CHUNK, tcp_frame="tool0", payload_frame="tool0", payloads=(0.0, 5.0), seed=3,
                   max_speeds=(3.1,) * 6)
    brakes = brakes_from_config(ur5.robot, ur5.brake_config)
    return [evaluate_chunk(ur5.robot, brakes, spec, k) for k in range(spec.n_chunks)]


def _store(root: str, chunks) -> ChunkStore:
    store = ChunkStore(root, "ab" * 32, len(chunks), lambda k: min(CHUNK, N - k * CHUNK))
    store.open({"test": 1})
    for k, columns in enumerate(chunks):
        store.write_chunk(k, columns)
    return store


@pytest.mark.parametrize("group_rows", [4, 7, 16_384])
def test_the_combined_file_is_the_chunk_files_joined(chunks, group_rows, tmp_path, monkeypatch):
    monkeypatch.setattr(chunk_store, "ROW_GROUP_ROWS", group_rows)
    monkeypatch.setattr(chunk_store, "SCRATCH_BLOCK", 64)  # the checksum read back in many pieces
    store = _store(str(tmp_path / "run"), chunks)
    try:
        path = store.combine()
    finally:
        store.close()
    # independent: every chunk file read whole and joined in memory
    files = [pq.read_table(os.path.join(tmp_path, "run", "chunks", f"chunk-{k:06d}.parquet")) for k in range(len(chunks))]
    joined = pa.concat_tables([t.replace_schema_metadata(None) for t in files])
    result = pq.read_table(path)
    assert result.replace_schema_metadata(None).equals(joined)
    assert result.column("state").to_pylist() == list(range(N))
    columns = {name: joined.column(name).to_numpy() for name in joined.column_names}
    assert result.schema.metadata == {b"vtm_inputs_hash": b"ab" * 32, b"vtm_content_sha256": content_hash(columns).encode()}
    groups = pq.ParquetFile(path).metadata
    assert [groups.row_group(i).num_rows for i in range(groups.num_row_groups)] == \
        [min(group_rows, N - s) for s in range(0, N, group_rows)]


def test_combining_leaves_only_the_result_and_its_scratch_file_nowhere(chunks, tmp_path):
    store = _store(str(tmp_path / "run"), chunks)
    try:
        store.combine()
    finally:
        store.close()
    assert sorted(os.listdir(tmp_path / "run")) == ["chunks", "manifest.json", "stopping_map.parquet"]


def test_a_chunk_changed_after_it_was_written_stops_the_combination_and_writes_no_result(chunks, tmp_path):
    edited = [dict(c) for c in chunks]
    store = _store(str(tmp_path / "run"), edited)
    try:
        table = pq.read_table(store.chunk_path(2))
        values = table.column("stop_time_s").to_numpy().copy()
        values[0] += 0.5
        pq.write_table(table.set_column(table.column_names.index("stop_time_s"), "stop_time_s", pa.array(values)),
                       store.chunk_path(2))  # metadata kept, a value changed
        with pytest.raises(StoreError, match="chunk-000002.parquet changed"):
            store.combine()
    finally:
        store.close()
    assert sorted(os.listdir(tmp_path / "run")) == ["chunks", "manifest.json"]


def test_a_manifest_nested_beyond_the_json_parsers_depth_is_a_run_with_other_inputs(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    (root / "manifest.json").write_text("[" * 100_000)  # was RecursionError out of ChunkStore.open
    store = ChunkStore(str(root), "ab" * 32, 1, lambda k: 1)
    with pytest.raises(StoreError, match="holds a run with other inputs"):
        store.open({"test": 1})
    store.open({"test": 1}, overwrite=True)
    assert '"inputs_hash": "' + "ab" * 32 in (root / "manifest.json").read_text()
    store.close()
