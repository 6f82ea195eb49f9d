"""Reading and writing rosbag2 recordings (sqlite3 and MCAP storage) without a ROS installation.

Writing uses the library ``rosbags`` (pure Python; bags that ``ros2 bag`` reads, the message definitions stored in
them). Reading is :mod:`.bag_storage` - the bag's files opened inside its own folder, sizes, decompression and time
bounded, counts taken from what is read - with ``rosbags``' type system for the CDR messages, so a driver's own
status type such as ``ur_dashboard_msgs/msg/SafetyMode`` needs no package (its definition is stored in the bag).
This module is file I/O, not physics: it returns plain series and never quotes file contents in an error.

* :func:`write_bag` writes messages to a new bag directory atomically (a hidden temporary directory next to it,
  renamed at the end: a failed or interrupted write leaves nothing under the requested name);
* :func:`bag_summary` lists the topics with type and message count (counted by reading, not from the index);
* :func:`read_recording` reads the joint-state series and the trigger series (:class:`Recording`).

Times: a joint state's time is its ``header.stamp`` (the instant the robot sampled it) unless that is zero, then
the bag's receive time; a trigger's time is its ``header.stamp`` if the type has a header and the stamp is
non-zero, else the receive time. Each series keeps one clock: stamped and unstamped messages mixed in one series
are an error, and so is a joint state stamped before the one received before it (a second publisher on the topic,
or a clock that jumped back: sorting them would interleave two sources silently). When one series is timed by
stamps and the other by receipt, the stamped one's median lag (receive time - stamp) must lie within
``-MAX_STAMP_LEAD`` .. ``MAX_STAMP_LAG``: a stamp on another clock (a simulator's, a controller's) would shift every
trigger instant against the joint states. Units: s, rad, rad/s. Errors: :class:`RecordingError`, one line naming the bag
(by base name) and what is wrong.

Size: about 430 lines: writing and reading share the bag's topics, types and limits, and the message-by-message
checks of a recording (clocks, publishers, names) are one series object that reads best beside the reader.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from vtm_dynamics.recordings.bag_storage import BagError, BagFolder, BagLimits
from vtm_dynamics.recordings.trigger import TriggerConfigError, TriggerMatcher, TriggerRule

STORAGES = ("mcap", "sqlite3")
DEFAULT_JOINT_TOPIC = "/joint_states"
DEFAULT_MAX_MESSAGES = BagLimits.max_messages  # messages read from one bag (about 2.8 h of 500 Hz joint states)


class RecordingError(ValueError):
    """A recording that cannot be used; one line naming the bag and what is wrong."""


def _typestore() -> Any:
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def _topic(name: str) -> str:
    return name if name.startswith("/") else "/" + name


@dataclass(frozen=True)
class TopicSummary:
    """One topic of a bag: ``type_name`` (``pkg/msg/Type``) and ``count`` of messages."""

    topic: str
    type_name: str
    count: int


@dataclass(frozen=True)
class JointSeries:
    """Joint states in the recorded order of ``names``: ``t`` (N) [s], ``q`` (N x n) [rad], ``v`` (N x n)
    [rad/s] or None when the recording has no velocities."""

    names: tuple[str, ...]
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray | None


@dataclass(frozen=True)
class TriggerSeries:
    """Trigger messages: ``t`` (M) [s] and ``stopping`` (M, bool) as the rule reads each message; ``stamped``:
    the times are the messages' header stamps (the instants they stand for), False: the bag's receive times
    (a message received first tells nothing of when its state began)."""

    t: np.ndarray
    stopping: np.ndarray
    stamped: bool = True


@dataclass(frozen=True)
class Recording:
    """A bag's joint states and trigger (see the module docstring); ``name`` is the bag's base name;
    ``other_publishers``: the joint states left out because they name none of the robot's joints (another driver on
    the topic, such as a gripper's), as (their joint names, message count)."""

    name: str
    storage: str
    joints: JointSeries
    trigger: TriggerSeries
    rule: TriggerRule
    topics: tuple[TopicSummary, ...]
    other_publishers: tuple[tuple[tuple[str, ...], int], ...] = ()


