"""A bag is read as data, inside its own folder (recordings/bag_storage.py): each shape below once made the reader
open another bag, fill memory or the temporary folder, hang, or trust a count it should have made itself.

Bags are written here by the library writer (rosbags) and then altered the way a careless or hostile sender
would; the MCAP chunks are assembled byte by byte from the format's specification.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import struct
import threading
import time
import tracemalloc

import numpy as np
import pytest
import yaml

from vtm_dynamics.recordings.bag_files import RecordingError, bag_summary, count_messages, read_recording, write_bag
from vtm_dynamics.recordings.bag_storage import BagLimits

JOINTS = ["a", "b"]


def _store():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def small_bag(path, storage: str = "sqlite3", n: int = 50, names=JOINTS, t0: float = 100.0) -> str:
    """``n`` joint states at 100 Hz and an E-stop edge in the middle."""
    ts = _store()
    JointState, Bool = ts.types["sensor_msgs/msg/JointState"], ts.types["std_msgs/msg/Bool"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    events = []
    for k in range(n):
        t = t0 + 0.01 * k
        sec = int(t)
        msg = JointState(header=Header(stamp=Time(sec=sec, nanosec=int(round((t - sec) * 1e9))), frame_id=""),
                         name=list(names), position=np.full(len(names), 0.1 * k), velocity=np.zeros(len(names)),
                         effort=np.zeros(0))
        events.append((t, "/joint_states", msg))
    events += [(t0 + 0.005, "/estop", Bool(data=False)), (t0 + 0.01 * n / 2, "/estop", Bool(data=True))]
    events.sort(key=lambda e: e[0])
    return write_bag(str(path), storage, {"/joint_states": "sensor_msgs/msg/JointState", "/estop": "std_msgs/msg/Bool"},
                     ((topic, int(round(t * 1e9)), m) for t, topic, m in events), typestore=ts)


def _metadata(path) -> dict:
    with open(os.path.join(path, "metadata.yaml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _write_metadata(path, doc) -> None:
    with open(os.path.join(path, "metadata.yaml"), "w", encoding="utf-8") as fh:
        yaml.safe_dump(doc, fh)


def _storage_name(path) -> str:
    return _metadata(path)["rosbag2_bagfile_information"]["relative_file_paths"][0]


def _name_storage(path, name: str) -> None:
    doc = _metadata(path)
    doc["rosbag2_bagfile_information"]["relative_file_paths"] = [name]
    _write_metadata(path, doc)


@pytest.fixture()
def two_bags(tmp_path):
    """``bag`` (joints a, b) and, beside it, ``other`` (a secret's joints)."""
    bag = small_bag(tmp_path / "bag")
    other = small_bag(tmp_path / "other", names=["SECRET_x", "SECRET_y"])
    return bag, other


def test_a_uri_name_in_the_metadata_never_opens_another_bag(two_bags):
    bag, other = two_bags
    shutil.copy(os.path.join(other, _storage_name(other)), os.path.join(other, "other.db3"))
    placeholder = "..%2Fother%2Fother.db3"
    open(os.path.join(bag, placeholder), "wb").close()
    _name_storage(bag, placeholder)
    with pytest.raises(RecordingError) as err:
        read_recording(bag)
    assert "relative_file_paths" in str(err.value) and "SECRET" not in str(err.value)


@pytest.mark.parametrize("name", ["../other/bag.db3", "/etc/hostname", "a#b.db3", "x?mode=rw", ".."])
def test_a_storage_name_that_is_not_a_plain_name_inside_the_bag_is_refused(two_bags, name):
    bag, _ = two_bags
    _name_storage(bag, name)
    with pytest.raises(RecordingError, match="relative_file_paths"):
        read_recording(bag)


def test_a_storage_file_that_is_a_symbolic_link_to_another_bag_is_refused(two_bags):
    bag, other = two_bags
    name = _storage_name(bag)
    os.unlink(os.path.join(bag, name))
    os.symlink(os.path.join(other, _storage_name(other)), os.path.join(bag, name))
    with pytest.raises(RecordingError) as err:
        read_recording(bag)
    assert "symbolic link" in str(err.value) and "SECRET" not in str(err.value)


def test_a_storage_file_that_is_a_fifo_is_refused_without_hanging(two_bags):
    bag, _ = two_bags
    name = _storage_name(bag)
    os.unlink(os.path.join(bag, name))
    os.mkfifo(os.path.join(bag, name))
    outcome: list = []
    reader = threading.Thread(target=lambda: outcome.append(_error_of(lambda: read_recording(bag))), daemon=True)
    reader.start()
    reader.join(20.0)
    assert not reader.is_alive(), "reading a bag whose storage is a FIFO hangs"
    assert "not a regular file" in outcome[0]


def _error_of(call) -> str:
    try:
        call()
    except RecordingError as err:
        return str(err)
    return ""


def test_a_recursive_view_as_message_definitions_is_refused_at_once(two_bags):
    bag, _ = two_bags
    db = os.path.join(bag, _storage_name(bag))
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE message_definitions")
        conn.execute("CREATE VIEW message_definitions(id, topic_type, encoding, encoded_message_definition, "
                     "type_description_hash) AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                     "SELECT n, 'std_msgs/msg/Bool', 'ros2msg', 'bool data', '' FROM r")
    start = time.monotonic()
    with pytest.raises(RecordingError, match="'message_definitions' is no table"):
        read_recording(bag)
    assert time.monotonic() - start < 10.0  # generous: the refusal reads the schema, nothing else


def test_every_sqlite_statement_runs_under_the_time_limit(two_bags):
    bag, _ = two_bags
    with pytest.raises(RecordingError, match="longer than the time limit"):
        read_recording(bag, limits=BagLimits(max_seconds=0.0))


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_index_counts_that_lie_do_not_get_past_max_messages(tmp_path, storage):
    bag = small_bag(tmp_path / "bag", storage, n=200)
    doc = _metadata(bag)
    info = doc["rosbag2_bagfile_information"]
    for t in info["topics_with_message_count"]:
        t["message_count"] = 1
    info["message_count"] = 2
    _write_metadata(bag, doc)
    with pytest.raises(RecordingError, match="more than max_messages 100"):
        read_recording(bag, max_messages=100)
    assert count_messages(bag) == {"/joint_states": 200, "/estop": 2}  # counted as read
    assert {s.topic: s.count for s in bag_summary(bag)} == {"/joint_states": 200, "/estop": 2}


def _bomb(size: int) -> bytes:
    """One zstd frame of ``size`` zero bytes (written in pieces: the test never holds ``size`` bytes)."""
    from vtm_dynamics.recordings.compression import zstd_module

    zstd = zstd_module()
    c = zstd.ZstdCompressor()
    piece = bytes(1024 * 1024)
    out = [c.compress(piece) for _ in range(size // len(piece))]
    return b"".join(out) + c.flush()


def test_a_message_compressed_to_a_bomb_is_refused_before_it_is_inflated(tmp_path):
    bag = small_bag(tmp_path / "bag", "sqlite3", n=20)
    db = os.path.join(bag, _storage_name(bag))
    from vtm_dynamics.recordings.compression import zstd_module

    bomb = _bomb(1024 * 1024 * 1024)  # 1 GiB of zeros in about 32 kB
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, data FROM messages").fetchall()
        for i, data in rows:
            conn.execute("UPDATE messages SET data = ? WHERE id = ?", (zstd_module().compress(bytes(data)), i))
        conn.execute("UPDATE messages SET data = ? WHERE id = ?", (bomb, rows[3][0]))
    doc = _metadata(bag)
    doc["rosbag2_bagfile_information"].update(compression_mode="MESSAGE", compression_format="zstd")
    _write_metadata(bag, doc)
    tracemalloc.start()
    try:
        with pytest.raises(RecordingError, match="decompresses to more than max_message_bytes"):
            read_recording(bag)  # max_message_bytes 64 MiB by default
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024 * 1024, peak  # the 1 GiB was never allocated (the 64 MiB limit and buffers were)
    # the honest messages of the same bag read back (the bomb aside)
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM messages WHERE id = ?", (rows[3][0],))
    assert read_recording(bag).joints.t.size == 19


def test_a_storage_file_compressed_to_a_bomb_is_refused_within_its_limit(tmp_path):
    bag = small_bag(tmp_path / "bag", "sqlite3", n=20)
    name = _storage_name(bag)
    with open(os.path.join(bag, name + ".zstd"), "wb") as fh:
        fh.write(_bomb(80 * 1024 * 1024))  # a few kB of zstd
    os.unlink(os.path.join(bag, name))
    doc = _metadata(bag)
    doc["rosbag2_bagfile_information"].update(compression_mode="FILE", compression_format="zstd",
                                              relative_file_paths=[name + ".zstd"])
    _write_metadata(bag, doc)
    with pytest.raises(RecordingError, match="decompresses to more than 67108864 bytes"):
        read_recording(bag)  # defaults: 1000 x the compressed size, at least 64 MiB
    with pytest.raises(RecordingError, match="decompresses to more than 4194304 bytes"):
        read_recording(bag, limits=BagLimits(min_decompressed_bytes=4 * 1024 * 1024, max_decompression_ratio=10))


def test_an_honest_file_compressed_bag_reads_back(tmp_path):
    bag = small_bag(tmp_path / "bag", "sqlite3", n=30)
    name = _storage_name(bag)
    from vtm_dynamics.recordings.compression import zstd_module

    with open(os.path.join(bag, name), "rb") as src, open(os.path.join(bag, name + ".zstd"), "wb") as dst:
        dst.write(zstd_module().compress(src.read()))
    os.unlink(os.path.join(bag, name))
    doc = _metadata(bag)
    doc["rosbag2_bagfile_information"].update(compression_mode="FILE", compression_format="zstd",
                                              relative_file_paths=[name + ".zstd"])
    _write_metadata(bag, doc)
    assert read_recording(bag).joints.t.size == 30


# ------------------------------------------------------------------------------------------ MCAP, byte by byte
def _record(op: int, content: bytes) -> bytes:
    return struct.pack("<BQ", op, len(content)) + content


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def _chunk(records: bytes, compression: str, stated: int | None = None) -> bytes:
    from vtm_dynamics.recordings.compression import zstd_module

    data = zstd_module().compress(records) if compression == "zstd" else records
    size = len(records) if stated is None else stated
    content = struct.pack("<QQQI", 0, 0, size, 0) + _string(compression) + struct.pack("<Q", len(data)) + data
    return _record(0x06, content)


def _top_level(data: bytes) -> list[tuple[int, bytes]]:
    """(opcode, whole record) of the top-level records of an MCAP file, summary section included."""
    pos, out = 8, []
    while pos + 9 <= len(data) - 8:
        op, length = struct.unpack_from("<BQ", data, pos)
        out.append((op, data[pos:pos + 9 + length]))
        pos += 9 + length
        if op == 0x02:
            break
    return out


def _replace_mcap(bag, chunk: bytes) -> None:
    """Keep the header, and the schemas and channels the writer repeats in the summary; then one chunk of ours."""
    path = os.path.join(bag, _storage_name(bag))
    data = open(path, "rb").read()
    keep = [rec for op, rec in _top_level(data) if op in (0x01, 0x03, 0x04)]
    with open(path, "wb") as fh:
        fh.write(data[:8] + b"".join(keep) + chunk + _record(0x0F, struct.pack("<I", 0)))


def test_an_mcap_chunk_stating_a_huge_size_is_refused_before_decompression(tmp_path):
    bag = small_bag(tmp_path / "bag", "mcap")
    _replace_mcap(bag, _chunk(b"", "zstd", stated=10 * 1024 ** 3))
    with pytest.raises(RecordingError, match="more than max_chunk_bytes"):
        read_recording(bag)


def test_an_mcap_chunk_inflating_beyond_its_stated_size_is_refused(tmp_path):
    bag = small_bag(tmp_path / "bag", "mcap")
    message = _record(0x05, struct.pack("<HIQQ", 1, 0, 0, 0) + bytes(50 * 1024 * 1024))
    tracemalloc.start()
    try:
        chunk = _chunk(message, "zstd", stated=1000)
        _replace_mcap(bag, chunk)
        del message, chunk
        tracemalloc.reset_peak()
        with pytest.raises(RecordingError, match="decompresses to more bytes than the 1000 it states"):
            read_recording(bag)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024, peak


def test_mcap_chunks_inflating_beyond_the_file_limit_together_are_refused_before_decompression(tmp_path):
    """Each chunk within max_chunk_bytes, but 40 of them, 8 MiB of an unread record each, inflate a file of a few
    kilobytes to 320 MiB: more than its limit (max(64 MiB, 1000 x its size)). Only each chunk used to be bounded,
    so such a file kept the reader decompressing until the time limit (an hour by default)."""
    bag = small_bag(tmp_path / "bag", "mcap")
    filler = _record(0x10, bytes(8 * 1024 * 1024 - 9))
    _replace_mcap(bag, _chunk(filler, "zstd") * 40)
    assert os.path.getsize(os.path.join(bag, _storage_name(bag))) < 64 * 1024
    with pytest.raises(RecordingError, match="chunks: decompress to more than 67108864 bytes in all"):
        read_recording(bag)


def test_the_mcap_reader_reads_a_chunked_file_assembled_from_the_specification(tmp_path):
    """Independent of the library writer: messages in an uncompressed and in a zstd chunk are all read."""
    bag = small_bag(tmp_path / "bag", "mcap", n=4)
    ts = _store()
    path = os.path.join(bag, _storage_name(bag))
    data = open(path, "rb").read()
    channels = {}
    for op, rec in _top_level(data):
        if op == 0x04:
            cid = struct.unpack_from("<H", rec, 9)[0]
            n = struct.unpack_from("<I", rec, 13)[0]
            channels[rec[17:17 + n].decode()] = cid
    state = ts.types["sensor_msgs/msg/JointState"]
    header = ts.types["std_msgs/msg/Header"](stamp=ts.types["builtin_interfaces/msg/Time"](sec=5, nanosec=0),
                                              frame_id="")

    def joint(k: int) -> bytes:
        msg = state(header=header, name=JOINTS, position=np.array([k, k], float), velocity=np.zeros(2),
                    effort=np.zeros(0))
        return _record(0x05, struct.pack("<HIQQ", channels["/joint_states"], k, 5_000_000_000 + k, 0) +
                       bytes(ts.serialize_cdr(msg, "sensor_msgs/msg/JointState")))

    bool_msg = ts.types["std_msgs/msg/Bool"](data=True)
    trigger = _record(0x05, struct.pack("<HIQQ", channels["/estop"], 0, 5_000_000_100, 0) +
                      bytes(ts.serialize_cdr(bool_msg, "std_msgs/msg/Bool")))
    _replace_mcap(bag, _chunk(joint(1) + joint(2), "") + _chunk(joint(3) + trigger, "zstd"))
    rec = read_recording(bag)
    assert rec.joints.q[:, 0].tolist() == [1.0, 2.0, 3.0] and rec.trigger.stopping.tolist() == [True]


# ------------------------------------------------------------------------------------------ names with any character
@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_a_hash_sign_or_percent_in_the_folder_names_reads_and_writes_inside_the_folder(tmp_path, storage):
    parent = tmp_path / "site #3 %20 ?x"
    parent.mkdir()
    bag = small_bag(parent / "stops#1", storage, n=10)
    assert sorted(os.listdir(parent)) == ["stops#1"]  # nothing written beside the bag (before: the database)
    assert sorted(os.listdir(tmp_path)) == [parent.name]
    rec = read_recording(bag)
    assert rec.joints.t.size == 10 and rec.storage == storage
