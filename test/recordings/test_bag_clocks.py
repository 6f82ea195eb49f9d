"""Bags made by others, timed on clocks the recorder did not choose: a joint-state series whose header stamps run
on another clock than the receive times that time an unstamped trigger, stamped and unstamped messages mixed in
one series, stamps that jump back (a second publisher, a clock reset), and a trigger that already means stopping
when the recording begins. Each gives the stops that really happened, or one line naming what is wrong - never a
stop placed at the wrong instant.

The stops are those of the simple known-truth set (two stops, triggers at known instants); each bag is written here
message by message with its own receive times and header stamps, independently of the simulated-bag writer."""

from __future__ import annotations


import numpy as np
import pytest

from test.recordings.recordings_testdata import samples, ur5
from vtm_dynamics.recordings.bag_files import RecordingError, read_recording, write_bag
from vtm_dynamics.recordings.stops import find_stops

LATENCY = 5e-4  # [s] receive time after the stamp, as on one machine


@pytest.fixture(scope="module")
def truth():
    return samples(2, seed=5)


def write(path, joints, triggers, storage="mcap"):
    """A bag of ``joints`` (receive time [s], header stamp [s] or 0, q, v) on /joint_states and ``triggers``
    (receive time [s], bool) as std_msgs/Bool on /estop, messages in receive order."""
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_KILTED)
    JointState, Bool = ts.types["sensor_msgs/msg/JointState"], ts.types["std_msgs/msg/Bool"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    names = list(ur5().joint_names)
    events = []
    for received, stamp, q, v in joints:
        ns = int(round(stamp * 1e9))
        msg = JointState(header=Header(stamp=Time(sec=ns // 10**9, nanosec=ns % 10**9), frame_id=""), name=names,
                         position=np.asarray(q, float), velocity=np.asarray(v, float), effort=np.zeros(0))
        events.append((received, "/joint_states", msg))
    events += [(received, "/estop", Bool(data=bool(value))) for received, value in triggers]
    events.sort(key=lambda e: e[0])
    return write_bag(str(path), storage, {"/joint_states": "sensor_msgs/msg/JointState", "/estop": "std_msgs/msg/Bool"},
                     ((topic, int(round(t * 1e9)), msg) for t, topic, msg in events), typestore=ts)


def joints(truth, stamp_shift=0.0):
    """The truth's joint states received LATENCY after sampling, stamped ``stamp_shift`` [s] off the receiver's
    clock."""
    return [(t + LATENCY, t + stamp_shift, q, v) for t, _, q, v in truth["joint"]]


def stops(path):
    return find_stops(read_recording(path), ur5())


def test_a_bag_on_one_clock_gives_its_stops_at_the_trigger_instants(tmp_path, truth):
    found = stops(write(tmp_path / "b", joints(truth), truth["trigger"]))
    assert [s.trigger_time for s in found] == pytest.approx(truth["trigger_times"], abs=1e-6)


@pytest.mark.parametrize("shift", [-0.03, 0.3, 1.7e9])
def test_joint_stamps_on_another_clock_than_the_receive_times_are_refused(tmp_path, truth, shift):
    """The trigger (Bool, no header) is timed by receipt; stamps 30 ms behind placed each stop's trigger 30 ms
    late in the arm's motion (the state at the trigger 2.2 instead of 3.9 rad/s), stamps ahead or on another
    epoch placed it before the recording."""
    path = write(tmp_path / "b", joints(truth, stamp_shift=shift), truth["trigger"])
    with pytest.raises(RecordingError) as err:
        stops(path)
    text = str(err.value)
    assert "\n" not in text and "another clock" in text and "after their header stamps" in text


def test_stamped_and_unstamped_joint_states_in_one_series_are_refused(tmp_path, truth):
    mixed = [(r, 0.0 if k % 2 else s, q, v) for k, (r, s, q, v) in enumerate(joints(truth))]
    with pytest.raises(RecordingError, match="two clocks"):
        stops(write(tmp_path / "b", mixed, truth["trigger"]))


def test_joint_stamps_that_jump_back_are_refused_not_sorted_into_one_series(tmp_path, truth):
    """After the first stop the stamps restart 0.7 s earlier (a second source, or a simulator reset): sorted by
    stamp, the two stretches were interleaved into one motion."""
    first = truth["trigger_times"][0]
    jumped = [(r, s - (0.7 if s > first + 0.1 else 0.0), q, v) for r, s, q, v in joints(truth)]
    with pytest.raises(RecordingError, match="s before the one received before it: two publishers"):
        read_recording(write(tmp_path / "b", jumped, truth["trigger"]))


def test_a_recording_begun_during_a_stop_does_not_count_that_stop(tmp_path, truth):
    """The recording starts 30 ms after the first trigger: its first trigger message already means stopping, but
    was only heard then. Counted as a stop it began 0.1 s late at 0.14 rad/s instead of 3.9 rad/s."""
    first, second = truth["trigger_times"]
    begin = first + 0.03
    found = stops(write(tmp_path / "b", [j for j in joints(truth) if j[0] >= begin],
                        [x for x in truth["trigger"] if x[0] >= begin]))
    assert [s.trigger_time for s in found] == pytest.approx([second], abs=1e-6)


def test_a_recording_that_only_holds_the_end_of_a_stop_is_one_line(tmp_path, truth):
    first, second = truth["trigger_times"]
    begin = first + 0.03
    with pytest.raises(RecordingError) as err:
        stops(write(tmp_path / "b", [j for j in joints(truth) if begin <= j[0] < second - 0.2],
                    [x for x in truth["trigger"] if begin <= x[0] < second - 0.2]))
    assert "\n" not in str(err.value) and "the stop began before the recording" in str(err.value)