# ------------------------------------------------------------------------------------------------- writing
def write_bag(path: str, storage: str, topics: dict[str, str], messages: Iterable[tuple[str, int, Any]],
              *, typestore: Any = None, raw: bool = False, msgdefs: dict[str, tuple[str, str]] | None = None) -> str:
    """Write a new rosbag2 directory ``path`` with ``storage`` (``mcap`` or ``sqlite3``).

    ``topics``: {topic: type name}; ``messages``: (topic, receive time [ns], message) in time order, the message a
    ``rosbags`` message object of ``typestore`` (default: the Kilted store) or, with ``raw``, CDR bytes (e.g. from
    ``rclpy.serialization.serialize_message``). ``msgdefs`` gives (definition text, RIHS01 hash) for types that the
    store does not know. The bag appears under ``path`` only when complete. Returns ``path``.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer

    if storage not in STORAGES:
        raise RecordingError(f"storage: must be one of {', '.join(STORAGES)}, got {storage!r}")
    if os.path.exists(path):
        raise RecordingError(f"{os.path.basename(path)}: exists already (a bag is never overwritten)")
    store = typestore or _typestore()
    parent = os.path.dirname(os.path.abspath(path))
    # the library hands SQLite a URI built from the path: the bag is written under names of our own, reached
    # through the descriptor of its temporary folder, and renamed at the end - so any legal character in the
    # requested name or its folders ('#', '?', '%') is never parsed
    tmp_parent = tempfile.mkdtemp(prefix=".vtm-bag-", suffix=".partial", dir=parent)
    parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    tmp_fd = os.open(tmp_parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        with Writer(Path(f"/proc/self/fd/{tmp_fd}/bag"), version=9, storage_plugin=plugin) as writer:
            conns = {}
            for topic, type_name in topics.items():
                extra = (msgdefs or {}).get(type_name)
                if extra:
                    conns[topic] = writer.add_connection(topic, type_name, msgdef=extra[0], rihs01=extra[1])
                else:
                    conns[topic] = writer.add_connection(topic, type_name, typestore=store)
            for topic, stamp_ns, msg in messages:
                conn = conns[topic]
                data = msg if raw else store.serialize_cdr(msg, conn.msgtype)
                writer.write(conn, int(stamp_ns), data)
        _move_into_place(os.path.basename(os.path.abspath(path)), tmp_fd, parent_fd)
    finally:
        os.close(tmp_fd)
        os.close(parent_fd)
        shutil.rmtree(tmp_parent, ignore_errors=True)
    return path


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _move_into_place(name: str, tmp_fd: int, parent_fd: int) -> None:
    """Rename the finished ``bag`` of the temporary folder to ``name``. If ``name`` appeared meanwhile (a long
    recording, another recorder), it is not replaced (a rename replaces an empty folder) and the bag is not lost
    (a non-empty one made the rename fail and the finished bag was deleted with the temporary folder): it is kept
    under ``<name>.kept-<n>`` and the error says so."""
    if not _exists(name, parent_fd):
        try:
            os.rename("bag", name, src_dir_fd=tmp_fd, dst_dir_fd=parent_fd)
            return
        except OSError as err:
            if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
    kept = next(f"{name}.kept-{n}" for n in range(1, 10_000) if not _exists(f"{name}.kept-{n}", parent_fd))
    os.rename("bag", kept, src_dir_fd=tmp_fd, dst_dir_fd=parent_fd)
    raise RecordingError(f"{name}: appeared while the bag was written and is left as it was (a bag is never "
                         f"overwritten); the complete bag is kept as {kept}")


# ------------------------------------------------------------------------------------------------- reading
_TYPE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(/[A-Za-z][A-Za-z0-9_]*){1,2}$")
_FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
MAX_DEFINITION_CHARS = 1_000_000  # one stored message definition (a SafetyMode definition is ~1 kB)


def _open(path: str, limits: BagLimits = BagLimits()) -> BagFolder:
    try:
        return BagFolder(path, limits)
    except BagError as err:
        raise RecordingError(str(err)) from None


def _typestore_of(bag: BagFolder, topics: Iterable[str]) -> Any:
    """The Kilted type store plus the definitions the bag stores for the types of ``topics`` it lacks (parsed
    by the library; every type and field name is checked before the library generates code from it)."""
    from rosbags.typesys import get_types_from_idl, get_types_from_msg

    store = _typestore()
    for name in topics:
        t = bag.topics.get(name)
        if t is None or t.type_name in store.fielddefs or not t.definition:
            continue
        if len(t.definition) > MAX_DEFINITION_CHARS:
            raise RecordingError(f"{bag.name}: {name}: message definition of more than {MAX_DEFINITION_CHARS} "
                                 "characters")
        try:
            if t.definition_format == "ros2idl":
                typs: dict = {}
                for part in re.split(r"^=+\nIDL: [^\n]*\n", t.definition, flags=re.M):
                    if part.strip():
                        typs.update(get_types_from_idl(part))
            else:
                typs = get_types_from_msg(t.definition, t.type_name)
        except Exception:  # noqa: BLE001 - the parser's error types; a bad definition is a bad bag
            raise RecordingError(f"{bag.name}: {name}: the stored message definition of {t.type_name[:80]} cannot "
                                 "be parsed") from None
        for type_name, (consts, fields) in typs.items():
            names = [c[0] for c in consts] + [f[0] for f in fields]
            if not _TYPE_NAME.match(type_name) or not all(_FIELD_NAME.match(str(n)) for n in names):
                raise RecordingError(f"{bag.name}: {name}: the stored message definition has names that are not "
                                     "ROS identifiers")
        try:
            store.register({k: v for k, v in typs.items() if k not in store.fielddefs})
        except Exception:  # noqa: BLE001
            raise RecordingError(f"{bag.name}: {name}: the stored message definition of {t.type_name[:80]} cannot "
                                 "be used") from None
    return store


def bag_summary(path: str, limits: BagLimits = BagLimits()) -> tuple[TopicSummary, ...]:
    """The topics of the bag at ``path`` with type and message count - counted by reading every message (an
    index or ``metadata.yaml`` may say anything), within ``limits``."""
    with _open(path, limits) as bag:
        counts = _counts(bag)
        return tuple(TopicSummary(t.name, t.type_name, counts.get(t.name, 0))
                     for t in sorted(bag.topics.values(), key=lambda t: t.name))


def count_messages(path: str, limits: BagLimits = BagLimits()) -> dict[str, int]:
    """Messages per topic counted by reading every message (not the index): a check that the data is there."""
    with _open(path, limits) as bag:
        return {k: v for k, v in _counts(bag).items() if v}


def _counts(bag: BagFolder) -> dict[str, int]:
    try:
        return bag.count_messages()
    except BagError as err:
        raise RecordingError(str(err)) from None


def _header_ns(msg: Any) -> int:
    """The message's ``header.stamp`` [ns], 0 when it has none or it is zero."""
    stamp = getattr(getattr(msg, "header", None), "stamp", None)
    if stamp is None:
        return 0
    return max(0, int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec))


