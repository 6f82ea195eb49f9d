"""``estop_predictor`` node: live emergency-stop prediction on a joint-state stream.

Inputs
  ``robot_description``  std_msgs/String, transient-local (the ROS 2 convention); or the ``urdf_path`` / ``robot``
                         parameter. A valid description received later replaces the model; an invalid one is
                         logged and ignored (the current model stays).
  ``joint_states``       sensor_msgs/JointState, joints matched by NAME; malformed messages (NaN, arrays whose
                         lengths do not match ``name``) are logged and dropped; unknown names are logged once and
                         ignored. Without velocities, velocities are estimated by backward differences (logged).
  ``estop``              std_msgs/Bool: the E-stop line. The rising edge (true after false / first true) fires a
                         prediction from the newest joint state; false re-arms. Repeated true is ignored.
  ``brake_events``       vtm_msgs/BrakeEvent: ENGAGE fires a prediction too (``trigger_on_brake_event``), from the
                         joint state whose stamp is nearest to the event stamp (the E-stop instant); its per-joint
                         arrays override the configured brakes (NaN / empty = configured value). An ENGAGE during
                         an ongoing stop that changes the inputs publishes a revised prediction. RELEASE re-arms.
  ``lock_events``        vtm_msgs/LockEvent: logged; a LOCK during a stop of joints that the current prediction
                         still has moving at the lock's stamp publishes a revised prediction with that abrupt
                         lock (momentum-consistent jump); locks of joints already at rest change nothing.
Events naming unknown joints are logged and those names ignored. A flood of events is bounded: each event topic
has a bounded DDS queue (``event_queue_depth``) and a token bucket (``event_rate_limit`` per second,
``event_burst``); events beyond it are dropped and counted in a periodic warning.

Outputs (on a trigger, and at ``continuous_rate`` Hz when > 0: "where would it stop if the E-stop fired now")
  ``predicted_trajectory``   trajectory_msgs/JointTrajectory (time from the E-stop instant)
  ``stop_prediction``        vtm_msgs/StopPrediction (``scenario_id`` "estop-<n>", "estop-<n>-rev<k>" or "continuous")
  ``joint_reactions``        vtm_msgs/JointReactions at rest
  ``stop_markers``           visualization_msgs/MarkerArray (see ``markers``)
  ``predicted_joint_states`` sensor_msgs/JointState of the predicted rest pose (for a ghost robot_state_publisher
                             with ``frame_prefix: ghost/``), republished at ``ghost_rate`` Hz
Service ``predict_stop`` (vtm_msgs/PredictStop): on-demand prediction from a given state; publishes nothing.

The physics is ``vtm_dynamics.core.estop``; this node converts messages and calls it.
"""

from __future__ import annotations


import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray
from vtm_msgs.msg import BrakeEvent, JointReactions, LockEvent, StopPrediction
from vtm_msgs.srv import PredictStop

from vtm_dynamics.core.robot.model import ModelError, RobotModel
from vtm_dynamics.nodes import graph
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes import prediction_io as io
from vtm_dynamics.nodes.conversions import (
    JointStateError,
    JointStateSnapshot,
    JointStateTracker,
    UnsupportedJointError,
    joint_state_message,
    parse_joint_state,
    seconds_to_stamp,
    stamp_to_seconds,
)
from vtm_dynamics.nodes.markers import MarkerScales
from vtm_dynamics.nodes.model_source import default_tcp_frame, load_urdf_text, model_from_urdf_text
from vtm_dynamics.nodes.node_main import run_node

NODE_NAME = "estop_predictor"
STAMP_TOL = 2e-6  # [s] stamps as float seconds since 1970 resolve about 0.24 us

