"""Reading and writing rosbag2 recordings (sqlite3 and MCAP storage) without a ROS installation.

The library is ``rosbags`` (pure Python): it reads both storages of rosbag2, takes the message definitions stored
in the bag (so a driver's own status type such as ``ur_dashboard_msgs/msg/SafetyMode`` needs no package), and
writes bags that ``ros2 bag`` reads. This module is file I/O, not physics: it returns plain series and never
quotes file contents in an error.

* :func:`write_bag` writes messages to a new bag directory atomically (a hidden temporary directory next to it,
  renamed at the end: a failed or interrupted write leaves nothing under the requested name);
* :func:`bag_summary` lists the topics with type and message count (what ``ros2 bag info`` shows);
* :func:`read_recording` reads the joint-state series and the trigger series (:class:`Recording`).

Times: a joint state's time is its ``header.stamp`` (the instant the robot sampled it) unless that is zero, then
the bag's receive time; a trigger's time is its ``header.stamp`` if the type has a header and the stamp is
non-zero, else the receive time. Units: s, rad, rad/s. Errors: :class:`RecordingError`, one line naming the bag
(by base name) and what is wrong.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from vtm_dynamics.recordings.trigger import TriggerConfigError, TriggerMatcher, TriggerRule

STORAGES = ("mcap", "sqlite3")
DEFAULT_JOINT_TOPIC = "/joint_states"
DEFAULT_MAX_MESSAGES = 5_000_000  # messages read from one bag (about 2.8 h of 500 Hz joint states)


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
    """Trigger messages: ``t`` (M) [s] and ``stopping`` (M, bool) as the rule reads each message; ``publisher``
    (M) separates senders where the bag knows them (else all 0)."""

    t: np.ndarray
    stopping: np.ndarray


@dataclass(frozen=True)
class Recording:
    """A bag's joint states and trigger (see the module docstring); ``name`` is the bag's base name."""

    name: str
    storage: str
    joints: JointSeries
    trigger: TriggerSeries
    rule: TriggerRule
    topics: tuple[TopicSummary, ...]


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
    tmp_parent = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=parent)
    tmp = os.path.join(tmp_parent, os.path.basename(path))
    try:
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        with Writer(tmp, version=9, storage_plugin=plugin) as writer:
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
        os.rename(tmp, path)
    finally:
        shutil.rmtree(tmp_parent, ignore_errors=True)
    return path


# ------------------------------------------------------------------------------------------------- reading
def _open(path: str):
    from rosbags.highlevel import AnyReader

    name = os.path.basename(os.path.normpath(path))
    if not os.path.isdir(path):
        raise RecordingError(f"{name}: not a rosbag2 directory (expected a folder with metadata.yaml)")
    try:
        return AnyReader([Path(path)], default_typestore=_typestore())
    except Exception as err:  # noqa: BLE001 - the library raises many kinds; each becomes one line
        raise RecordingError(f"{name}: not a readable rosbag2 recording ({type(err).__name__})") from None


def bag_summary(path: str) -> tuple[TopicSummary, ...]:
    """The topics of the bag at ``path`` with type and message count (from the bag's index)."""
    name = os.path.basename(os.path.normpath(path))
    reader = _open(path)
    try:
        with reader:
            out = {}
            for c in reader.connections:
                prev = out.get(c.topic)
                out[c.topic] = TopicSummary(c.topic, c.msgtype, c.msgcount + (prev.count if prev else 0))
            return tuple(sorted(out.values(), key=lambda s: s.topic))
    except RecordingError:
        raise
    except Exception as err:  # noqa: BLE001
        raise RecordingError(f"{name}: corrupt or truncated bag ({type(err).__name__})") from None


def count_messages(path: str) -> dict[str, int]:
    """Messages per topic counted by reading every message (not the index): a check that the data is there."""
    name = os.path.basename(os.path.normpath(path))
    counts: dict[str, int] = {}
    try:
        with _open(path) as reader:
            for conn, _, _ in reader.messages():
                counts[conn.topic] = counts.get(conn.topic, 0) + 1
    except RecordingError:
        raise
    except Exception as err:  # noqa: BLE001
        raise RecordingError(f"{name}: corrupt or truncated bag ({type(err).__name__})") from None
    return counts


def _stamp(msg: Any, fallback_ns: int) -> float:
    header = getattr(msg, "header", None)
    stamp = getattr(header, "stamp", None)
    if stamp is not None:
        ns = int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)
        if ns > 0:
            return ns * 1e-9
    return fallback_ns * 1e-9


