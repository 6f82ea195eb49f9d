"""The frames between the node and its prediction process (nodes/prediction_channel.py): what is written is read
back whole, a frame over the cap is refused without reading it, and neither side waits past its deadline."""

from __future__ import annotations

import os
import struct
import time

import numpy as np
import pytest

from vtm_dynamics.nodes.prediction_channel import MAX_FRAME, ChannelError, read_frame, write_frame


@pytest.fixture
def pipe():
    r, w = os.pipe()
    with os.fdopen(w, "wb") as writer:
        yield r, writer
    os.close(r)


def test_a_frame_is_read_back_as_it_was_written(pipe):
    r, writer = pipe
    sent = ("answer", {"q": np.arange(6.0)}, "text")
    write_frame(writer, sent, time.monotonic() + 5.0)
    got = read_frame(r, time.monotonic() + 5.0)
    assert got[0] == "answer" and got[2] == "text"
    np.testing.assert_array_equal(got[1]["q"], sent[1]["q"])


def test_a_header_announcing_more_than_the_cap_is_refused_before_its_body_is_read(pipe):
    r, writer = pipe
    writer.write(struct.pack("<Q", MAX_FRAME + 1))
    writer.flush()
    with pytest.raises(ChannelError, match="over"):
        read_frame(r, time.monotonic() + 5.0)


def test_a_reader_whose_writer_is_silent_gives_up_at_its_deadline(pipe):
    r, _ = pipe
    start = time.monotonic()
    with pytest.raises(ChannelError, match="in time"):
        read_frame(r, start + 0.2)
    assert time.monotonic() - start >= 0.2


def test_a_moving_deadline_is_read_each_time_it_is_checked(pipe):
    r, _ = pipe
    bound = [time.monotonic() + 0.1]
    start = time.monotonic()
    calls = []

    def deadline() -> float:
        calls.append(1)
        if len(calls) == 2:
            bound[0] += 0.2  # the child was stopped meanwhile: the call may wait that much longer
        return bound[0]

    with pytest.raises(ChannelError):
        read_frame(r, deadline)
    assert time.monotonic() - start >= 0.3 and len(calls) > 2


def test_the_end_of_the_writer_is_an_ended_channel(pipe):
    r, writer = pipe
    writer.close()
    with pytest.raises(ChannelError, match="ended"):
        read_frame(r, time.monotonic() + 5.0)
