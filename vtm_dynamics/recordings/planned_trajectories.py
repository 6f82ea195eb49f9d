"""Planned trajectories recorded in rosbag2 bags: ``trajectory_msgs/msg/JointTrajectory`` messages, read without a
ROS installation.

The bag is first listed by :func:`vtm_dynamics.recordings.bag_files.bag_summary` (which opens it within the
project's limits and counts what is there), so that a bag that module refuses is refused here too; then the one
message asked for is read from the chosen topic with ``rosbags`` and converted to a
:class:`~vtm_dynamics.core.stopsafe.trajectory.PlannedTrajectory` (its checks and caps apply). A trajectory topic
with more than ``max_messages`` messages, a message with more than the trajectory's point cap, or a bag without the
topic are one-line :class:`~vtm_dynamics.recordings.bag_files.RecordingError` naming the bag by its base name.
Units: s, rad, rad/s, rad/s^2.
"""

from __future__ import annotations

import os
from pathlib import Path

from vtm_dynamics.core.stopsafe.trajectory import MAX_POINTS, PlannedTrajectory, TrajectoryError, planned_trajectory
from vtm_dynamics.core.stopsafe.trajectory_files import same_fields
from vtm_dynamics.recordings.bag_files import RecordingError, bag_summary

TRAJECTORY_TYPE = "trajectory_msgs/msg/JointTrajectory"
MAX_TRAJECTORY_MESSAGES = 100_000


def trajectory_topics(path: str) -> tuple[str, ...]:
    """The topics of the bag that carry ``JointTrajectory`` messages."""
    return tuple(t.topic for t in bag_summary(path) if t.type_name == TRAJECTORY_TYPE and t.count > 0)


def read_planned_trajectory(path: str, topic: str | None = None, index: int = 0, *,
                            max_messages: int = MAX_TRAJECTORY_MESSAGES, max_points: int = MAX_POINTS) -> PlannedTrajectory:
    """Message number ``index`` (0 = the first, -1 = the last) on ``topic`` (default: the only trajectory topic)
    of the bag at ``path`` as a planned trajectory."""
    name = os.path.basename(os.path.normpath(path))
    summary = {t.topic: t for t in bag_summary(path)}
    candidates = [t for t, s in summary.items() if s.type_name == TRAJECTORY_TYPE and s.count > 0]
    if topic is None:
        if len(candidates) != 1:
            listed = ", ".join(candidates) or "none"
            raise RecordingError(f"{name}: expected one JointTrajectory topic, found {len(candidates)} ({listed[:200]});"
                                 " name one")
        topic = candidates[0]
    topic = topic if topic.startswith("/") else "/" + topic
    if topic not in summary:
        raise RecordingError(f"{name}: no topic {topic[:120]!r} in the bag")
    if summary[topic].type_name != TRAJECTORY_TYPE:
        raise RecordingError(f"{name}: topic {topic[:120]!r} has type {summary[topic].type_name[:80]}, expected "
                             f"{TRAJECTORY_TYPE}")
    count = summary[topic].count
    if count > max_messages:
        raise RecordingError(f"{name}: {count} messages on {topic[:120]!r}, more than {max_messages}")
    if not -count <= index < count:
        raise RecordingError(f"{name}: message {index} asked for, {topic[:120]!r} has {count}")
    wanted = index % count
    msg = None
    try:
        from rosbags.highlevel import AnyReader
        from rosbags.typesys import Stores, get_typestore

        with AnyReader([Path(path)], default_typestore=get_typestore(Stores.ROS2_KILTED)) as reader:
            conns = [c for c in reader.connections if c.topic == topic]
            for k, (conn, _, raw) in enumerate(reader.messages(connections=conns)):
                if k == wanted:
                    msg = reader.deserialize(raw, conn.msgtype)
                    break
    except Exception as err:  # noqa: BLE001 - the library raises many kinds; each becomes one line
        raise RecordingError(f"{name}: cannot read {topic[:120]!r} ({type(err).__name__})") from None
    if msg is None:
        raise RecordingError(f"{name}: message {index} of {topic[:120]!r} is not in the bag")
    points = list(msg.points)
    if not 2 <= len(points) <= max_points:
        raise RecordingError(f"{name}: the trajectory has {len(points)} points, expected 2..{max_points}")
    names = list(msg.joint_names)
    try:
        fields = None
        for k, p in enumerate(points):  # every point the same fields, as a trajectory file must have
            fields = same_fields(fields, tuple(f for f in ("velocities", "accelerations") if len(getattr(p, f))),
                                 f"points[{k}]")
        has_v, has_a = "velocities" in fields, "accelerations" in fields
        return planned_trajectory(
            names, [p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in points],
            [list(p.positions) for p in points], [list(p.velocities) for p in points] if has_v else None,
            [list(p.accelerations) for p in points] if has_a else None, max_points=max_points)
    except TrajectoryError as err:
        raise RecordingError(f"{name}: {topic[:120]}: {err}") from None