#: [s] the largest median lag (receive time - header stamp) of the joint states accepted when the trigger is timed
#: on the other clock (receive times against stamps, or the reverse): a stamp on another clock than the recorder's
#: shifts every trigger instant by the offset (30 ms shifted the state at a trigger from 3.9 to 2.2 rad/s), and
#: on one machine the lag is the transport's, about a millisecond
MAX_STAMP_LAG = 0.02
#: [s] the most a joint state may be stamped after it was received (impossible on one clock; scheduling jitter)
MAX_STAMP_LEAD = 0.002
MAX_JOINTS = 256  # names in a joint state (an arm with its tool has a few dozen at most)
MAX_OTHER_PUBLISHERS = 8  # sets of joint names of other publishers left out (read_recording's ``joints``)


def read_recording(path: str, rule: TriggerRule = TriggerRule(), joint_topic: str = DEFAULT_JOINT_TOPIC,
                   max_messages: int = DEFAULT_MAX_MESSAGES, limits: BagLimits | None = None,
                   joints: Sequence[str] | None = None) -> Recording:
    """The joint states on ``joint_topic`` and the trigger of ``rule`` in the bag at ``path``.

    Joint states must carry the same joint names throughout and finite positions (velocities may be absent in
    all messages). Given the robot's ``joints``, joint states that name none of them (another publisher on the
    topic, such as a gripper's driver) are left out and counted in ``Recording.other_publishers``; a second
    publisher naming some of them is an error, as is any second publisher without ``joints``. Errors (one line each): not a bag, corrupt or truncated, no joint-state topic, no trigger
    topic, the trigger type in the bag differs from the rule, the trigger field does not exist in the type, more
    than ``max_messages`` messages on the two topics (counted as read), a joint state that changes its names or
    is not finite, any limit of ``limits`` (:class:`~vtm_dynamics.recordings.bag_storage.BagLimits`: files inside
    the bag only, bounded decompression, time).
    """
    limits = replace(limits or BagLimits(), max_messages=int(max_messages))
    jt, tt = _topic(joint_topic), _topic(rule.topic)
    with _open(path, limits) as bag:
        name = bag.name
        known = ", ".join(sorted(bag.topics)) or "none"
        if jt not in bag.topics:
            raise RecordingError(f"{name}: no joint-state topic {jt!r} in the bag (topics: {known[:300]})")
        if tt not in bag.topics:
            raise RecordingError(f"{name}: no trigger topic {tt!r} in the bag (topics: {known[:300]})")
        trigger_type = bag.topics[tt].type_name
        if trigger_type != rule.type_name:
            raise RecordingError(f"{name}: trigger topic {tt!r} has type {trigger_type[:80]}, the trigger is "
                                 f"configured as {rule.type_name}")
        joint_type = bag.topics[jt].type_name
        if joint_type != "sensor_msgs/msg/JointState":
            raise RecordingError(f"{name}: joint-state topic {jt!r} has type {joint_type[:80]}, expected "
                                 f"sensor_msgs/msg/JointState")
        store = _typestore_of(bag, (tt,))
        series = _Series(name, rule, joints)
        try:
            for topic, stamp_ns, raw in bag.messages({jt, tt}):
                try:
                    msg = store.deserialize_cdr(raw, trigger_type if topic == tt else joint_type)
                except Exception:  # noqa: BLE001 - bad CDR: a corrupt message
                    raise RecordingError(f"{name}: corrupt message on {topic} at {stamp_ns * 1e-9:.3f} s") from None
                if topic == tt:
                    series.trigger(msg, stamp_ns)
                else:
                    series.joint(msg, stamp_ns)
        except BagError as err:
            raise RecordingError(str(err)) from None
        storage = bag.storage
    return series.recording(storage, jt, tt, trigger_type)