PARAMETERS = (
    P.ParameterSpec("robot", "", "Robot shipped with the package (ur5 | planar_3r); empty: use urdf_path or the "
                    "robot_description topic.", P.one_of(("", "ur5", "planar_3r")), read_only=True,
                    constraint="one of '', 'ur5', 'planar_3r'"),
    P.ParameterSpec("urdf_path", "", "URDF file of the robot; overrides 'robot'. Empty: 'robot' or the "
                    "robot_description topic.", P.existing_file_or_empty, read_only=True,
                    constraint="an existing file or empty"),
    P.ParameterSpec("robot_description_topic", "robot_description", "Topic of the URDF text (std_msgs/String, "
                    "transient local); a valid description received replaces the model. Empty: do not subscribe.",
                    read_only=True),
    P.ParameterSpec("brake_config", "", "Brake YAML file (vtm_dynamics.core.estop.brakes format). Empty: "
                    "config/<robot>_brakes.yaml of the package.", P.existing_file_or_empty,
                    constraint="an existing file or empty; must name joints of the model"),
    P.ParameterSpec("stop_category", 0, "IEC 60204-1 stop category predicted on a trigger: 0 (drive power removed, "
                    "brakes) or 1 (controlled deceleration, then brakes).", P.one_of((0, 1)),
                    constraint="0 or 1"),
    P.ParameterSpec("tcp_frame", "", "Frame whose stopping distance is reported and drawn. Empty: tool0 or the "
                    "robot's tool frame.", constraint="a frame of the model or empty"),
    P.ParameterSpec("horizon", 5.0, "Maximum predicted time after the E-stop [s].", P.all_of(P.positive,
                    P.in_range(0.0, 600.0)), constraint="0 < horizon <= 600 s"),
    P.ParameterSpec("integration_step", 0.004, "RK4 step of the prediction between events [s] (events are located "
                    "exactly inside steps).", P.in_range(1e-6, 0.1),
                    constraint="1e-6 .. 0.1 s"),
    P.ParameterSpec("category1_deceleration", 3.0, "Category 1: joint deceleration limit of the controlled ramp "
                    "[rad/s^2].", P.positive, constraint="> 0 rad/s^2"),
    P.ParameterSpec("continuous_rate", 0.0, "Rate [Hz] of continuous 'if the E-stop fired now' predictions while "
                    "no stop is active; 0 disables.", P.in_range(0.0, 1000.0),
                    constraint="0 <= rate <= 1000 Hz"),
    P.ParameterSpec("max_trajectory_points", 200, "Most points in the published JointTrajectory (evenly "
                    "subsampled, first and last kept).", P.in_range(2, 100000),
                    constraint="2 .. 100000"),
    P.ParameterSpec("max_state_age", 0.5, "A prediction needs a joint state received at most this long [s] "
                    "before the trigger; older: the prediction is refused with success=false.", P.positive,
                    constraint="> 0 s"),
    P.ParameterSpec("state_wait_timeout", 0.05, "After a stamped trigger (BrakeEvent), wait at most this long [s] "
                    "for a joint state stamped at or after the E-stop instant before predicting from the newest "
                    "one.", P.in_range(0.0, 1.0), constraint="0 .. 1 s"),
    P.ParameterSpec("trigger_on_brake_event", True, "A BrakeEvent ENGAGE fires a prediction like the estop topic."),
    P.ParameterSpec("event_queue_depth", 50, "DDS history depth of the event subscriptions (bounded queue).",
                    P.in_range(1, 10000), read_only=True, constraint="1 .. 10000"),
    P.ParameterSpec("event_rate_limit", 50.0, "Events (brake, lock, trigger) accepted per second per topic; "
                    "excess events are dropped and counted.", P.positive, constraint="> 0 per s"),
    P.ParameterSpec("event_burst", 20, "Token-bucket burst size of the event rate limit.", P.in_range(1, 100000), constraint="1 .. 100000"),
    P.ParameterSpec("ghost_rate", 10.0, "Rate [Hz] at which the predicted rest pose is republished on "
                    "predicted_joint_states (keeps the ghost's TF fresh); 0: publish once per prediction.",
                    P.in_range(0.0, 1000.0), constraint="0 .. 1000 Hz"),
    P.ParameterSpec("marker_force_scale", 0.002, "Length of reaction-force arrows per newton [m/N].", P.positive,
                    constraint="> 0"),
    P.ParameterSpec("marker_torque_scale", 0.005, "Length of holding-torque arrows per newton metre [m/(N m)].",
                    P.positive, constraint="> 0"),
    P.ParameterSpec("frame_id", "", "Fixed frame of markers and TCP positions. Empty: the URDF root link."),
)


