"""A file an input names is read only as a regular file within its cap, checked on the open file before reading
(:mod:`vtm_dynamics.core.bounded_file`)."""

from __future__ import annotations

import os

import pytest

from vtm_dynamics.core.bounded_file import GREW, NOT_REGULAR, TOO_LARGE, BoundedFileError, read_bounded_file


def test_a_regular_file_within_the_cap_is_read_whole(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 100)
    assert read_bounded_file(str(tmp_path / "f"), 100) == b"x" * 100


def test_a_file_over_the_cap_is_refused_with_its_size_before_it_is_read(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 101)
    with pytest.raises(BoundedFileError) as err:
        read_bounded_file(str(tmp_path / "f"), 100)
    assert (err.value.why, err.value.size) == (TOO_LARGE, 101)


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_what_is_no_regular_file_is_refused_without_waiting_or_reading(tmp_path, kind):
    path = tmp_path / "f"
    if kind == "fifo":
        os.mkfifo(path)  # opened for reading without O_NONBLOCK: waits for a writer for ever
    elif kind == "device":
        os.symlink("/dev/zero", path)  # read whole: until memory runs out
    else:
        path.mkdir()
    with pytest.raises(BoundedFileError) as err:
        read_bounded_file(str(path), 1 << 20)
    assert err.value.why == NOT_REGULAR


def test_a_missing_file_is_the_callers_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_bounded_file(str(tmp_path / "none"), 10)


def test_the_reasons_are_distinct_words():
    assert len({NOT_REGULAR, TOO_LARGE, GREW}) == 3
