"""The predictor's replay of its latest predicted stop, for a ghost robot and markers in RViz.

Outputs (topics relative to the node)
  ``predicted_motion``          sensor_msgs/JointState at ``replay_rate`` Hz: the joint positions of the predicted
                                stopping motion at true time (``replay_speed`` 1), then ``replay_hold`` s at the rest
                                pose, again and again; a second robot_state_publisher with ``frame_prefix: replay/``
                                turns them into the ghost's TF (launch/estop_predict.launch.py)
  ``predicted_motion_markers``  visualization_msgs/MarkerArray: DELETEALL, the TCP path (``replay_tcp_path``; red
                                with the text "NOT VALID: past a joint limit" or "NOT VALID: not at rest within
                                the horizon" above its end for a prediction that is not the robot's stop), the TCP
                                at each event coloured by kind (``replay_events``), and the envelope's worst-case
                                rest pose as a line through the joints and the TCP (``replay_worst_rest``) when one was
                                evaluated for the replayed prediction; sent when the replay changes and once a pass

Which prediction it replays: an E-stop prediction (and its revisions) at once; a continuous prediction only when
no E-stop prediction was replayed within ``replay_keep`` s, and only at the end of the pass in progress, so the
ghost always shows whole stops. The worst case comes from the continuous mode's envelope
(``live_stopping``); E-stop predictions carry none (an envelope would compete with the stop's revisions).

Never in the way of an E-stop: :meth:`GhostReplay.offer` only stores a reference (constant time, a lock held for
an assignment); the frames are built and everything is published from the replay's own timer on the executor
(about 1 ms for a UR5 stop of 60 samples: frames and markers, measured), never on the trigger worker. Building
them reads only the model's constant parts (Pinocchio's ``difference``, a Data of its own for the worst case's
joints), so sharing the trigger worker's model is safe.
Sizes are capped by ``replay_max_points`` (frames and path points). The ROS-free part is ``views/replay.py``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
from sensor_msgs.msg import JointState
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes import graph
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes.markers import color_rgba, new_marker, point
from vtm_dynamics.views import palette
from vtm_dynamics.views.replay import ReplayFrames, ReplaySchedule, replay_frames

REPLAY_PARAMETERS = (
    P.ParameterSpec("replay_rate", 30.0, "Rate [Hz] of predicted_motion, the joint states that replay the latest "
                    "predicted stop for a ghost robot (robot_state_publisher with frame_prefix replay/); 0 turns "
                    "the replay off.", P.in_range(0.0, 100.0), read_only=True, constraint="0 .. 100 Hz"),
    P.ParameterSpec("replay_speed", 1.0, "Replay speed: 1 = true time, 0.1 = ten times slower.",
                    P.in_range(0.01, 1.0), read_only=True, constraint="0.01 .. 1"),
    P.ParameterSpec("replay_hold", 1.0, "Seconds the replay rests at the predicted rest pose before it starts "
                    "again.", P.in_range(0.0, 60.0), read_only=True, constraint="0 .. 60 s"),
    P.ParameterSpec("replay_keep", 10.0, "Seconds an E-stop prediction stays in the replay before continuous "
                    "predictions may replace it.", P.in_range(0.0, 3600.0), read_only=True,
                    constraint="0 .. 3600 s"),
    P.ParameterSpec("replay_max_points", 500, "Most frames of a replayed stop and most points of its TCP path "
                    "marker.", P.in_range(2, 10000), read_only=True, constraint="2 .. 10000"),
)
MARKER_NAMESPACES = ("replay_tcp_path", "replay_events", "replay_worst_rest")


class _Offer:
    __slots__ = ("robot", "result", "frame", "urgent", "worst_q", "waits_from")

    def __init__(self, robot: RobotModel, result: Any, frame: str, urgent: bool) -> None:
        self.robot, self.result, self.frame, self.urgent = robot, result, frame, urgent
        self.worst_q: np.ndarray | None = None
        self.waits_from: int | None = None  # the pass of the current replay in which it could first take over


def _rgba(rgb, a: float = 1.0) -> ColorRGBA:
    return color_rgba(*rgb, a)


def replay_markers(frames: ReplayFrames, frame_id: str, stamp: Any, width: float = 0.008) -> MarkerArray:
    """The MarkerArray of one replay (module docstring); ``width`` [m] of lines and size of dots."""
    out = MarkerArray()
    clear = Marker()
    clear.header.frame_id, clear.header.stamp, clear.action = frame_id, stamp, Marker.DELETEALL
    out.markers.append(clear)
    if frames.tcp_path is not None and len(frames.tcp_path):
        path = new_marker(frame_id, stamp, "replay_tcp_path", 0, Marker.LINE_STRIP)
        path.points = [point(p) for p in frames.tcp_path] * (2 if len(frames.tcp_path) == 1 else 1)
        path.scale.x = width
        path.color = _rgba(palette.UNSAFE if frames.not_valid else palette.TCP_PATH)
        out.markers.append(path)
    if frames.not_valid:  # a stop past a joint limit or cut off by the horizon must not pass for the robot's stop
        text = new_marker(frame_id, stamp, "replay_tcp_path", 1, Marker.TEXT_VIEW_FACING)
        anchor = frames.tcp_path[-1] if frames.tcp_path is not None and len(frames.tcp_path) else np.zeros(3)
        text.pose.position = point(np.asarray(anchor, dtype=float) + np.array([0.0, 0.0, 0.1]))
        text.scale.z = 0.05
        text.color = _rgba(palette.UNSAFE)
        text.text = frames.not_valid
        out.markers.append(text)
    if frames.events:
        dots = new_marker(frame_id, stamp, "replay_events", 0, Marker.SPHERE_LIST)
        dots.points = [point(p) for _, p in frames.events]
        dots.colors = [_rgba(palette.event_color(kind)) for kind, _ in frames.events]
        dots.scale.x = dots.scale.y = dots.scale.z = 3 * width
        dots.color = _rgba(palette.OTHER_EVENT)
        out.markers.append(dots)
    if frames.worst_points is not None:
        chain = new_marker(frame_id, stamp, "replay_worst_rest", 0, Marker.LINE_STRIP)
        chain.points = [point(p) for p in frames.worst_points]
        chain.scale.x = 1.5 * width
        chain.color = _rgba(palette.WORST, 0.8)
        joints = new_marker(frame_id, stamp, "replay_worst_rest", 1, Marker.SPHERE_LIST)
        joints.points = list(chain.points)
        joints.scale.x = joints.scale.y = joints.scale.z = 3 * width
        joints.color = _rgba(palette.WORST, 0.8)
        out.markers += [chain, joints]
    return out


class GhostReplay:
    """Publishers and timer of the replay on ``node`` with the ``REPLAY_PARAMETERS`` values in ``p``."""

    def __init__(self, node: Any, p: dict, log: Any, clock=time.monotonic) -> None:
        self.node, self.log, self.clock = node, log, clock
        self.speed, self.hold, self.keep = p["replay_speed"], p["replay_hold"], p["replay_keep"]
        self.max_points = int(p["replay_max_points"])
        self._lock = threading.Lock()
        self._pending: _Offer | None = None
        self._current: tuple[_Offer, ReplaySchedule, float] | None = None  # offer, schedule, start (clock)
        self._urgent_at = -float("inf")  # when the current E-stop replay began
        self._markers_at = -float("inf")
        self.builds = 0
        self.timer = None
        if p["replay_rate"] > 0:
            self.pub_joints = node.create_publisher(JointState, "predicted_motion", graph.OUTPUT_DEPTH)
            self.pub_markers = node.create_publisher(MarkerArray, "predicted_motion_markers", graph.OUTPUT_DEPTH)
            self.timer = node.create_timer(1.0 / p["replay_rate"], graph.guarded(log, "replay")(self._on_timer))

    # -------------------------------------------------------------------------------- called by the predictor
    def offer(self, robot: RobotModel, result: Any, frame: str, continuous: bool) -> None:
        """Hand over a published prediction (constant time; nothing is built here)."""
        if self.timer is None:
            return
        offer = _Offer(robot, result, frame, not continuous)
        with self._lock:
            if offer.urgent or self._pending is None or not self._pending.urgent:
                self._pending = offer

    def offer_worst(self, result: Any, worst_q: Any) -> None:
        """The envelope's worst-case rest configuration of the prediction ``result`` (same object as offered)."""
        with self._lock:
            for offer in (self._pending, self._current[0] if self._current else None):
                if offer is not None and offer.result is result:
                    offer.worst_q = np.asarray(worst_q, dtype=float)
                    self._markers_at = -float("inf")  # republish with the worst case

    # -------------------------------------------------------------------------------- on the timer
    def _take(self, now: float) -> _Offer | None:
        """The pending offer if it may replace the current replay now (module docstring)."""
        with self._lock:
            offer = self._pending
            if offer is None:
                return None
            if self._current is not None and not offer.urgent:
                current, schedule, start = self._current
                if current.urgent and now - self._urgent_at < self.keep:
                    return None
                passes = int((now - start) // schedule.period) if schedule.period > 0 else 0
                if offer.waits_from is None:
                    offer.waits_from = passes
                if passes <= offer.waits_from:  # the pass in progress is shown to its end
                    return None
            self._pending = None
            return offer

    def _on_timer(self) -> None:
        now = self.clock()
        offer = self._take(now)
        if offer is not None:
            frames = replay_frames(offer.robot, offer.result, worst_q=offer.worst_q, max_points=self.max_points)
            self.builds += 1
            self._current = (offer, ReplaySchedule(frames, self.speed, self.hold), now)
            if offer.urgent:
                self._urgent_at = now
            self._markers_at = -float("inf")
        if self._current is None:
            return
        offer, schedule, start = self._current
        if offer.worst_q is not None and schedule.frames.worst_positions is None:  # the worst case came later
            frames = replay_frames(offer.robot, offer.result, worst_q=offer.worst_q, max_points=self.max_points)
            schedule = ReplaySchedule(frames, self.speed, self.hold)
            self._current = (offer, schedule, start)
        stamp = self.node.get_clock().now().to_msg()
        msg = JointState()
        msg.header.stamp = stamp
        msg.name = list(schedule.frames.joint_names)
        msg.position = [float(x) for x in schedule.positions_at(now - start)]
        self.pub_joints.publish(msg)
        if now - self._markers_at >= schedule.period:
            self._markers_at = now
            self.pub_markers.publish(replay_markers(schedule.frames, offer.frame, stamp))

    def destroy(self) -> None:
        if self.timer is not None:
            self.node.destroy_timer(self.timer)
            self.timer = None