class TokenBucket:
    """At most ``rate`` events per second on average with bursts of ``burst``; counts what it drops."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = float(rate), int(burst), clock
        self.tokens = float(burst)
        self.last = clock()
        self.dropped = 0

    def allow(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        self.dropped += 1
        return False


class OnceLog:
    """Logs each distinct problem once per ``period`` seconds and counts repeats, so floods cannot flood the log."""

    def __init__(self, logger: Any, period: float = 5.0) -> None:
        self.logger, self.period = logger, period
        self._last: dict[str, float] = {}
        self._repeats: dict[str, int] = {}

    def __call__(self, level: str, key: str, text: str) -> None:
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.period:
            self._repeats[key] = self._repeats.get(key, 0) + 1
            return
        repeats = self._repeats.pop(key, 0)
        suffix = f" ({repeats} similar messages suppressed)" if repeats else ""
        self._last[key] = now
        # rclpy fixes the severity per call site, so each level has its own call
        if level == "error":
            self.logger.error(text + suffix)
        elif level == "warning":
            self.logger.warning(text + suffix)
        else:
            self.logger.info(text + suffix)


@dataclass
class _Stop:
    """An E-stop in progress: its number, instant (stamp seconds, or None), inputs used, prediction revisions."""

    number: int
    instant: float | None
    wall: float  # monotonic time of the trigger (of the revision, for a revision)
    overrides: dict
    locks: list
    revision: int = 0
    predicted: bool = False
    used_state_stamp: float | None = None
    result: Any = None
    first_wall: float = 0.0  # monotonic time of the first trigger of this stop


class EstopPredictor(Node):
    """See the module docstring. Build with ``EstopPredictor(parameter_overrides=[...])`` or from ROS args."""

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(NODE_NAME, **node_kwargs)
        self.log = OnceLog(self.get_logger())
        self.p = P.declare_validated(self, PARAMETERS, self._on_parameters)
        self.robot: RobotModel | None = None
        self.robot_name = self.p["robot"]
        self.model_text = ""
        self.tracker: JointStateTracker | None = None
        self.brakes = None
        self.brake_error = "no robot model yet (waiting for robot_description)"
        self.history: deque[JointStateSnapshot] = deque(maxlen=400)  # complete states, oldest first
        self.received: dict[int, float] = {}  # id(snapshot) -> monotonic receipt time
        self.estop_line = False
        self.stop: _Stop | None = None
        self.stops = 0
        self.pending: _Stop | None = None
        self.last_result: Any = None
        self.last_prediction: StopPrediction | None = None
        self.ghost: JointState | None = None
        self.stats = {"joint_states_ok": 0, "joint_states_rejected": 0, "predictions": 0, "events_dropped": 0}
        self.buckets = {k: TokenBucket(self.p["event_rate_limit"], self.p["event_burst"])
                        for k in ("brake_events", "lock_events", "estop")}
        self.latencies: list[float] = []

        text = load_urdf_text(self.p["robot"], self.p["urdf_path"])
        if text:
            self._set_model(text, source=self.p["urdf_path"] or f"robot {self.p['robot']!r}")

        depth = self.p["event_queue_depth"]
        events_qos = graph.events_qos(depth)
        latched = graph.LATCHED
        if self.p["robot_description_topic"]:
            self.create_subscription(String, self.p["robot_description_topic"], self._on_description, latched)
        self.create_subscription(JointState, "joint_states", self._on_joint_state, graph.sensor_qos(20))
        self.create_subscription(Bool, "estop", self._on_estop, events_qos)
        self.create_subscription(BrakeEvent, "brake_events", self._on_brake_event, events_qos)
        self.create_subscription(LockEvent, "lock_events", self._on_lock_event, events_qos)
        self.pub_traj = self.create_publisher(JointTrajectory, "predicted_trajectory", 10)
        self.pub_pred = self.create_publisher(StopPrediction, "stop_prediction", 10)
        self.pub_react = self.create_publisher(JointReactions, "joint_reactions", 10)
        self.pub_markers = self.create_publisher(MarkerArray, "stop_markers", 10)
        self.pub_ghost = self.create_publisher(JointState, "predicted_joint_states", 10)
        self.create_service(PredictStop, "predict_stop", self._on_predict_stop)
        self.housekeeping = self.create_timer(0.005, self._on_housekeeping)  # runs only while a trigger waits
        self.housekeeping.cancel()
        self.continuous_timer = None
        self.ghost_timer = None
        self._make_timers()
        self.get_logger().info(
            f"estop_predictor ready: model {self.robot.name if self.robot else '(waiting for robot_description)'}, "
            f"stop category {self.p['stop_category']}, continuous_rate {self.p['continuous_rate']} Hz"
        )

    # ================================================================== parameters
    def _on_parameters(self, changes: dict[str, Any]) -> None:
        """Apply validated runtime changes; raise ValueError to reject a combination the node cannot use."""
        if "brake_config" in changes and self.robot is not None:
            io.load_brakes(self.robot, changes["brake_config"], self.robot_name)  # raises BrakeConfigError
        if "tcp_frame" in changes and changes["tcp_frame"] and self.robot is not None:
            if not self.robot.model.existFrame(changes["tcp_frame"]):
                raise ValueError(f"tcp_frame: {changes['tcp_frame']!r} is not a frame of {self.robot.name!r}")
        self.p.update(changes)
        if "brake_config" in changes and self.robot is not None:
            self._reload_brakes()
        if {"event_rate_limit", "event_burst"} & set(changes):
            for b in self.buckets.values():
                b.rate, b.burst = self.p["event_rate_limit"], self.p["event_burst"]
        if {"continuous_rate", "ghost_rate"} & set(changes):
            self._make_timers()

    def _make_timers(self) -> None:
        for name in ("continuous_timer", "ghost_timer"):
            timer = getattr(self, name)
            if timer is not None:
                self.destroy_timer(timer)
                setattr(self, name, None)
        if self.p["continuous_rate"] > 0:
            self.continuous_timer = self.create_timer(1.0 / self.p["continuous_rate"], self._on_continuous)
        if self.p["ghost_rate"] > 0:
            self.ghost_timer = self.create_timer(1.0 / self.p["ghost_rate"], self._on_ghost)

    # ================================================================== model
    def _set_model(self, text: str, source: str) -> None:
        try:
            robot = model_from_urdf_text(text)
            tracker = JointStateTracker(robot)
        except (ModelError, UnsupportedJointError) as err:
            if self.robot is None:
                raise
            self.log("error", f"model-{err}", f"{source}: invalid robot description ignored ({err}); keeping model "
                                       f"{self.robot.name!r}")
            return
        if self.p["tcp_frame"] and not robot.model.existFrame(self.p["tcp_frame"]):
            self.get_logger().warning(f"tcp_frame {self.p['tcp_frame']!r} is not in model {robot.name!r}; using "
                                      f"{default_tcp_frame(robot, self.robot_name)!r}")
        self.robot, self.tracker, self.model_text = robot, tracker, text
        self.history.clear()
        self.received.clear()
        self.ghost = None
        self._reload_brakes()
        self.get_logger().info(f"model {robot.name!r} from {source}: joints {list(robot.joint_names)}")

    def _reload_brakes(self) -> None:
        try:
            self.brakes = io.load_brakes(self.robot, self.p["brake_config"], self.robot_name)
            self.brake_error = ""
        except ValueError as err:
            self.brakes = None
            self.brake_error = str(err)
            self.log("error", "brakes", f"brake configuration unusable, predictions refused: {err}")

    def _on_description(self, msg: String) -> None:
        if msg.data == self.model_text:
            return
        try:
            self._set_model(msg.data, "robot_description")
        except (ModelError, UnsupportedJointError) as err:
            self.log("error", f"model-{err}", f"robot_description: invalid robot description ignored ({err}); no model yet")

    def tcp_frame(self) -> str:
        f = self.p["tcp_frame"]
        return f if f and self.robot.model.existFrame(f) else default_tcp_frame(self.robot, self.robot_name)

    # ================================================================== inputs
    def _on_joint_state(self, msg: JointState) -> None:
        if self.tracker is None:
            self.log("warning", "js-nomodel", "joint_states: ignored until a robot model is known")
            return
        try:
            parsed = self.tracker.update(msg)
        except JointStateError as err:
            self.stats["joint_states_rejected"] += 1
            self.log("warning", f"js-{str(err).split(':')[0]}", f"joint_states: message dropped: {err}")
            return
        self.stats["joint_states_ok"] += 1
        if parsed.unknown_names:
            self.log("warning", "js-unknown-" + ",".join(parsed.unknown_names),
                     f"joint_states: ignoring joints not in model {self.robot.name!r}: {list(parsed.unknown_names)}")
        if parsed.velocities is None:
            self.log("warning", "js-novel", "joint_states: no velocities in the message; estimating them by "
                                            "backward differences of positions")
        if not self.tracker.missing:
            if len(self.history) == self.history.maxlen:
                self.received.pop(id(self.history[0]), None)
            snap = self.tracker.snapshot()
            self.history.append(snap)
            self.received[id(snap)] = time.monotonic()
        if self.pending is not None:
            self._try_pending()

    def _allow(self, topic: str) -> bool:
        if self.buckets[topic].allow():
            return True
        self.stats["events_dropped"] += 1
        self.log("warning", f"flood-{topic}", f"{topic}: event flood, dropping events beyond "
                 f"{self.p['event_rate_limit']:g}/s (burst {self.p['event_burst']}); {self.buckets[topic].dropped} "
                 "dropped so far")
        return False

    def _known(self, names: list[str], topic: str) -> list[str]:
        if self.robot is None:
            return []
        known = [n for n in names if n in self.robot.joint_names]
        unknown = [n for n in names if n not in self.robot.joint_names]
        if unknown:
            self.log("warning", f"{topic}-unknown-{','.join(unknown)}",
                     f"{topic}: ignoring unknown joints {unknown} (model {self.robot.name!r} has "
                     f"{list(self.robot.joint_names)})")
        return known

    def _on_estop(self, msg: Bool) -> None:
        if not self._allow("estop"):
            return
        rising = bool(msg.data) and not self.estop_line
        self.estop_line = bool(msg.data)
        if not msg.data:
            if self.stop is not None:
                self.get_logger().info(f"E-stop {self.stop.number} released: re-armed")
            self.stop = None
            return
        if rising and self.stop is None:
            self._begin_stop(instant=None, overrides={}, source="estop topic")

    def _on_brake_event(self, msg: BrakeEvent) -> None:
        if not self._allow("brake_events"):
            return
        if self.robot is None:
            self.log("warning", "be-nomodel", "brake_events: ignored until a robot model is known")
            return
        names = self._known(list(msg.joint_names), "brake_events")
        if msg.action == BrakeEvent.RELEASE:
            if self.stop is not None:
                self.get_logger().info(f"brakes released: E-stop {self.stop.number} ended, re-armed")
            self.stop = None
            self.estop_line = False
            return
        if msg.action != BrakeEvent.ENGAGE:
            self.log("warning", "be-action", f"brake_events: unknown action {msg.action} ignored")
            return
        try:
            overrides = io.brake_overrides(msg, names)
        except ValueError as err:
            self.log("warning", "be-bad", f"brake_events: event dropped: {err}")
            return
        instant = stamp_to_seconds(msg.header.stamp)
        instant = instant if instant > 0 else None
        if self.stop is None:
            if self.p["trigger_on_brake_event"]:
                self._begin_stop(instant, overrides, source="brake event")
            return
        # during a stop: a revision when it brings new brake values or the instant the prediction lacked
        stop = self.stop
        changed = bool(overrides) and {**stop.overrides, **overrides} != stop.overrides
        new_instant = instant is not None and stop.instant is None
        if new_instant:
            stop.instant = instant
        if not stop.predicted:
            stop.overrides = {**stop.overrides, **overrides}  # still pending: the first prediction uses them
            return
        state_differs = new_instant and (stop.used_state_stamp is None or
                                         abs(stop.used_state_stamp - instant) > STAMP_TOL)
        if changed or state_differs:
            stop.overrides = {**stop.overrides, **overrides}
            stop.revision += 1
            self._schedule(stop)

    def _on_lock_event(self, msg: LockEvent) -> None:
        if not self._allow("lock_events"):
            return
        names = self._known(list(msg.joint_names), "lock_events")
        if not names:
            return
        action = {LockEvent.LOCK: "LOCK", LockEvent.UNLOCK: "UNLOCK"}.get(msg.action)
        if action is None:
            self.log("warning", "le-action", f"lock_events: unknown action {msg.action} ignored")
            return
        t = stamp_to_seconds(msg.header.stamp)
        stop = self.stop
        self.get_logger().info(f"lock event {action} {names} ({msg.source or 'no source'})"
                               + (f" during E-stop {stop.number}" if stop else ""))
        if stop is None or action != "LOCK" or not stop.predicted or stop.result is None:
            return
        # a lock of joints that the current prediction still has moving at that instant changes the stop: revise it
        # with an abrupt lock (momentum-consistent jump in the core); locks of joints already at rest change nothing
        origin = stop.instant if stop.instant is not None else stop.used_state_stamp
        t_rel = t - origin
        if t_rel < -STAMP_TOL:
            self.log("warning", "le-early", f"lock_events: LOCK stamped {-t_rel:.4f} s before the E-stop ignored")
            return
        idx = [self.robot.joint(n).idx_v for n in names]
        moving = [n for n, i in zip(names, idx) if not (stop.result.joint_stop_times[i] <= t_rel + 1e-6)]
        if moving:
            stop.locks.append(io.estop.LockEvent(max(t_rel, 0.0), tuple(names)))
            stop.revision += 1
            self._schedule(stop)

    # ================================================================== triggers
    def _begin_stop(self, instant: float | None, overrides: dict, source: str) -> None:
        self.stops += 1
        now = time.monotonic()
        self.stop = _Stop(self.stops, instant, now, overrides, [], first_wall=now)
        self.get_logger().info(f"E-stop {self.stops} triggered by {source}")
        self._schedule(self.stop)

    def _schedule(self, stop: _Stop) -> None:
        stop.wall = time.monotonic() if stop.revision else stop.wall
        self.pending = stop
        self._try_pending()
        if self.pending is not None:
            self.housekeeping.reset()

    def _on_housekeeping(self) -> None:
        if self.pending is not None:
            self._try_pending()
        if self.pending is None:
            self.housekeeping.cancel()

    def _select_state(self, instant: float | None) -> tuple[JointStateSnapshot | None, bool]:
        """(state, final): the state to predict from and whether waiting longer could give a better one."""
        if not self.history:
            return None, False
        newest = self.history[-1]
        if instant is None:
            return newest, True
        if newest.stamp < instant - STAMP_TOL:
            return newest, False
        candidates = [s for s in self.history if s.stamp <= instant + STAMP_TOL]
        if not candidates:
            return min(self.history, key=lambda s: abs(s.stamp - instant)), True
        return max(candidates, key=lambda s: s.stamp), True

    def _try_pending(self) -> None:
        stop = self.pending
        if stop is None:
            return
        state, final = self._select_state(stop.instant)
        waited = time.monotonic() - stop.wall
        if not final and waited < self.p["state_wait_timeout"]:
            return
        self.pending = None
        scenario = f"estop-{stop.number}" + (f"-rev{stop.revision}" if stop.revision else "")
        if state is None:
            self._publish_failure(scenario, "no complete joint state received yet")
            return
        # how old the state was when the E-stop was triggered (not now: a revision may come much later)
        age = max(0.0, stop.first_wall - self.received.get(id(state), stop.first_wall))
        if age > self.p["max_state_age"]:
            self._publish_failure(scenario, f"newest joint state was {age:.3f} s old at the trigger (max_state_age "
                                            f"{self.p['max_state_age']} s)")
            return
        stop.used_state_stamp = state.stamp
        stop.result = self.predict_and_publish(state, scenario, stop.instant if stop.instant is not None else
                                               state.stamp, stop.overrides, trigger_wall=stop.wall, locks=stop.locks)
        stop.predicted = True

    def _on_continuous(self) -> None:
        if self.stop is not None or self.pending is not None or not self.history or self.robot is None:
            return
        if time.monotonic() - self.received.get(id(self.history[-1]), 0.0) > self.p["max_state_age"]:
            return
        state = self.history[-1]
        self.predict_and_publish(state, "continuous", state.stamp, {}, trigger_wall=None)

    def _on_ghost(self) -> None:
        if self.ghost is not None:
            self.ghost.header.stamp = self.get_clock().now().to_msg()
            self.pub_ghost.publish(self.ghost)

    # ================================================================== prediction
    def predict(self, state: JointStateSnapshot, overrides: dict, category: int | None = None,
                tcp_frame: str | None = None, horizon: float | None = None, brakes: Any = None,
                locks: Any = ()) -> Any:
        """Call the core prediction for ``state`` (raises ValueError with a one-line reason)."""
        if self.robot is None:
            raise ValueError("no robot model yet (waiting for robot_description)")
        base = brakes if brakes is not None else self.brakes
        if base is None:
            raise ValueError(self.brake_error)
        return io.predict_stop(
            self.robot, base if not overrides else io.apply_overrides(self.robot, base, overrides), state.q, state.v,
            category=self.p["stop_category"] if category is None else category,
            tcp_frame=tcp_frame or self.tcp_frame(), horizon=horizon or self.p["horizon"],
            step=self.p["integration_step"], deceleration=self.p["category1_deceleration"], lock_events=locks,
        )

    def predict_and_publish(self, state: JointStateSnapshot, scenario: str, instant: float, overrides: dict,
                            trigger_wall: float | None, locks: Any = ()) -> Any:
        """Predict from ``state`` and publish every output; returns the core result (None on failure)."""
        stamp = seconds_to_stamp(instant)
        try:
            result = self.predict(state, overrides, locks=tuple(locks))
        except ValueError as err:
            self._publish_failure(scenario, str(err))
            return None
        frame = self.p["frame_id"] or io.root_frame_of(self.robot)
        pred = io.stop_prediction_message(self.robot, result, stamp, frame, scenario, self.p["stop_category"],
                                          self.p["max_trajectory_points"])
        reactions = io.joint_reactions_message(self.robot, result, stamp)
        self.pub_pred.publish(pred)
        if trigger_wall is not None:
            self.latencies.append(time.monotonic() - trigger_wall)
        self.pub_traj.publish(pred.trajectory)
        self.pub_react.publish(reactions)
        scales = MarkerScales(force_scale=self.p["marker_force_scale"], torque_scale=self.p["marker_torque_scale"])
        self.pub_markers.publish(io.stop_markers_message(self.robot, result, stamp, frame, scales))
        self.ghost = joint_state_message(self.robot.joint_names, io.rest_positions(self.robot, result),
                                         [0.0] * self.robot.nv, stamp=stamp)
        self.pub_ghost.publish(self.ghost)
        self.last_result, self.last_prediction = result, pred
        self.stats["predictions"] += 1
        if scenario != "continuous":
            self.get_logger().info(
                f"{scenario}: predicted stop after {io.stop_time(result):.3f} s, TCP {pred.tcp_frame} path "
                f"{pred.tcp_path_length:.3f} m (straight {pred.tcp_straight_distance:.3f} m), {len(pred.events)} events"
                + (f" [velocities estimated for {list(state.estimated_velocity)}]" if state.estimated_velocity else "")
            )
        return result

    def _publish_failure(self, scenario: str, reason: str) -> None:
        msg = StopPrediction()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.model_name = self.robot.name if self.robot else ""
        msg.scenario_id = scenario
        msg.stop_category = self.p["stop_category"]
        msg.success = False
        msg.message = reason
        self.pub_pred.publish(msg)
        self.log("error", f"fail-{reason[:40]}", f"{scenario}: no prediction: {reason}")

    def _on_predict_stop(self, request: PredictStop.Request, response: PredictStop.Response) -> PredictStop.Response:
        try:
            if self.robot is None:
                raise ValueError("no robot model yet (waiting for robot_description)")
            parsed = parse_joint_state(request.state, self.robot.joint_names)
            missing = [n for n in self.robot.joint_names if n not in parsed.positions]
            if missing:
                raise ValueError(f"state.name: missing joints {missing}")
            if parsed.velocities is None:
                raise ValueError("state.velocity: required (one per joint)")
            if request.stop_category not in (0, 1):
                raise ValueError(f"stop_category: must be 0 or 1, got {request.stop_category}")
            if request.tcp_frame and not self.robot.model.existFrame(request.tcp_frame):
                raise ValueError(f"tcp_frame: {request.tcp_frame!r} is not a frame of {self.robot.name!r}")
            if not (math.isfinite(request.horizon) and request.horizon >= 0):
                raise ValueError(f"horizon: must be >= 0, got {request.horizon}")
            brakes = io.brakes_from_yaml_text(self.robot, request.brake_config_yaml) if request.brake_config_yaml else None
            positions = np.array([parsed.positions[n] for n in self.robot.joint_names])
            v = np.array([parsed.velocities[n] for n in self.robot.joint_names])
            state = io.snapshot(self.robot, parsed.stamp, positions, v)
            result = self.predict(state, {}, category=request.stop_category, tcp_frame=request.tcp_frame or None,
                                  horizon=request.horizon or None, brakes=brakes)
        except (ValueError, JointStateError) as err:
            response.success = False
            response.message = str(err)
            response.prediction.success = False
            response.prediction.message = str(err)
            return response
        stamp = request.state.header.stamp
        frame = self.p["frame_id"] or io.root_frame_of(self.robot)
        response.prediction = io.stop_prediction_message(self.robot, result, stamp, frame, "service",
                                                         request.stop_category, self.p["max_trajectory_points"])
        response.reactions_at_rest = io.joint_reactions_message(self.robot, result, stamp)
        response.success = True
        response.message = "ok"
        return response


def main(args: list[str] | None = None) -> int:
    return run_node("estop_predictor", EstopPredictor, (P.ParameterError, ModelError, UnsupportedJointError), args)


if __name__ == "__main__":
    raise SystemExit(main())