def read_recording(path: str, rule: TriggerRule = TriggerRule(), joint_topic: str = DEFAULT_JOINT_TOPIC,
                   max_messages: int = DEFAULT_MAX_MESSAGES) -> Recording:
    """The joint states on ``joint_topic`` and the trigger of ``rule`` in the bag at ``path``.

    Joint states must carry the same joint names throughout and finite positions (velocities may be absent in
    all messages). Errors (one line each): not a bag, corrupt or truncated, no joint-state topic, no trigger
    topic, the trigger type in the bag differs from the rule, the trigger field does not exist in the type, more
    than ``max_messages`` messages, a joint state that changes its names or is not finite.
    """
    name = os.path.basename(os.path.normpath(path))
    reader = _open(path)
    jt, tt = _topic(joint_topic), _topic(rule.topic)
    try:
        with reader:
            by_topic = {}
            for c in reader.connections:
                by_topic.setdefault(c.topic, []).append(c)
            known = ", ".join(sorted(by_topic)) or "none"
            if jt not in by_topic:
                raise RecordingError(f"{name}: no joint-state topic {jt!r} in the bag (topics: {known})")
            if tt not in by_topic:
                raise RecordingError(f"{name}: no trigger topic {tt!r} in the bag (topics: {known})")
            trig_types = {c.msgtype for c in by_topic[tt]}
            if trig_types != {rule.type_name}:
                raise RecordingError(f"{name}: trigger topic {tt!r} has type {', '.join(sorted(trig_types))}, "
                                     f"the trigger is configured as {rule.type_name}")
            joint_types = {c.msgtype for c in by_topic[jt]}
            if joint_types != {"sensor_msgs/msg/JointState"}:
                raise RecordingError(f"{name}: joint-state topic {jt!r} has type {', '.join(sorted(joint_types))}, "
                                     f"expected sensor_msgs/msg/JointState")
            total = sum(c.msgcount for c in by_topic[jt] + by_topic[tt])
            if total > max_messages:
                raise RecordingError(f"{name}: {total} joint-state and trigger messages exceed max_messages "
                                     f"{max_messages}")
            names: tuple[str, ...] | None = None
            t, q, v = [], [], []
            has_v = True
            tt_list, stop_list = [], []
            matcher: TriggerMatcher | None = None
            for conn, stamp_ns, raw in reader.messages(connections=by_topic[jt] + by_topic[tt]):
                msg = reader.deserialize(raw, conn.msgtype)
                if conn.topic == tt:
                    if matcher is None:
                        try:
                            matcher = TriggerMatcher(rule, msg)
                        except TriggerConfigError as err:
                            raise RecordingError(f"{name}: {err}") from None
                    tt_list.append(_stamp(msg, stamp_ns))
                    stop_list.append(matcher.stopping(msg))
                    continue
                these = tuple(msg.name)
                if names is None:
                    names = these
                    if not names or len(set(names)) != len(names):
                        raise RecordingError(f"{name}: joint state at {stamp_ns * 1e-9:.3f} s: empty or repeated "
                                             f"joint names")
                elif these != names:
                    raise RecordingError(f"{name}: joint state at {stamp_ns * 1e-9:.3f} s changes the joint "
                                         f"names (first message: {', '.join(names)})")
                pos = np.asarray(msg.position, dtype=float)
                if pos.shape != (len(names),) or not np.all(np.isfinite(pos)):
                    raise RecordingError(f"{name}: joint state at {stamp_ns * 1e-9:.3f} s: position must be "
                                         f"{len(names)} finite numbers")
                vel = np.asarray(msg.velocity, dtype=float)
                if vel.size == 0:
                    has_v = False
                elif vel.shape != (len(names),) or not np.all(np.isfinite(vel)):
                    raise RecordingError(f"{name}: joint state at {stamp_ns * 1e-9:.3f} s: velocity must be "
                                         f"empty or {len(names)} finite numbers")
                t.append(_stamp(msg, stamp_ns))
                q.append(pos)
                v.append(vel if vel.size else np.zeros(len(names)))
    except RecordingError:
        raise
    except Exception as err:  # noqa: BLE001 - truncated chunks, bad CDR, broken sqlite pages ...
        raise RecordingError(f"{name}: corrupt or truncated bag ({type(err).__name__})") from None
    if not t:
        raise RecordingError(f"{name}: no messages on the joint-state topic {jt!r}")
    if not tt_list:
        raise RecordingError(f"{name}: no messages on the trigger topic {tt!r}")
    order = np.argsort(np.asarray(t), kind="stable")
    joints = JointSeries(names, np.asarray(t)[order], np.asarray(q)[order],
                         np.asarray(v)[order] if has_v else None)
    torder = np.argsort(np.asarray(tt_list), kind="stable")
    trigger = TriggerSeries(np.asarray(tt_list)[torder], np.asarray(stop_list, dtype=bool)[torder])
    storage = "mcap" if any(f.endswith(".mcap") for f in os.listdir(path)) else "sqlite3"
    summary = tuple(TopicSummary(tp, cs[0].msgtype, sum(c.msgcount for c in cs)) for tp, cs in sorted(by_topic.items()))
    return Recording(name, storage, joints, trigger, rule, summary)
