"""Bags written with the library are valid rosbag2 files (topics, types and message counts as published, read
back through the library's reader, both storages), and every kind of bad recording is one clear line."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from test.recordings.recordings_testdata import samples, ur5
from vtm_dynamics.recordings.bag_files import (
    RecordingError, bag_summary, count_messages, read_recording, write_bag,
)
from vtm_dynamics.recordings.simulated import write_simulated_bag
from vtm_dynamics.recordings.stops import find_stops, foreign_joints
from vtm_dynamics.recordings.trigger import TriggerConfigError, TriggerMatcher, TriggerRule


@pytest.fixture(scope="module")
def two_stops():
    return samples(2, seed=5)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_written_bag_has_the_published_topics_types_and_counts(tmp_path, two_stops, storage):
    path = write_simulated_bag(str(tmp_path / "b"), two_stops, storage)
    published = {"/joint_states": len(two_stops["joint"]), "/estop": len(two_stops["trigger"])}
    summary = {s.topic: (s.type_name, s.count) for s in bag_summary(path)}
    assert summary == {"/joint_states": ("sensor_msgs/msg/JointState", published["/joint_states"]),
                       "/estop": ("std_msgs/msg/Bool", published["/estop"])}
    assert count_messages(path) == published  # every message is really there, not only in the index
    rec = read_recording(path)
    assert rec.storage == storage and rec.joints.names == ur5().joint_names
    assert rec.joints.t.size == published["/joint_states"] and rec.trigger.t.size == published["/estop"]
    assert len(find_stops(rec, ur5())) == 2
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".")]  # no temporary left behind


def test_a_bag_is_never_overwritten(tmp_path, two_stops):
    path = write_simulated_bag(str(tmp_path / "b"), two_stops, "mcap")
    with pytest.raises(RecordingError, match="exists already"):
        write_simulated_bag(path, two_stops, "mcap")


def _one_line(err: Exception) -> str:
    text = str(err)
    assert "\n" not in text and text
    return text


def test_missing_trigger_and_joint_topics_are_named(tmp_path, two_stops):
    path = write_simulated_bag(str(tmp_path / "b"), two_stops, "mcap", trigger_topic="/other")
    with pytest.raises(RecordingError) as err:
        read_recording(path)
    assert "no trigger topic '/estop'" in _one_line(err.value) and "/other" in str(err.value)
    path = write_simulated_bag(str(tmp_path / "c"), two_stops, "sqlite3", joint_topic="/arm/joint_states")
    with pytest.raises(RecordingError) as err:
        read_recording(path)
    assert "no joint-state topic '/joint_states'" in _one_line(err.value)


def test_joints_that_do_not_match_the_model_are_named(tmp_path, two_stops):
    renamed = dict(two_stops, names=("j1",) + tuple(two_stops["names"][1:]))
    rec = read_recording(write_simulated_bag(str(tmp_path / "b"), renamed, "mcap"))
    with pytest.raises(RecordingError) as err:
        find_stops(rec, ur5())
    assert "joints do not match the model: model joint 'shoulder_pan_joint' is not recorded; joint 'j1' is not in " \
        "the model" in _one_line(err.value)


def test_recorded_joints_the_model_does_not_have_are_left_out_and_named(tmp_path, two_stops):
    # a gripper's finger on the arm's joint_states topic: the arm's stops are found as without it (the bag was
    # refused as a whole, "joint 'finger_joint' is not in the model")
    plain = find_stops(read_recording(write_simulated_bag(str(tmp_path / "a"), two_stops, "mcap")), ur5())
    with_finger = dict(two_stops, names=tuple(two_stops["names"]) + ("finger_joint",),
                       joint=[(t, r, np.append(q, 0.01), np.append(v, 0.0)) for t, r, q, v in two_stops["joint"]])
    rec = read_recording(write_simulated_bag(str(tmp_path / "b"), with_finger, "mcap"))
    found = find_stops(rec, ur5())
    assert foreign_joints(rec, ur5()) == ["finger_joint"] and len(found) == len(plain) == 2
    for a, b in zip(found, plain):
        np.testing.assert_array_equal(a.q, b.q)
        assert a.stop_time == b.stop_time


def _with_gripper_publisher(path: str, samples_: dict, gripper: tuple[str, ...] = ("finger_joint",)) -> str:
    """The arm's bag with a gripper driver publishing its own joint states on the same topic at 50 Hz, starting
    before the arm's first message (its own clock: stamps 0.3 s behind the arm's)."""
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_KILTED)
    JointState, Bool = ts.types["sensor_msgs/msg/JointState"], ts.types["std_msgs/msg/Bool"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]

    def state(stamp, names, q, v):
        sec = int(stamp)
        return JointState(header=Header(stamp=Time(sec=sec, nanosec=int(round((stamp - sec) * 1e9))), frame_id=""),
                          name=list(names), position=np.asarray(q, float), velocity=np.asarray(v, float),
                          effort=np.zeros(0))

    events = [(t + 5e-4, "/joint_states", state(t, samples_["names"], q, v)) for t, _, q, v in samples_["joint"]]
    events += [(t, "/estop", Bool(data=bool(x))) for t, x in samples_["trigger"]]
    t0, t1 = samples_["joint"][0][0] - 0.1, samples_["joint"][-1][0]
    events += [(t, "/joint_states", state(t - 0.3, gripper, [0.01] * len(gripper), [0.0] * len(gripper)))
               for t in np.arange(t0, t1, 0.02)]
    events.sort(key=lambda e: e[0])
    return write_bag(path, "mcap", {"/joint_states": "sensor_msgs/msg/JointState", "/estop": "std_msgs/msg/Bool"},
                     ((topic, int(round(t * 1e9)), msg) for t, topic, msg in events), typestore=ts)


def test_a_second_publisher_of_other_joints_is_left_out_when_the_robots_joints_are_given(tmp_path, two_stops):
    # a gripper driver on the arm's joint_states topic: its messages share no joint with the arm. Given the
    # robot's joints, they are left out and counted, and the arm's stops are those of the bag without them (the
    # bag was refused: "changes the joint names (first message: finger_joint)", which blamed the arm)
    plain = find_stops(read_recording(write_simulated_bag(str(tmp_path / "a"), two_stops, "mcap")), ur5())
    path = _with_gripper_publisher(str(tmp_path / "b"), two_stops)
    rec = read_recording(path, joints=ur5().joint_names)
    found = find_stops(rec, ur5())
    assert len(found) == len(plain) == 2
    for a, b in zip(found, plain):
        np.testing.assert_array_equal(a.q, b.q)
        assert a.stop_time == b.stop_time
    ((names, count),) = rec.other_publishers
    assert names == ("finger_joint",) and count == len(np.arange(two_stops["joint"][0][0] - 0.1,
                                                                 two_stops["joint"][-1][0], 0.02))


def test_a_second_publisher_is_named_as_the_cause_when_the_robots_joints_are_not_given(tmp_path, two_stops):
    path = _with_gripper_publisher(str(tmp_path / "b"), two_stops)
    with pytest.raises(RecordingError) as err:
        read_recording(path)
    line = _one_line(err.value)
    assert "other joint names" in line and "finger_joint" in line and "shoulder_pan_joint" in line
    assert "a second publisher" in line


def test_a_second_publisher_of_some_of_the_robots_joints_is_refused(tmp_path, two_stops):
    # a publisher naming one of the robot's joints cannot be left out (which of the two is the robot's?)
    path = _with_gripper_publisher(str(tmp_path / "b"), two_stops, ("wrist_3_joint", "finger_joint"))
    with pytest.raises(RecordingError) as err:
        read_recording(path, joints=ur5().joint_names)
    line = _one_line(err.value)
    assert "other joint names" in line and "wrist_3_joint, finger_joint" in line


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_truncated_or_corrupt_bag_is_one_line(tmp_path, two_stops, storage):
    path = write_simulated_bag(str(tmp_path / "b"), two_stops, storage)
    data = [f for f in os.listdir(path) if f != "metadata.yaml"][0]
    full = os.path.join(path, data)
    size = os.path.getsize(full)
    with open(full, "r+b") as fh:
        fh.truncate(size // 2)
    with pytest.raises(RecordingError) as err:
        read_recording(path)
    assert "b: " in _one_line(err.value) and ("corrupt" in str(err.value) or "not a readable" in str(err.value))
    garbage = tmp_path / "g"
    shutil.copytree(path, garbage)
    with open(os.path.join(garbage, data), "wb") as fh:
        fh.write(os.urandom(4096))
    with pytest.raises(RecordingError):
        read_recording(str(garbage))
    with pytest.raises(RecordingError, match="not a rosbag2 directory"):
        read_recording(str(tmp_path / "missing"))


def test_stop_cut_off_by_the_end_of_the_recording_is_named(tmp_path, two_stops):
    last_trigger = two_stops["trigger_times"][-1]
    path = write_simulated_bag(str(tmp_path / "b"), two_stops, "mcap", drop_after=last_trigger + 0.02)
    with pytest.raises(RecordingError) as err:
        find_stops(read_recording(path), ur5())
    assert "stop 2" in _one_line(err.value) and "cut off by the end of the recording" in str(err.value)


def test_trigger_field_not_in_the_type_is_named(tmp_path, two_stops):
    path = write_simulated_bag(str(tmp_path / "b"), two_stops, "mcap")
    with pytest.raises(RecordingError) as err:
        read_recording(path, TriggerRule("/estop", "std_msgs/msg/Bool", "mode", ("true",)))
    assert "trigger_field: 'mode' does not exist in std_msgs/msg/Bool (fields: data)" in _one_line(err.value)
    with pytest.raises(RecordingError, match="has type std_msgs/msg/Bool, the trigger is configured as"):
        read_recording(path, TriggerRule("/estop", "std_msgs/msg/Int8", "data", ("1",)))


SAFETY_MODE = """uint8 NORMAL=1
uint8 REDUCED=2
uint8 PROTECTIVE_STOP=3
uint8 RECOVERY=4
uint8 SAFEGUARD_STOP=5
uint8 SYSTEM_EMERGENCY_STOP=6
uint8 ROBOT_EMERGENCY_STOP=7
uint8 VIOLATION=8
uint8 FAULT=9
uint8 VALIDATE_JOINT_ID=10
uint8 UNDEFINED_SAFETY_MODE=11
uint8 AUTOMATIC_MODE_SAFEGUARD_STOP=12
uint8 SYSTEM_THREE_POSITION_ENABLING_STOP=13
uint8 mode
"""


def test_a_driver_safety_mode_type_unknown_to_the_library_is_read_from_the_bag(tmp_path):
    """The trigger type's definition travels in the bag: a UR driver's SafetyMode needs no package installed."""
    from rosbags.typesys import Stores, get_typestore, get_types_from_msg

    store = get_typestore(Stores.ROS2_KILTED)
    store.register(get_types_from_msg(SAFETY_MODE, "ur_dashboard_msgs/msg/SafetyMode"))
    SafetyMode = store.types["ur_dashboard_msgs/msg/SafetyMode"]
    modes = [1, 1, 7, 7, 1, 6]
    path = write_bag(str(tmp_path / "ur"), "mcap", {"/safety_mode": "ur_dashboard_msgs/msg/SafetyMode"},
                     [("/safety_mode", (k + 1) * 10**8, SafetyMode(mode=m)) for k, m in enumerate(modes)],
                     typestore=store)
    rule = TriggerRule("/safety_mode", "ur_dashboard_msgs/msg/SafetyMode", "mode",
                       ("ROBOT_EMERGENCY_STOP", "SYSTEM_EMERGENCY_STOP"))
    from rosbags.highlevel import AnyReader
    from pathlib import Path

    with AnyReader([Path(path)]) as reader:  # no default typestore: the definition comes from the bag
        msgs = [reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages()]
    matcher = TriggerMatcher(rule, msgs[0])
    assert [matcher.stopping(m) for m in msgs] == [False, False, True, True, False, True]


def test_trigger_rule_refuses_type_names_that_are_not_message_types():
    for bad in ("std_msgs.msg.Bool", "std_msgs/srv/Trigger", "../x/msg/Y", "std_msgs/msg/bool", "os.path/msg/X"):
        with pytest.raises(TriggerConfigError, match="trigger_type"):
            TriggerRule(type_name=bad)
    with pytest.raises(TriggerConfigError, match="trigger_field"):
        TriggerRule(field="data.__class__")


@pytest.mark.parametrize("content", ["empty", "a file"])
def test_a_bag_name_taken_while_writing_is_left_alone_and_the_bag_is_kept_beside_it(tmp_path, two_stops, content):
    """A long recording: someone creates the bag's name before it ends. An empty folder used to be replaced
    silently; a non-empty one made the final rename fail and the finished bag was deleted."""
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    Bool = store.types["std_msgs/msg/Bool"]
    target = tmp_path / "b"

    def messages():
        for k in range(10):
            if k == 5:
                target.mkdir()
                if content == "a file":
                    (target / "notes.txt").write_text("mine")
            yield "/estop", (k + 1) * 10**8, Bool(data=k % 2 == 1)

    with pytest.raises(RecordingError) as err:
        write_bag(str(target), "mcap", {"/estop": "std_msgs/msg/Bool"}, messages(), typestore=store)
    assert "never overwritten" in _one_line(err.value) and "kept as b.kept-1" in str(err.value)
    assert sorted(os.listdir(target)) == ([] if content == "empty" else ["notes.txt"])
    assert count_messages(str(tmp_path / "b.kept-1")) == {"/estop": 10}


def test_a_joint_state_with_more_joints_than_an_arm_has_is_refused_at_its_first_message(tmp_path):
    """Every joint state is kept in memory: 300 names per message (here zero-filled, up to 64 MiB a message)
    multiplied every message's cost by 50 over a six-joint arm's, up to the message limit."""
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    JointState, Bool = store.types["sensor_msgs/msg/JointState"], store.types["std_msgs/msg/Bool"]
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    names = [f"j{k}" for k in range(300)]
    def state(k: int):
        return JointState(header=Header(stamp=Time(sec=1, nanosec=k * 10**7), frame_id=""), name=names,
                          position=np.zeros(300), velocity=np.zeros(300), effort=np.zeros(0))

    msgs = [("/joint_states", 10**9 + k * 10**7 + 500_000, state(k)) for k in range(1, 4)]
    msgs.append(("/estop", 10**9 + 5 * 10**7, Bool(data=False)))
    path = write_bag(str(tmp_path / "wide"), "mcap", {"/joint_states": "sensor_msgs/msg/JointState",
                                                       "/estop": "std_msgs/msg/Bool"}, msgs, typestore=store)
    with pytest.raises(RecordingError) as err:
        read_recording(path)
    assert "has more than 256 joints" in _one_line(err.value)
