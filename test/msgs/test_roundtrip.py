"""Every vtm_msgs message and service crosses real DDS (Fast DDS, loopback) between two processes intact."""

import subprocess

import pytest
import rclpy
import vtm_msgs.msg as M
import vtm_msgs.srv as S
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState

from test.msgs.echo_node import MESSAGE_TYPES
from test.ros_helpers import call_until_answered, filled_message, python_executable, ros_subprocess_env, spin_until


@pytest.fixture(scope="module")
def echo_process():
    proc = subprocess.Popen(
        [python_executable(), "-m", "test.msgs.echo_node"],
        cwd=ros_subprocess_env()["PYTHONPATH"].split(":")[0],
        env=ros_subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    line = proc.stdout.readline()
    assert "echo ready" in line, line + proc.stdout.read() if proc.poll() is not None else line
    yield proc
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def node():
    rclpy.init()
    n = rclpy.create_node("vtm_msgs_roundtrip_test")
    executor = SingleThreadedExecutor()
    executor.add_node(n)
    yield n, executor
    n.destroy_node()
    rclpy.shutdown()


@pytest.mark.parametrize("name", MESSAGE_TYPES)
def test_every_field_of_message_survives_a_dds_round_trip(echo_process, node, name):
    n, executor = node
    cls = getattr(M, name)
    sent = filled_message(cls, seed=len(name))
    assert sent != cls(), "the test message must differ from the defaults"
    received = []
    sub = n.create_subscription(cls, f"/roundtrip/out/{name}", received.append, 10)
    pub = n.create_publisher(cls, f"/roundtrip/in/{name}", 10)
    try:
        assert spin_until(executor, lambda: pub.get_subscription_count() > 0 and sub.get_publisher_count() > 0, 20.0)
        # Discovery of the echo's publisher by our subscription may complete after the match is visible;
        # publish until one copy comes back.
        assert spin_until(executor, lambda: (pub.publish(sent), bool(received))[1], 20.0), f"no echo of {name}"
        assert received[0] == sent
        assert received[0] is not sent
    finally:
        n.destroy_subscription(sub)
        n.destroy_publisher(pub)


def test_constants_are_part_of_the_contract():
    assert (M.BrakeEvent.ENGAGE, M.BrakeEvent.RELEASE) == (0, 1)
    assert (M.LockEvent.LOCK, M.LockEvent.UNLOCK) == (0, 1)
    assert (M.StopPrediction.CATEGORY_0, M.StopPrediction.CATEGORY_1, M.StopPrediction.CATEGORY_2) == (0, 1, 2)
    kinds = [M.TopologyEvent.BRAKE_ENGAGE, M.TopologyEvent.BRAKE_RELEASE, M.TopologyEvent.STICK,
             M.TopologyEvent.SLIP, M.TopologyEvent.LOCK, M.TopologyEvent.UNLOCK, M.TopologyEvent.STOP]
    assert len(set(kinds)) == len(kinds)


def test_predict_stop_service_round_trip(echo_process, node):
    n, executor = node
    client = n.create_client(S.PredictStop, "/roundtrip/predict_stop")
    assert spin_until(executor, client.service_is_ready, 20.0)
    request = S.PredictStop.Request(
        state=JointState(name=["shoulder", "elbow"], position=[0.5, -1.25], velocity=[1.0, 2.0], effort=[3.0, 4.0]),
        stop_category=M.StopPrediction.CATEGORY_1, brake_config_yaml="brakes: {}", tcp_frame="tool0", horizon=2.0,
    )
    response = call_until_answered(executor, client, request, 20.0)
    assert response is not None
    assert response.success and response.message == "shoulder,elbow"
    assert response.prediction.stop_category == M.StopPrediction.CATEGORY_1
    assert list(response.prediction.stopping_angles) == [0.5, -1.25]
    assert response.prediction.tcp_frame == "tool0"
    assert list(response.reactions_at_rest.holding_torques) == [3.0, 4.0]


def test_analyze_solvability_service_round_trip(echo_process, node):
    n, executor = node
    client = n.create_client(S.AnalyzeSolvability, "/roundtrip/analyze_solvability")
    assert spin_until(executor, client.service_is_ready, 20.0)
    request = S.AnalyzeSolvability.Request(urdf="<robot name='r'/>", planar=True, positions=[1.0, 2.0, 3.0])
    response = call_until_answered(executor, client, request, 20.0)
    assert response is not None
    assert response.message == "<robot name='r'/>" and response.report.planar
    assert [(p.name, p.rows) for p in response.report.pairs] == [("p0", 0), ("p1", 1), ("p2", 2)]


def test_check_trajectory_service_round_trip(echo_process, node):
    """The generated CheckTrajectory type crosses DDS: the JointTrajectory, the SolidPrimitive scene with its poses
    and names, and the scalar options all arrive as sent (the echo copies them into the response)."""
    from builtin_interfaces.msg import Duration
    from geometry_msgs.msg import Pose
    from shape_msgs.msg import SolidPrimitive
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    n, executor = node
    client = n.create_client(S.CheckTrajectory, "/roundtrip/check_trajectory")
    assert spin_until(executor, client.service_is_ready, 20.0)
    traj = JointTrajectory(joint_names=["a", "b"], points=[
        JointTrajectoryPoint(positions=[0.1, 0.2], time_from_start=Duration(sec=0)),
        JointTrajectoryPoint(positions=[0.3, 0.4], time_from_start=Duration(sec=1, nanosec=500_000_000))])
    traj.header.frame_id = "base"
    pose = Pose()
    pose.position.x, pose.orientation.w = 0.75, 1.0
    request = S.CheckTrajectory.Request(
        trajectory=traj, obstacles=[SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[1.0, 2.0, 3.0])],
        obstacle_poses=[pose], obstacle_names=["table"], has_floor=True, floor_height=-0.5, self_collision=True,
        margin=0.02, stop_categories=[0, 1], sample_period=0.01, search_speed_scaling=True)
    r = call_until_answered(executor, client, request, 20.0)
    assert r is not None
    assert r.success and r.message == "a,b" and r.header.frame_id == "base"
    assert list(r.time) == [0.0, 1.5] and list(r.stop_time) == [0.1, 0.2, 0.3, 0.4]
    assert list(r.min_clearance) == [1.0, 2.0, 3.0] and list(r.certified_clearance) == [0.75, 1.0]
    assert list(r.link) == ["table"] and list(r.cases) == ["0", "1"] and list(r.obstacle) == ["1"]
    assert list(r.sample_safe) == [True, True, True] and list(r.tcp_distance) == [-0.5, 0.02, 0.01]
    assert r.first_unsafe == S.CheckTrajectory.Response.NOT_CHECKED == -2
    assert S.CheckTrajectory.Response.NONE_UNSAFE == -1
