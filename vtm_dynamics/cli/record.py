"""``vtm-record``: record a robot's stops from the live ROS 2 graph into a rosbag2 file (MCAP or sqlite3).

Examples::

    vtm-record site_stops --duration 600                                  # /joint_states + /estop (Bool)
    vtm-record ur_stops --trigger-topic /io_and_status_controller/safety_mode \\
        --trigger-type ur_dashboard_msgs/msg/SafetyMode --duration 900 --max-bytes 2e9
    vtm-record sim_stops --trigger-topic /brake_events --trigger-type vtm_msgs/msg/BrakeEvent --duration 10

It subscribes to the joint states (best effort: hears reliable and sensor-data publishers) and the trigger
(reliable, deep queue, as the predictor does) and any ``--topic NAME:TYPE`` extras, and writes every message as
received (serialised CDR, no conversion) with its receive time on the node clock (``--use-sim-time`` for
simulators that publish /clock). The recording is bounded: it ends after ``--duration`` [s], ``--max-bytes`` of
message data or ``--max-messages``, whichever comes first, or on Ctrl-C or SIGTERM (either ends the
recording, not the process: what was received is written and the bag finished); the bag appears under its name only when
it is complete (written next to it under a hidden temporary name, then renamed). Message definitions are stored in
the bag, so any tool (``ros2 bag``, ``vtm-calibrate``) reads it without the message packages.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from typing import Sequence

from vtm_dynamics.recordings.bag_files import STORAGES, RecordingError, write_bag
from vtm_dynamics.recordings.trigger import TriggerConfigError, split_type_name
from vtm_dynamics.core.excerpt import first_line
from vtm_dynamics.cli.arguments import parse_or_exit_status, quiet_when_output_closed

PROG = "vtm-record"
MAX_DURATION = 24 * 3600.0  # [s]


def message_definition(type_name: str, store) -> None:
    """Make ``type_name`` known to ``store`` for the bag's message definition: the library's store has the
    standard types; another type's ``.msg`` file is read from ``share/<package>/msg`` of the ament prefixes or of
    this Python's prefix (where the message wheels install it) and registered."""
    if type_name in store.fielddefs:
        return
    from rosbags.typesys import get_types_from_msg

    package, name = split_type_name(type_name)
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p] + [sys.prefix]
    candidates = [os.path.join(p, "share", package, "msg", f"{name}.msg") for p in prefixes]
    path = next((c for c in candidates if os.path.isfile(c)), None)
    if path is None:
        raise TriggerConfigError(f"{type_name}: no message definition {name}.msg found in the share folder of "
                                 f"package {package!r} (AMENT_PREFIX_PATH or this Python's prefix)")
    with open(path, encoding="utf-8") as fh:
        store.register(get_types_from_msg(fh.read(), type_name))


