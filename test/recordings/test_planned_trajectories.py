"""Planned trajectories (trajectory_msgs/JointTrajectory) read from rosbag2 bags: the message's fields become the
trajectory, the topic is found or named, and a bag without one is one line."""

import numpy as np
import pytest

from vtm_dynamics.recordings.bag_files import RecordingError, write_bag
from vtm_dynamics.recordings.planned_trajectories import read_planned_trajectory, trajectory_topics


def _message(store, positions, velocities, stamps):
    T = store.types
    points = [T["trajectory_msgs/msg/JointTrajectoryPoint"](
        positions=np.array(p, dtype=float), velocities=np.array(v, dtype=float), accelerations=np.zeros(0),
        effort=np.zeros(0), time_from_start=T["builtin_interfaces/msg/Duration"](sec=int(s), nanosec=int(round((s % 1) * 1e9))))
        for p, v, s in zip(positions, velocities, stamps)]
    header = T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id="")
    return T["trajectory_msgs/msg/JointTrajectory"](header=header, joint_names=["a", "b"], points=points)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_the_chosen_message_becomes_the_trajectory(tmp_path, storage):
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    first = _message(store, [[0, 0], [1, 2]], [[0, 0], [0, 0]], [0.0, 1.5])
    second = _message(store, [[0, 0], [2, 1], [3, 3]], [[0, 0], [1, 1], [0, 0]], [0.0, 0.5, 1.0])
    path = str(tmp_path / "plans")
    write_bag(path, storage, {"/planned": "trajectory_msgs/msg/JointTrajectory"},
              [("/planned", 1, first), ("/planned", 2, second)], typestore=store)
    assert trajectory_topics(path) == ("/planned",)
    traj = read_planned_trajectory(path)
    np.testing.assert_allclose(traj.time_from_start, [0.0, 1.5])
    last = read_planned_trajectory(path, "planned", -1)
    assert last.n_points == 3 and last.interpolation == "cubic"
    np.testing.assert_allclose(last.evaluate([0.5], 1)[0], [1.0, 1.0])
    with pytest.raises(RecordingError, match="message 2 asked for, '/planned' has 2"):
        read_planned_trajectory(path, index=2)
    with pytest.raises(RecordingError, match="no topic '/other'"):
        read_planned_trajectory(path, "/other")


def test_a_bag_without_a_trajectory_topic_is_one_line(tmp_path):
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    msg = store.types["std_msgs/msg/Bool"](data=True)
    path = str(tmp_path / "no_plan")
    write_bag(path, "mcap", {"/estop": "std_msgs/msg/Bool"}, [("/estop", 1, msg)], typestore=store)
    with pytest.raises(RecordingError, match="expected one JointTrajectory topic, found 0"):
        read_planned_trajectory(path)
    with pytest.raises(RecordingError, match="has type std_msgs/msg/Bool"):
        read_planned_trajectory(path, "/estop")


def test_a_message_whose_points_carry_different_fields_is_refused_as_a_trajectory_file_is(tmp_path):
    """A point without velocities among points with them used to drop every point's velocities: the bag's motion
    was checked with straight lines, where a trajectory controller runs cubics on the segments whose ends carry
    velocities (a dip into the table passed). The same message as a file is refused; so is the bag now."""
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    msg = _message(store, [[0, 0], [0.5, 0.5], [1, 1]], [[], [1, 1], [0, 0]], [0.0, 0.5, 1.0])
    path = str(tmp_path / "mixed")
    write_bag(path, "mcap", {"/planned": "trajectory_msgs/msg/JointTrajectory"}, [("/planned", 1, msg)],
              typestore=store)
    with pytest.raises(RecordingError, match=r"points\[1\]: carries velocities but the first point carries "
                                             r"positions only"):
        read_planned_trajectory(path)
