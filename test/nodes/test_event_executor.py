"""A callback group served by an executor thread of its own, on one node (nodes/event_executor.py): its callbacks
run on that thread only, also while the node's own executor is busy in a long callback, and the node stays one
node on the graph."""

import threading
import time

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from std_msgs.msg import Bool

from test.nodes.node_harness import EVENTS
from test.ros_helpers import spin_until
from vtm_dynamics.nodes.event_executor import EventExecutor


@pytest.fixture
def context():
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.try_shutdown(context=ctx)


def test_the_groups_callbacks_run_on_its_thread_while_the_nodes_executor_is_blocked(context):
    node = rclpy.create_node("event_executor_test", context=context)
    events = EventExecutor(node, "test-events", lambda err: None)
    threads: list[str] = []
    node.create_subscription(Bool, "line", lambda msg: threads.append(threading.current_thread().name), EVENTS,
                             callback_group=events.group)
    blocked = threading.Event()
    node.create_timer(0.01, lambda: (blocked.set(), time.sleep(1.0)))  # the node's executor is busy for 1 s
    other = rclpy.create_node("event_executor_publisher", context=context)
    pub = other.create_publisher(Bool, "line", EVENTS)
    main = SingleThreadedExecutor(context=context)
    main.add_node(node)
    main.add_node(other)
    spinner = threading.Thread(target=main.spin, daemon=True)
    try:
        events.start()
        spinner.start()
        assert blocked.wait(10.0)
        deadline = time.monotonic() + 10.0
        while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        for _ in range(5):
            pub.publish(Bool(data=True))
        deadline = time.monotonic() + 10.0
        while len(threads) < 5 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert threads == ["test-events"] * 5
        names = [n for n, _ in node.get_node_names_and_namespaces()]
        assert names.count("event_executor_test") == 1
    finally:
        events.stop()
        main.shutdown(timeout_sec=5.0)
        spinner.join(5.0)
        node.destroy_node()
        other.destroy_node()


def test_without_its_thread_the_nodes_executor_never_runs_the_group(context):
    node = rclpy.create_node("event_executor_idle", context=context)
    events = EventExecutor(node, "test-events-idle", lambda err: None)
    got = []
    node.create_subscription(Bool, "line_idle", got.append, EVENTS, callback_group=events.group)
    pub = node.create_publisher(Bool, "line_idle", EVENTS)
    main = SingleThreadedExecutor(context=context)
    main.add_node(node)
    try:
        pub.publish(Bool(data=True))
        spin_until(main, lambda: bool(got), 0.5)
        assert got == []  # the group belongs to the event thread, which was never started
        events.start()
        deadline = time.monotonic() + 10.0
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(got) == 1
    finally:
        events.stop()
        main.shutdown(timeout_sec=5.0)
        node.destroy_node()