def record(out: str, topics: dict[str, str], *, storage: str = "mcap", duration: float = 60.0,
           max_bytes: float = 5e8, max_messages: int = 10_000_000, use_sim_time: bool = False,
           progress=None) -> dict[str, int]:
    """Record ``topics`` ({topic: type name}) into a new bag ``out``; returns the message count per topic."""
    import rclpy

    from vtm_dynamics.nodes import graph
    from vtm_dynamics.nodes.trigger_source import message_class
    from rosbags.typesys import Stores, get_typestore

    if not (0 < duration <= MAX_DURATION):
        raise RecordingError(f"duration: must be in (0, {MAX_DURATION:g}] s, got {duration}")
    if os.path.exists(out):
        raise RecordingError(f"{os.path.basename(out)}: exists already (a bag is never overwritten)")
    store = get_typestore(Stores.ROS2_KILTED)
    classes = {}
    for topic, type_name in topics.items():
        classes[topic] = message_class(type_name)  # the type must be installed to subscribe to it
        message_definition(type_name, store)
    for warning in graph.apply_isolation_defaults():
        sys.stderr.write(f"{PROG}: {warning}\n")
    from vtm_dynamics.nodes.fastdds_profile import rcl_init_environment

    # Ctrl-C and SIGTERM end the recording, not the process: rclpy's own handler shut the context down, the next
    # spin raised ExternalShutdownException past the writer, and the bag of the whole session was deleted as
    # incomplete (a trace and status 1); Python's KeyboardInterrupt could likewise land inside a write. Here a
    # signal only asks the loop to stop; the loop then writes what it received and the bag is finished.
    from rclpy.signals import SignalHandlerOptions

    stop_asked = {"signal": None}

    def ask_to_stop(signum, _frame) -> None:
        stop_asked["signal"] = signum

    main_thread = threading.current_thread() is threading.main_thread()  # only it may set handlers
    previous = {sig: signal.signal(sig, ask_to_stop) for sig in (signal.SIGINT, signal.SIGTERM)} if main_thread else {}
    try:
        with rcl_init_environment():  # the loopback profile, as every node of the package
            rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
        return _record_graph(out, topics, classes, store, storage, duration, max_bytes, max_messages, use_sim_time,
                             progress, stop_asked)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _record_graph(out, topics, classes, store, storage, duration, max_bytes, max_messages, use_sim_time, progress,
                  stop_asked) -> dict[str, int]:
    """The recording loop of :func:`record` (rclpy initialised, the stop signals caught into ``stop_asked``)."""
    import rclpy
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from vtm_dynamics.nodes import graph

    # no parameter services: nothing of the recorder is configurable from the graph (a stranger could otherwise
    # switch its clock with use_sim_time and falsify the receive times written into the bag)
    node = Node("vtm_record", parameter_overrides=[Parameter("use_sim_time", value=bool(use_sim_time))],
                start_parameter_services=False)
    buffer: list[tuple[str, int, bytes]] = []
    counts = {t: 0 for t in topics}
    total = {"bytes": 0, "messages": 0}

    def on_message(topic: str):
        def callback(data: bytes) -> None:
            buffer.append((topic, node.get_clock().now().nanoseconds, bytes(data)))
            counts[topic] += 1
            total["bytes"] += len(data)
            total["messages"] += 1
        return callback

    for k, (topic, type_name) in enumerate(topics.items()):
        qos = graph.sensor_qos(100) if type_name == "sensor_msgs/msg/JointState" else graph.events_qos(10000)
        node.create_subscription(classes[topic], topic, on_message(topic), qos, raw=True)

    def stream():
        end = time.monotonic() + duration
        last_report = 0.0
        while (time.monotonic() < end and total["bytes"] < max_bytes and total["messages"] < max_messages
               and stop_asked["signal"] is None):
            rclpy.spin_once(node, timeout_sec=0.05)
            while buffer:
                yield buffer.pop(0)
            now = time.monotonic()
            if progress and now - last_report >= 1.0:
                last_report = now
                progress(counts, max(0.0, end - now))
        while buffer:
            yield buffer.pop(0)

    try:
        write_bag(out, storage, topics, stream(), typestore=store, raw=True)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return counts


def build_parser() -> argparse.ArgumentParser:
    from vtm_dynamics.cli.arguments import Parser

    ap = Parser(prog=PROG, description="Record joint states and the E-stop trigger into a rosbag2.")
    ap.add_argument("out", help="bag directory to create (must not exist)")
    ap.add_argument("--storage", choices=STORAGES, default="mcap", help="rosbag2 storage")
    ap.add_argument("--joint-topic", default="/joint_states", help="sensor_msgs/JointState topic")
    ap.add_argument("--trigger-topic", default="/estop", help="trigger topic")
    ap.add_argument("--trigger-type", default="std_msgs/msg/Bool", help="trigger type <pkg>/msg/<Type>")
    ap.add_argument("--topic", action="append", default=[], metavar="NAME:TYPE", help="another topic to record")
    ap.add_argument("--duration", type=float, default=60.0, help="recording length [s]")
    ap.add_argument("--max-bytes", type=float, default=5e8, help="stop after this much message data [bytes]")
    ap.add_argument("--max-messages", type=int, default=10_000_000, help="stop after this many messages")
    ap.add_argument("--use-sim-time", action="store_true", help="receive times from /clock (simulators)")
    return ap


@quiet_when_output_closed
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_or_exit_status(build_parser(), argv)
    if isinstance(args, int):  # argparse printed its one line or the help
        return args

    def progress(counts: dict[str, int], left: float) -> None:
        sys.stderr.write("\r" + ", ".join(f"{t}: {n}" for t, n in counts.items()) + f"  ({left:.0f} s left)")
        sys.stderr.flush()

    try:
        topics = {args.joint_topic: "sensor_msgs/msg/JointState", args.trigger_topic: args.trigger_type}
        for extra in args.topic:
            name, _, type_name = extra.partition(":")
            if not name or not type_name:
                raise RecordingError(f"topic: expected NAME:TYPE, got {extra[:80]!r}")
            topics[name] = type_name
        counts = record(args.out, topics, storage=args.storage, duration=args.duration, max_bytes=args.max_bytes,
                        max_messages=args.max_messages, use_sim_time=args.use_sim_time, progress=progress)
    except (ValueError, OSError) as err:
        msg = first_line(err)
        sys.stderr.write(f"\n{PROG}: error: {msg}\n")
        return 2
    sys.stderr.write("\n")
    print(f"wrote {args.out}: " + ", ".join(f"{t} {n}" for t, n in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