class _Series:
    """The joint-state and trigger series of one bag, built message by message (checks in :func:`read_recording`)."""

    def __init__(self, name: str, rule: TriggerRule, robot_joints: Sequence[str] | None = None) -> None:
        self.name, self.rule = name, rule
        self.robot_joints = frozenset(robot_joints) if robot_joints is not None else None
        self.others: dict[tuple[str, ...], int] = {}  # joint states of other publishers left out: names -> count
        self.names: tuple[str, ...] | None = None
        self.t: list[float] = []
        self.q: list[np.ndarray] = []
        self.v: list[np.ndarray] = []
        self.has_v = True
        self.tt: list[float] = []
        self.stopping: list[bool] = []
        self.matcher: TriggerMatcher | None = None
        self.joint_stamped: bool | None = None  # header stamps (True) or receive times (False)
        self.trigger_stamped: bool | None = None
        self.lags: dict[str, list[int]] = {"joint": [], "trigger": []}  # [ns] receive time - header stamp

    def trigger(self, msg: Any, stamp_ns: int) -> None:
        if self.matcher is None:
            try:
                self.matcher = TriggerMatcher(self.rule, msg)
            except TriggerConfigError as err:
                raise RecordingError(f"{self.name}: {err}") from None
        header_ns = _header_ns(msg)
        self.trigger_stamped = self._one_clock(self.trigger_stamped, header_ns > 0, "trigger message", stamp_ns)
        if header_ns:
            self.lags["trigger"].append(stamp_ns - header_ns)
        self.tt.append((header_ns or stamp_ns) * 1e-9)
        self.stopping.append(self.matcher.stopping(msg))

    def _one_clock(self, before: bool | None, stamped: bool, what: str, stamp_ns: int) -> bool:
        """A series is timed on one clock: by header stamps throughout, or (all stamps zero) by receive times."""
        if before is not None and before != stamped:
            raise RecordingError(f"{self.name}: {what} at {stamp_ns * 1e-9:.3f} s is "
                                 f"{'stamped' if stamped else 'unstamped (header stamp zero)'}, the ones before it "
                                 f"{'were not' if stamped else 'were stamped'}: two clocks (or two publishers) in one "
                                 "series")
        return stamped

    def joint(self, msg: Any, stamp_ns: int) -> None:
        name, these = self.name, tuple(msg.name)
        if len(these) > MAX_JOINTS:
            raise RecordingError(f"{name}: joint state at {stamp_ns * 1e-9:.3f} s has more than {MAX_JOINTS} joints")
        if self.robot_joints is not None and these and self.robot_joints.isdisjoint(these):
            if these not in self.others and len(self.others) >= MAX_OTHER_PUBLISHERS:
                raise RecordingError(f"{name}: joint states with more than {MAX_OTHER_PUBLISHERS} sets of joint "
                                     "names that are not the robot's on the topic")
            self.others[these] = self.others.get(these, 0) + 1
            return
        if self.names is None:
            self.names = these
            if not these or len(set(these)) != len(these):
                raise RecordingError(f"{name}: joint state at {stamp_ns * 1e-9:.3f} s: empty or repeated joint names")
        elif these != self.names:
            hint = "" if self.robot_joints is not None else \
                " (given the robot's joints, a publisher of none of them is left out)"
            raise RecordingError(f"{name}: joint state at {stamp_ns * 1e-9:.3f} s has other joint names than the "
                                 f"first one ({', '.join(these)[:150]} against {', '.join(self.names)[:300]}): a "
                                 f"second publisher on the topic, or a driver that changed its joints{hint}")
        n = len(self.names)
        pos = np.asarray(msg.position, dtype=float)
        if pos.shape != (n,) or not np.all(np.isfinite(pos)):
            raise RecordingError(f"{name}: joint state at {stamp_ns * 1e-9:.3f} s: position must be {n} finite "
                                 "numbers")
        vel = np.asarray(msg.velocity, dtype=float)
        if vel.size == 0:
            self.has_v = False
        elif vel.shape != (n,) or not np.all(np.isfinite(vel)):
            raise RecordingError(f"{name}: joint state at {stamp_ns * 1e-9:.3f} s: velocity must be empty or {n} "
                                 "finite numbers")
        header_ns = _header_ns(msg)
        self.joint_stamped = self._one_clock(self.joint_stamped, header_ns > 0, "joint state", stamp_ns)
        t = (header_ns or stamp_ns) * 1e-9
        if self.t and t < self.t[-1]:
            raise RecordingError(f"{name}: joint state at {stamp_ns * 1e-9:.3f} s is stamped {self.t[-1] - t:.4g} s "
                                 "before the one received before it: two publishers on the topic, or a clock that "
                                 "jumped back (record one source on one clock)")
        if header_ns:
            self.lags["joint"].append(stamp_ns - header_ns)
        self.t.append(t)
        self.q.append(pos)
        self.v.append(vel if vel.size else np.zeros(n))

    def recording(self, storage: str, jt: str, tt: str, trigger_type: str) -> Recording:
        if not self.t:
            if self.others:
                names = ", ".join(", ".join(k) for k in self.others)
                raise RecordingError(f"{self.name}: joints do not match the model: no joint state on {jt!r} names "
                                     f"one of its joints {', '.join(sorted(self.robot_joints))[:200]} (recorded: "
                                     f"{names[:300]})")
            raise RecordingError(f"{self.name}: no messages on the joint-state topic {jt!r}")
        if not self.tt:
            raise RecordingError(f"{self.name}: no messages on the trigger topic {tt!r}")
        if self.joint_stamped != self.trigger_stamped:
            stamped = "joint states" if self.joint_stamped else "trigger messages"
            lag = float(np.median(self.lags["joint" if self.joint_stamped else "trigger"])) * 1e-9
            if not -MAX_STAMP_LEAD <= lag <= MAX_STAMP_LAG:
                raise RecordingError(
                    f"{self.name}: the {stamped} are received {lag:.4g} s after their header stamps (median; "
                    f"accepted: {-MAX_STAMP_LEAD:g} to {MAX_STAMP_LAG:g} s) and the "
                    f"{'trigger messages' if self.joint_stamped else 'joint states'} are timed by receipt: the "
                    "stamps are on another clock than the recorder's, so the trigger instants cannot be placed "
                    "among the joint states")
        joints = JointSeries(self.names, np.asarray(self.t), np.asarray(self.q),
                             np.asarray(self.v) if self.has_v else None)
        torder = np.argsort(np.asarray(self.tt), kind="stable")
        trigger = TriggerSeries(np.asarray(self.tt)[torder], np.asarray(self.stopping, dtype=bool)[torder],
                                stamped=bool(self.trigger_stamped))
        summary = tuple(sorted((TopicSummary(jt, "sensor_msgs/msg/JointState", len(self.t)),
                                TopicSummary(tt, trigger_type, len(self.tt))), key=lambda s: s.topic))
        return Recording(self.name, storage, joints, trigger, self.rule, summary, tuple(self.others.items()))
