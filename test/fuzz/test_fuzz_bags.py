"""Property-based fuzzing of the bag reader (recordings/bag_storage.py through read_recording): small valid bags
of both storages, altered the way a careless or hostile sender would - metadata.yaml fields rewritten (file names
with separators, URI characters and ``..``, storages, compression modes, lying counts, YAML garbage), storage files
truncated, overwritten in places, lengthened, or replaced by a link to a secret bag beside it, a folder, a FIFO or
an empty file.

Properties, for every altered bag:
  * the reader returns a recording of the bag's own joints, or raises RecordingError with one line;
  * nothing of the secret bag beside it (its joint names) appears in a result or an error;
  * it finishes within its time limit (``max_seconds``) and never waits on a FIFO.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from test.fuzz.scale import examples
from test.recordings.test_bag_storage import small_bag
from vtm_dynamics.recordings.bag_files import RecordingError, read_recording
from vtm_dynamics.recordings.bag_storage import BagLimits

LIMITS = BagLimits(max_seconds=20.0, max_message_bytes=1024 * 1024, max_chunk_bytes=4 * 1024 * 1024,
                   min_decompressed_bytes=4 * 1024 * 1024)


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    root = tmp_path_factory.mktemp("bags")
    bags = {s: small_bag(root / s, s, n=30) for s in ("sqlite3", "mcap")}
    secret = small_bag(root / "secret", "sqlite3", n=5, names=["SECRET_a", "SECRET_b"])
    return bags, secret


NAMES = st.one_of(
    st.sampled_from(["../secret/bag.db3", "..%2Fsecret%2Fbag.db3", "/etc/hostname", "a#b", "x?mode=rw", "..", ".",
                     "", "bag.db3", "bag.mcap", "bag.db3.zstd", "sub/bag.db3", "\x00", "%00"]),
    st.text(max_size=20),
)
METADATA_EDITS = st.one_of(
    st.tuples(st.just("relative_file_paths"), st.lists(NAMES, max_size=3)),
    st.tuples(st.just("storage_identifier"), st.sampled_from(["sqlite3", "mcap", "rosbag_v2", "", "../x"])),
    st.tuples(st.just("compression_mode"), st.sampled_from(["", "none", "FILE", "MESSAGE", "storage", "x"])),
    st.tuples(st.just("compression_format"), st.sampled_from(["", "zstd", "lz4", "gzip"])),
    st.tuples(st.just("message_count"), st.integers(min_value=-1, max_value=2 ** 63)),
    st.tuples(st.just("topics_with_message_count"), st.just("garbage")),
    st.tuples(st.just("version"), st.integers(min_value=-5, max_value=100)),
)
FILE_EDITS = st.one_of(
    st.tuples(st.just("truncate"), st.floats(min_value=0.0, max_value=1.0)),
    st.tuples(st.just("overwrite"), st.floats(min_value=0.0, max_value=1.0), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("append"), st.binary(max_size=256)),
    st.tuples(st.just("replace"), st.sampled_from(["link to secret", "folder", "fifo", "empty", "link to itself"])),
)
EDITS = st.lists(st.one_of(st.tuples(st.just("metadata"), METADATA_EDITS), st.tuples(st.just("file"), FILE_EDITS),
                           st.tuples(st.just("yaml"), st.binary(max_size=200))), min_size=1, max_size=3)


def _storage(bag: str) -> str:
    with open(os.path.join(bag, "metadata.yaml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)["rosbag2_bagfile_information"]["relative_file_paths"][0]


def _apply(bag: str, secret: str, edit) -> None:
    kind, what = edit
    meta = os.path.join(bag, "metadata.yaml")
    if kind == "yaml":
        with open(meta, "wb") as fh:
            fh.write(what)
        return
    if kind == "metadata":
        try:
            with open(meta, encoding="utf-8") as fh:
                doc = yaml.safe_load(fh)
            doc["rosbag2_bagfile_information"][what[0]] = what[1]
        except Exception:  # noqa: BLE001 - an earlier edit broke the file: leave it broken
            return
        with open(meta, "w", encoding="utf-8") as fh:
            yaml.safe_dump(doc, fh)
        return
    files = [f for f in os.listdir(bag) if f != "metadata.yaml"]
    if not files:
        return
    path = os.path.join(bag, files[0])
    if os.path.islink(path) or not os.path.isfile(path):
        return
    size = os.path.getsize(path)
    op = what[0]
    if op == "truncate":
        os.truncate(path, int(size * what[1]))
    elif op == "overwrite":
        with open(path, "r+b") as fh:
            fh.seek(int(size * what[1]))
            fh.write(what[2])
    elif op == "append":
        with open(path, "ab") as fh:
            fh.write(what[1])
    else:
        os.unlink(path)
        if what[1] == "link to secret":
            os.symlink(os.path.join(secret, _storage(secret)), path)
        elif what[1] == "link to itself":
            os.symlink(path, path)
        elif what[1] == "folder":
            os.mkdir(path)
        elif what[1] == "fifo":
            os.mkfifo(path)
        else:
            open(path, "wb").close()


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_an_altered_bag_is_read_or_refused_in_one_line_and_never_reaches_outside(originals, storage):
    bags, secret = originals

    @settings(max_examples=examples(60))
    @given(EDITS)
    def check(edits):
        with tempfile.TemporaryDirectory() as root:
            bag = os.path.join(root, "bag")
            shutil.copytree(bags[storage], bag)
            shutil.copytree(secret, os.path.join(root, "secret"))
            for edit in edits:
                _apply(bag, os.path.join(root, "secret"), edit)
            try:
                rec = read_recording(bag, limits=LIMITS)
            except RecordingError as err:
                text = str(err)
                assert text and "\n" not in text and "SECRET" not in text, text
                return
            assert rec.joints.names == ("a", "b")

    check()
