"""``estop_predictor`` node: live emergency-stop prediction on a joint-state stream.

Inputs
  ``robot_description``  std_msgs/String, transient-local (the ROS 2 convention), URDF XML text only (never a
                         path); or the ``urdf_path`` / ``robot`` parameter. The first valid description sets the
                         model. After that a different description is accepted only if ``allow_model_replacement``
                         is true AND it has the same joint names; otherwise it is ignored with one log line and a
                         WARN on ``/diagnostics``. A description identical to the current one is a no-op. Parsing
                         runs on the worker thread, never on the callback thread.
  ``joint_states``       sensor_msgs/JointState (best effort: reliable and sensor-data publishers both match),
                         joints matched by NAME; malformed messages are logged and dropped; a state stamped more
                         than ``future_stamp_tolerance`` ahead of the node clock is rejected on receipt. A zero
                         stamp is replaced by the receipt instant. Without velocities, velocities are estimated by
                         the tracker and every prediction from such a state says ``velocities_estimated``.
  ``estop``              the E-stop line, per publisher (``stop_session`` docstring): by default std_msgs/Bool,
                         ``data`` true means stopping; topic, type (``<package>/msg/<Type>``, resolved at start-up),
                         field and the values meaning stopping are the ``trigger_*`` parameters (e.g. a UR driver's
                         SafetyMode ``mode`` in {ROBOT_EMERGENCY_STOP, SYSTEM_EMERGENCY_STOP}); a type or field
                         that does not exist makes the node refuse to start with one line. A stopping message
                         from a publisher whose previous value was not stopping (or that is new) is a rising edge
                         and fires a prediction from the newest state *received before the message was received*;
                         the stop ends when no publisher holds the line any more - only a holder's own "not
                         stopping" releases it, never the eviction of its entry (``estop_line``).
  ``brake_events``       vtm_msgs/BrakeEvent: ENGAGE fires a prediction too (``trigger_on_brake_event``), from the
                         state stamped at or just before the event stamp (the E-stop instant; one stamped closer
                         to it that arrives only after the prediction revises it); its per-joint arrays
                         override the configured brakes (NaN / empty = configured value; ``engage_delay`` at most
                         ``max_engage_delay``). An ENGAGE during a stop that changes the inputs revises the
                         prediction. RELEASE ends the stop.
  ``lock_events``        vtm_msgs/LockEvent: a LOCK during a stop of joints the current prediction still has moving
                         at the lock's stamp revises the prediction with that abrupt lock.
With ``event_thread`` (default) the ``estop``, ``brake_events`` and ``lock_events`` subscriptions belong to a helper
node ``<name>_events`` spun by its own executor thread, so floods on the other inputs never queue before a trigger.
Triggers and events are never rate-limited or dropped by the node (a deep reliable queue, ``event_queue_depth``,
and cheap callbacks); the WORK they cause is merged: while a prediction runs, further revisions of the same stop
collapse into one, at most ``event_rate_limit`` revision predictions per second (burst ``event_burst``).

Work and priorities
  E-stop predictions run on a dedicated trigger worker thread (its own copy of the model); service requests,
  continuous predictions and model parsing run on a second worker (another copy), which pauses while E-stop work
  is due. So a service call or a continuous prediction never delays a trigger, and the callback thread only
  records inputs. Every prediction is
  bounded: ``horizon`` (service: at most ``max_horizon``), ``max_engage_delay``; one that still takes longer than
  ``prediction_deadline`` is published as ``success=false`` naming the deadline.

Parameters: read-only after start-up except the marker scales (``parameter_policy``; docs/ros.md lists why).

Continuous mode (``live_freshness``, ``work_priority``): every continuous output carries the age of its input at
publication and is success=false beyond ``max_start_state_age``; none is published once a trigger has come; the
achieved rate is on /diagnostics; continuous work, services and model parsing pause while E-stop work is due.

Outputs (on a trigger, and at ``continuous_rate`` Hz when > 0: "where would it stop if the E-stop fired now")
  ``predicted_trajectory``   trajectory_msgs/JointTrajectory (time from the E-stop instant)
  ``stop_prediction``        vtm_msgs/StopPrediction (``scenario_id`` "estop-<n>", "estop-<n>-rev<k>" or
                             "continuous"; ``model_name``/``model_hash``; start state stamp and age;
                             ``velocities_estimated``; ``revision``; the last revision is republished with
                             ``final`` true when the stop ends)
  ``joint_reactions``        vtm_msgs/JointReactions at rest
  ``stop_markers``           visualization_msgs/MarkerArray (see ``markers``)
  ``predicted_joint_states`` sensor_msgs/JointState of the predicted rest pose (ghost robot), at ``ghost_rate`` Hz
  ``stopping_distance``      vtm_msgs/StoppingDistance with each continuous prediction: TCP stopping distance and
                             time if the E-stop fired now, nominal and the envelope's worst case (``live_stopping``)
  ``/diagnostics``           diagnostic_msgs/DiagnosticArray at ``diagnostics_rate`` Hz: model name/hash, newest
                             joint-state age, last prediction, counts of triggers, predictions, refused work and
                             rejected inputs
Service ``predict_stop`` (vtm_msgs/PredictStop): on-demand prediction from a given state; publishes nothing; the
request is answered from the second worker (horizon capped by ``max_horizon``; any error: ``success=false``).

The physics is ``vtm_dynamics.core.estop``; the stop rules are ``stop_session``; this node converts messages,
moves work to the workers and calls them.

Size: about 1150 lines: one node class still holds the parameters, the model load/replace policy, the receipt
clocks, the state intake, the trigger and brake events, the trigger worker, the prediction call with its five
outputs, continuous mode and the diagnostics; they are to become ROS-free parts like ``stop_session``.
"""

from __future__ import annotations

import copy
import hashlib
import math
import queue
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, ShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray
from vtm_msgs.msg import BrakeEvent, JointReactions, LockEvent, StopPrediction
from vtm_msgs.srv import PredictStop

from vtm_dynamics.core.estop.warm_up import warm_up
from vtm_dynamics.core.estop import CategoryOne, StopSettings, predict_stop
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.defaults import CATEGORY, CATEGORY1_DECELERATION, HORIZON, INTEGRATION_STEP
from vtm_dynamics.core.excerpt import excerpt_list
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
from vtm_dynamics.nodes.ghost_replay import REPLAY_PARAMETERS, GhostReplay
from vtm_dynamics.nodes.markers import MarkerScales
from vtm_dynamics.nodes.model_source import ROBOT_NAMES, default_tcp_frame, load_urdf_text, model_from_urdf_text
from vtm_dynamics.nodes.live_freshness import ContinuousGate, RateMonitor, input_age, stale_reason
from vtm_dynamics.nodes.live_stopping import LIVE_PARAMETERS, LiveStopping, StoppingDistance
from vtm_dynamics.nodes.live_stopping import stopping_distance_message as io_stopping_message
from vtm_dynamics.nodes.node_main import run_node
from vtm_dynamics.nodes.trigger_source import trigger_source
from vtm_dynamics.nodes.work_priority import UrgentWork
from vtm_dynamics.recordings.trigger import TriggerConfigError, rule_from_parameters
from vtm_dynamics.nodes.stop_session import (
    STAMP_TOL,
    EstopLine,
    StartChoice,
    StartLimits,
    StateHistory,
    StateSample,
    StopJob,
    StopSession,
    choose_start_state,
)

NODE_NAME = "estop_predictor"
SWITCH_INTERVAL = 2e-4  # [s] Python thread switch interval while the node runs
WATCHDOG_PERIOD = 0.05  # [s] granularity of the prediction_deadline check
HISTORY_LENGTH = 2000  # complete joint states kept (4 s at 500 Hz: a trigger served late still finds its state)
#: Why the marker scales may change at run time (the only parameters of this node that may).
MARKERS_ONLY = ("drawing only: the arrow lengths of stop_markers; no prediction, limit or published value changes")

PARAMETERS = (
    P.ParameterSpec("robot", "", "Robot shipped with the package (ur5 | ur3 | planar_3r); empty: use urdf_path or the "
                    "robot_description topic.", P.one_of(("",) + ROBOT_NAMES), read_only=True,
                    constraint="one of '', " + ", ".join(f"'{n}'" for n in ROBOT_NAMES)),
    P.ParameterSpec("urdf_path", "", "URDF file of the robot; overrides 'robot'. Empty: 'robot' or the "
                    "robot_description topic.", P.existing_file_or_empty, read_only=True,
                    constraint="an existing file or empty"),
    P.ParameterSpec("robot_description_topic", "robot_description", "Topic of the URDF text (std_msgs/String, "
                    "transient local); sets the model if none is configured. Empty: do not subscribe.",
                    read_only=True),
    P.ParameterSpec("allow_model_replacement", False, "After start-up, accept a different robot_description with "
                    "the same joint names (else it is ignored with a log line and a diagnostics WARN)."),
    P.ParameterSpec("brake_config", "", "Brake YAML file (vtm_dynamics.core.estop.brakes format). Empty: "
                    "config/<robot>_brakes.yaml of the package.", P.existing_file_or_empty,
                    constraint="an existing file or empty; must name joints of the model"),
    P.ParameterSpec("stop_category", CATEGORY, "IEC 60204-1 stop category predicted on a trigger: 0 (drive power "
                    "removed, "
                    "brakes) or 1 (controlled deceleration, then brakes).", P.one_of((0, 1)),
                    constraint="0 or 1"),
    P.ParameterSpec("tcp_frame", "", "Frame whose stopping distance is reported and drawn. Empty: tool0 or the "
                    "robot's tool frame.", constraint="a frame of the model or empty"),
    P.ParameterSpec("horizon", HORIZON, "Maximum predicted time after the E-stop [s].", P.all_of(P.positive,
                    P.in_range(0.0, 600.0)), constraint="0 < horizon <= 600 s"),
    P.ParameterSpec("max_horizon", 30.0, "Largest horizon [s] a predict_stop request may ask for; longer "
                    "requests are answered success=false.", P.all_of(P.positive, P.in_range(0.0, 600.0)),
                    constraint="0 < max_horizon <= 600 s"),
    P.ParameterSpec("prediction_deadline", 2.0, "Wall-time bound [s] of one prediction; a prediction still "
                    "running after it is published as success=false naming the deadline.",
                    P.all_of(P.positive, P.in_range(0.0, 60.0)), constraint="0 < deadline <= 60 s"),
    P.ParameterSpec("max_engage_delay", 2.0, "Largest brake engage delay [s] a BrakeEvent may set; a larger one "
                    "makes that stop's prediction success=false naming the field.",
                    P.all_of(P.positive, P.in_range(0.0, 60.0)), constraint="0 < delay <= 60 s"),
    P.ParameterSpec("integration_step", INTEGRATION_STEP, "Maximum Runge-Kutta step (Dormand-Prince 5) of the "
                    "prediction between events [s] (events are located exactly inside steps).", P.in_range(1e-6, 0.1),
                    constraint="1e-6 .. 0.1 s"),
    P.ParameterSpec("category1_deceleration", CATEGORY1_DECELERATION, "Category 1: joint deceleration limit of the "
                    "controlled ramp "
                    "[rad/s^2].", P.positive, constraint="> 0 rad/s^2"),
    P.ParameterSpec("continuous_rate", 0.0, "Rate [Hz] of continuous 'if the E-stop fired now' predictions while "
                    "no stop is active; 0 disables. Merged: at most one waits at a time.", P.in_range(0.0, 1000.0),
                    constraint="0 <= rate <= 1000 Hz"),
    P.ParameterSpec("max_trajectory_points", 200, "Most points in the published JointTrajectory (evenly "
                    "subsampled, first and last kept).", P.in_range(2, 100000),
                    constraint="2 .. 100000"),
    P.ParameterSpec("max_start_state_age", 0.05, "Largest age [s] of the start state relative to the trigger "
                    "instant (a few joint-state periods); older: success=false with the age.",
                    P.all_of(P.positive, P.in_range(0.0, 10.0)), constraint="0 < age <= 10 s"),
    P.ParameterSpec("future_stamp_tolerance", 0.05, "Largest lead [s] of a stamp over the node clock (joint "
                    "states: rejected on receipt; triggers: success=false) and of the start state over the "
                    "trigger instant.", P.in_range(0.0, 10.0), constraint="0 .. 10 s"),
    P.ParameterSpec("state_wait_timeout", 0.05, "After a stamped trigger (BrakeEvent), wait at most this long [s] "
                    "for a joint state stamped at or after the E-stop instant before predicting from the newest "
                    "one.", P.in_range(0.0, 1.0), constraint="0 .. 1 s"),
    P.ParameterSpec("trigger_topic", "estop", "Topic of the E-stop line (relative names resolve in the node's "
                    "namespace).", P.non_empty_string, read_only=True, constraint="a topic name"),
    P.ParameterSpec("trigger_type", "std_msgs/msg/Bool", "Message type of the E-stop line, <package>/msg/<Type> "
                    "(e.g. ur_dashboard_msgs/msg/SafetyMode); resolved at start-up from the installed message "
                    "package. A type that does not exist makes the node refuse to start with one line.",
                    read_only=True, constraint="<package>/msg/<Type> of an installed message package"),
    P.ParameterSpec("trigger_field", "data", "Field of trigger_type that carries the state, a dotted path to a "
                    "bool, number or string (e.g. data, mode). A field the type lacks: the node refuses to start.",
                    read_only=True, constraint="a field path of trigger_type"),
    P.ParameterSpec("trigger_values", ["true"], "Values of trigger_field that mean 'stopping': true/false, numbers "
                    "or constant names of the type (e.g. ROBOT_EMERGENCY_STOP); a message with any other value "
                    "means 'not stopping'.", P.non_empty_list, read_only=True,
                    constraint="1 .. 64 values"),
    P.ParameterSpec("trigger_on_brake_event", True, "A BrakeEvent ENGAGE fires a prediction like the estop topic."),
    P.ParameterSpec("event_queue_depth", 10000, "DDS history depth of the trigger and event subscriptions (deep: "
                    "a flood from one publisher must not push another's edge out of the queue while the node is "
                    "behind; 10000 holds 10 s of a 1 kHz flood).",
                    P.in_range(1, 100000), read_only=True, constraint="1 .. 100000"),
    P.ParameterSpec("event_thread", True, "Serve estop, brake_events and lock_events on a helper node "
                    "'<name>_events' with its own executor thread, so floods on other inputs never delay a trigger.",
                    read_only=True),
    P.ParameterSpec("max_estop_publishers", 64, "Publishers of 'estop' whose latest value is remembered (the "
                    "least recently heard one that does not hold the line is forgotten first; a holder never is).",
                    P.in_range(1, 100000), read_only=True, constraint="1 .. 100000"),
    P.ParameterSpec("event_rate_limit", 50.0, "Revision predictions (work caused by events during a stop) per "
                    "second; events themselves are never dropped, revisions beyond it are merged into the next.",
                    P.positive, constraint="> 0 per s"),
    P.ParameterSpec("event_burst", 20, "Token-bucket burst size of the revision rate limit.", P.in_range(1, 100000),
                    constraint="1 .. 100000"),
    P.ParameterSpec("max_pending_requests", 4, "predict_stop requests waiting for the worker; more are answered "
                    "success=false at once.", P.in_range(1, 1000), constraint="1 .. 1000"),
    P.ParameterSpec("diagnostics_rate", 1.0, "Rate [Hz] of the status on /diagnostics; 0 disables.",
                    P.in_range(0.0, 100.0), constraint="0 .. 100 Hz"),
    P.ParameterSpec("ghost_rate", 10.0, "Rate [Hz] at which the predicted rest pose is republished on "
                    "predicted_joint_states (keeps the ghost's TF fresh); 0: publish once per prediction.",
                    P.in_range(0.0, 1000.0), constraint="0 .. 1000 Hz"),
    P.ParameterSpec("marker_force_scale", 0.002, "Length of reaction-force arrows per newton [m/N].",
                    P.in_range(1e-9, 1e3), constraint="1e-9 .. 1e3", live=MARKERS_ONLY),
    P.ParameterSpec("marker_torque_scale", 0.005, "Length of holding-torque arrows per newton metre [m/(N m)].",
                    P.in_range(1e-9, 1e3), constraint="1e-9 .. 1e3", live=MARKERS_ONLY),
    P.ParameterSpec("frame_id", "", "Fixed frame of markers and TCP positions. Empty: the URDF root link."),
)
PARAMETERS = PARAMETERS + LIVE_PARAMETERS  # live stopping distance (nodes/live_stopping.py)
PARAMETERS = PARAMETERS + REPLAY_PARAMETERS  # the ghost that replays the predicted stop (nodes/ghost_replay.py)


def model_hash(text: str) -> str:
    """First 16 hex digits of the SHA-256 of the URDF text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class LoadedModel:
    """One robot model, built twice (Pinocchio data is per thread): ``robot`` for E-stops, ``aux`` for the service
    and continuous predictions; ``brakes`` (None: ``brake_error`` says why)."""

    robot: RobotModel
    aux: RobotModel
    text: str
    hash: str
    brakes: BrakeSet | None
    brake_error: str

    @property
    def name(self) -> str:
        return self.robot.name


@dataclass(frozen=True)
class Outcome:
    """What a prediction produced (``result`` None: failed with ``reason``)."""

    result: Any
    reason: str
    seconds: float


class _Request:
    """A predict_stop request waiting for the auxiliary worker."""

    def __init__(self, request: Any, response: Any, future: Future, deadline: float) -> None:
        self.request, self.response, self.future, self.deadline = request, response, future, deadline


class EstopPredictor(Node):
    """See the module docstring. Build with ``EstopPredictor(parameter_overrides=[...])`` or from ROS args."""

    def __init__(self, **node_kwargs: Any) -> None:
        self._stopping = threading.Event()
        self._workers: list[threading.Thread] = []
        super().__init__(NODE_NAME, **node_kwargs)
        self.log = graph.LogLimiter(self.get_logger())
        self.p = P.declare_validated(self, PARAMETERS, self._on_parameters)
        self.robot_name = self.p["robot"]
        try:
            self.trigger_rule = rule_from_parameters(self.p["trigger_topic"], self.p["trigger_type"],
                                                     self.p["trigger_field"], self.p["trigger_values"])
            self.trigger_type, self.trigger = trigger_source(self.trigger_rule)
        except TriggerConfigError as err:
            raise P.ParameterError(str(err)) from None
        self.model: LoadedModel | None = None
        self.tracker: JointStateTracker | None = None
        self.state_lock = threading.Lock()  # history and tracker: callback thread writes, workers read
        self.history = StateHistory(HISTORY_LENGTH)
        self.line = EstopLine(self.p["max_estop_publishers"])
        self.session = StopSession()
        self.revision_bucket = graph.TokenBucket(self.p["event_rate_limit"], self.p["event_burst"])
        self.last_result: Any = None
        self.last_prediction: StopPrediction | None = None
        self.last_latency = math.nan
        self.ghost: JointState | None = None
        self.stats = {"joint_states_ok": 0, "joint_states_rejected": 0, "predictions": 0, "triggers": 0,
                      "events": 0, "refused_work": 0, "rejected_inputs": 0, "model_replacements_refused": 0,
                      "continuous_refused": 0}
        self.urgent = UrgentWork(max_wait=2.0 * self.p["prediction_deadline"] + 1.0)  # other work pauses for E-stops
        self.model_warning = ""
        self.latencies: list[float] = []
        self._newest_state_wall = math.nan
        self._running: tuple[StopJob, float] | None = None  # trigger job in progress, monotonic start
        self._late: dict[tuple[int, int], StopPrediction] = {}  # (stop, revision) answered as over the deadline
        self._trigger_wake = threading.Event()
        self._aux_queue: queue.Queue = queue.Queue()
        self._aux_pending = {"continuous": False, "description": None}
        self._aux_lock = threading.Lock()
        self._requests: list[_Request] = []

        text = load_urdf_text(self.p["robot"], self.p["urdf_path"])
        if text:
            self._install_model(self._build_model(text), source=self.p["urdf_path"] or f"robot {self.p['robot']!r}")

        events_qos = graph.events_qos(self.p["event_queue_depth"])
        if self.p["robot_description_topic"]:
            self.create_subscription(String, self.p["robot_description_topic"],
                                     graph.guarded(self.log, "robot_description")(self._on_description),
                                     graph.LATCHED)
        self.create_subscription(JointState, "joint_states", self._guard("joint_states", self._on_joint_state),
                                 graph.sensor_qos(20))
        host = self._event_host()
        host.create_subscription(self.trigger_type, self.trigger_rule.topic,
                                 self._guard(self.trigger_rule.topic, self._on_estop), events_qos)
        host.create_subscription(BrakeEvent, "brake_events", self._guard("brake_events", self._on_brake_event),
                                 events_qos)
        host.create_subscription(LockEvent, "lock_events", self._guard("lock_events", self._on_lock_event),
                                 events_qos)
        self.pub_traj = self.create_publisher(JointTrajectory, "predicted_trajectory", graph.OUTPUT_DEPTH)
        self.pub_pred = self.create_publisher(StopPrediction, "stop_prediction", graph.OUTPUT_DEPTH)
        self.pub_react = self.create_publisher(JointReactions, "joint_reactions", graph.OUTPUT_DEPTH)
        self.pub_markers = self.create_publisher(MarkerArray, "stop_markers", graph.OUTPUT_DEPTH)
        self.pub_ghost = self.create_publisher(JointState, "predicted_joint_states", graph.OUTPUT_DEPTH)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", graph.OUTPUT_DEPTH)
        self.live = LiveStopping()  # "if the E-stop fired now" distance beside continuous predictions
        self.continuous_gate = ContinuousGate(lambda: self.session.active)  # nothing continuous during a stop
        self.continuous_rate = RateMonitor()
        self.pub_stopping = self.create_publisher(StoppingDistance, "stopping_distance", graph.OUTPUT_DEPTH)
        self.replay = GhostReplay(self, self.p, self.log)  # predicted_motion(_markers): its own timer
        # an awaiting request holds its callback group until answered: the service gets a group of its own, so
        # the subscriptions (default group) are served meanwhile, and several requests may wait (capped)
        self.create_service(PredictStop, "predict_stop", self._on_predict_stop,
                            callback_group=ReentrantCallbackGroup())
        self._answered_guard = self.create_guard_condition(lambda: None)  # a worker answered a request
        self.watchdog = self.create_timer(WATCHDOG_PERIOD, graph.guarded(self.log, "watchdog")(self._on_watchdog))
        self.continuous_timer = None
        self.ghost_timer = None
        self.diag_timer = None
        self._make_timers()
        self._answer = graph.guarded(self.log, "predict_stop", default="response")(self._answer_request)
        # the workers compute in Python under the GIL: a short switch interval keeps the callback thread (and the
        # trigger worker) from waiting up to 5 ms for every GIL hand-over while the other worker predicts
        if sys.getswitchinterval() > SWITCH_INTERVAL:
            sys.setswitchinterval(SWITCH_INTERVAL)
        self._workers = [threading.Thread(target=self._trigger_loop, name="estop-trigger-worker", daemon=True),
                         threading.Thread(target=self._aux_loop, name="estop-aux-worker", daemon=True)]
        if self._event_executor is not None:
            self._workers.append(threading.Thread(target=self._spin_events, name="estop-event-executor",
                                                  daemon=True))
        for w in self._workers:
            w.start()
        self.get_logger().info(
            f"estop_predictor ready: model {self.model.name if self.model else '(waiting for robot_description)'}, "
            f"stop category {self.p['stop_category']}, continuous_rate {self.p['continuous_rate']} Hz"
        )

    def _event_host(self) -> Node:
        """The node that holds the trigger and event subscriptions: with ``event_thread``, a helper node
        ``<name>_events`` spun by its own executor thread, so a flood on joint_states or robot_description (or a
        slow callback of the main executor) never delays a trigger edge; else this node."""
        self._event_node: Node | None = None
        self._event_executor: SingleThreadedExecutor | None = None
        if not self.p["event_thread"]:
            return self
        self._event_node = Node(f"{self.get_name()}_events", namespace=self.get_namespace(), context=self.context,
                                start_parameter_services=False)
        self._event_executor = SingleThreadedExecutor(context=self.context)
        self._event_executor.add_node(self._event_node)
        return self._event_node

    def _spin_events(self) -> None:
        while not self._stopping.is_set() and self.context.ok():
            try:
                self._event_executor.spin_once(timeout_sec=0.1)
            except (ExternalShutdownException, ShutdownException):
                return
            except Exception as err:  # noqa: BLE001 - the event thread must survive anything
                self.log("error", f"event executor: unexpected {type(err).__name__}: {graph.one_line(err)}")

    def _guard(self, where: str, func: Any) -> Any:
        """A guarded subscription callback that still receives the message info (receipt time, publisher)."""
        guarded = graph.guarded(self.log, where)(func)

        def callback(msg: Any, info: Any) -> None:
            guarded(msg, info)

        return callback

    def destroy_node(self) -> None:
        self._stopping.set()
        if getattr(self, "urgent", None) is not None:
            self.urgent.release()  # paused work goes on to its end: the trigger worker stops settling the flag
        if self._workers:
            self._trigger_wake.set()
            self._aux_queue.put(None)
        for w in self._workers:
            w.join(timeout=5.0)
        if getattr(self, "_event_executor", None) is not None:
            self._event_executor.shutdown(timeout_sec=1.0)
            self._event_node.destroy_node()
        super().destroy_node()

    # ================================================================== compatibility views
    @property
    def brakes(self) -> BrakeSet | None:
        return self.model.brakes if self.model else None

    @property
    def robot(self) -> RobotModel | None:
        return self.model.robot if self.model else None

    @property
    def stop(self) -> Any:
        """The current stop (None when re-armed)."""
        return self.session.current

    @property
    def pending(self) -> Any:
        """The current stop while a prediction of it is due or running, else None."""
        stop = self.session.current
        running = self._running
        if stop is not None and (stop.dirty or (running is not None and running[0].number == stop.number)):
            return stop
        return None

    # ================================================================== parameters
    def _on_parameters(self, changes: dict[str, Any]) -> None:
        """Apply validated run-time changes: only the live parameters (the marker scales) get here; every other
        parameter is read-only after start-up (``parameter_policy``)."""
        self.p.update(changes)

    def _make_timers(self) -> None:
        if self.p["continuous_rate"] > 0:
            self.continuous_timer = self.create_timer(1.0 / self.p["continuous_rate"],
                                                      graph.guarded(self.log, "continuous")(self._on_continuous))
        if self.p["ghost_rate"] > 0:
            self.ghost_timer = self.create_timer(1.0 / self.p["ghost_rate"],
                                                 graph.guarded(self.log, "ghost")(self._on_ghost))
        if self.p["diagnostics_rate"] > 0:
            self.diag_timer = self.create_timer(1.0 / self.p["diagnostics_rate"],
                                                graph.guarded(self.log, "diagnostics")(self._publish_diagnostics))

    # ================================================================== model
    def _load_brakes(self, robot: RobotModel) -> tuple[BrakeSet | None, str]:
        try:
            return io.load_brakes(robot, self.p["brake_config"], self.robot_name), ""
        except ValueError as err:
            self.log("error", f"brake configuration unusable, predictions refused: {graph.one_line(err)}")
            return None, graph.one_line(err)

    def _build_model(self, text: str) -> LoadedModel:
        """Parse ``text`` twice (one model per worker); raises ModelError / UnsupportedJointError."""
        robot = model_from_urdf_text(text)
        JointStateTracker(robot)  # raises UnsupportedJointError for joints a JointState cannot describe
        aux = model_from_urdf_text(text)
        brakes, error = self._load_brakes(robot)
        if brakes is not None:  # the compiled engine loaded now: the first trigger as fast as the hundredth
            warm_up(robot, brakes)
        return LoadedModel(robot, aux, text, model_hash(text), brakes, error)

    def _install_model(self, model: LoadedModel, source: str) -> None:
        robot = model.robot
        if self.p["tcp_frame"] and not robot.model.existFrame(self.p["tcp_frame"]):
            self.get_logger().warning(f"tcp_frame {self.p['tcp_frame']!r} is not in model {robot.name!r}; using "
                                      f"{default_tcp_frame(robot, self.robot_name)!r}")
        with self.state_lock:
            self.model = model
            self.tracker = JointStateTracker(robot)
            self.history.clear()
        self.ghost = None
        self.get_logger().info(f"model {robot.name!r} (hash {model.hash}) from {source}: joints "
                               f"{list(robot.joint_names)}")

    def _on_description(self, msg: String) -> None:
        """Queue the description for the auxiliary worker (parsing can be slow); the newest one wins."""
        text = msg.data
        current = self.model
        if current is not None and text == current.text:
            return  # identical: no-op
        if current is not None and not self.p["allow_model_replacement"]:
            self._refuse_model(f"robot_description: new description ignored (hash {model_hash(text)}): live "
                               f"model replacement is disabled (allow_model_replacement); keeping model "
                               f"{current.name!r} (hash {current.hash})")
            return
        with self._aux_lock:
            first = self._aux_pending["description"] is None
            self._aux_pending["description"] = text
        if first:
            self._aux_queue.put("description")

    def _refuse_model(self, text: str) -> None:
        self.stats["model_replacements_refused"] += 1
        self.model_warning = text
        self.log("warning", text)

    def _replace_model(self, text: str) -> None:
        """On the auxiliary worker: parse and, if the policy allows, install the description."""
        current = self.model
        if current is not None and text == current.text:
            return
        try:
            with self.urgent.yielding():  # parsing pauses for E-stop work
                model = self._build_model(text)
        except (ModelError, UnsupportedJointError, ValueError) as err:
            self.stats["rejected_inputs"] += 1
            keep = f"keeping model {current.name!r}" if current else "no model yet"
            self.log("error", f"robot_description: invalid robot description ignored ({graph.one_line(err)}); {keep}")
            return
        current = self.model
        if current is not None:
            if not self.p["allow_model_replacement"]:
                self._refuse_model(f"robot_description: new description ignored (hash {model.hash}): live model "
                                   f"replacement is disabled (allow_model_replacement); keeping model "
                                   f"{current.name!r} (hash {current.hash})")
                return
            if tuple(model.robot.joint_names) != tuple(current.robot.joint_names):
                self._refuse_model(f"robot_description: new description ignored (hash {model.hash}): joints "
                                   f"{list(model.robot.joint_names)} differ from the model's; keeping model "
                                   f"{current.name!r} (hash {current.hash})")
                return
        self._install_model(model, "robot_description")

    def tcp_frame(self, robot: RobotModel | None = None) -> str:
        robot = robot or self.model.robot
        f = self.p["tcp_frame"]
        return f if f and robot.model.existFrame(f) else default_tcp_frame(robot, self.robot_name)

    # ================================================================== clocks
    def _now(self) -> float:
        """Node clock [s]."""
        return self.get_clock().now().nanoseconds * 1e-9

    @staticmethod
    def _receipt(info: Any) -> float:
        """Receipt time [s] of a message on the receipt clock (the DDS reception stamp, else the wall clock)."""
        try:
            ns = int(info.get("received_timestamp", 0)) if info else 0
        except (TypeError, ValueError, AttributeError):
            ns = 0
        return ns * 1e-9 if ns > 0 else time.time()

    def _instant_of_receipt(self, received: float) -> float:
        """The node-clock instant of a receipt: now minus the time the message waited for its callback."""
        return self._now() - max(0.0, time.time() - received)

    @staticmethod
    def _publisher(info: Any) -> Any:
        gid = info.get("publisher_gid") if info else None
        if isinstance(gid, dict):
            data = gid.get("data")
            try:
                return bytes(data) if data is not None else "unknown"
            except (TypeError, ValueError):
                return str(data)
        return "unknown" if gid is None else str(gid)

    # ================================================================== inputs
    def _on_joint_state(self, msg: JointState, info: Any = None) -> None:
        received = self._receipt(info)
        if self.tracker is None:
            self.log("warning", "joint_states: ignored until a robot model is known")
            return
        stamp = stamp_to_seconds(msg.header.stamp)
        now = self._now()
        if stamp > now + self.p["future_stamp_tolerance"]:
            self._reject_state(f"header.stamp: {stamp - now:.3f} s in the future (future_stamp_tolerance "
                               f"{self.p['future_stamp_tolerance']:g} s)")
            return
        header_stamp = copy.copy(msg.header.stamp)
        unstamped = stamp <= 0.0
        if unstamped:  # an unstamped state: its receipt instant is the best stamp there is
            stamp = self._instant_of_receipt(received)
            header_stamp = seconds_to_stamp(stamp)
        with self.state_lock:
            tracker = self.tracker
            try:
                parsed = tracker.update(msg)
            except JointStateError as err:
                parsed = None
                error = err
            complete = parsed is not None and not tracker.missing
            snap = tracker.snapshot() if complete else None
            sample = None
            if snap is not None:
                sample = StateSample(stamp, received, snap, tuple(snap.estimated_velocity), header_stamp,
                                     unstamped=unstamped, unavailable=tuple(snap.unavailable_velocity))
                self.history.add(sample)
        if parsed is None:
            self._reject_state(graph.one_line(error))
            return
        self.stats["joint_states_ok"] += 1
        if snap is not None:
            self._newest_state_wall = time.monotonic()
            if self.session.closer_start_state(sample, self._newest_state_wall) is not None:
                self._wake_trigger_worker()  # a late state closer to the E-stop instant: revise from it
        if parsed.unknown_names:
            self.log("warning", f"joint_states: ignoring joints not in model {self.model.name!r}: "
                                f"[{excerpt_list(parsed.unknown_names)}]")
        if parsed.velocities is None:
            self.log("warning", "joint_states: no velocities in the message; predictions from such states are "
                                "marked velocities_estimated")

    def _reject_state(self, reason: str) -> None:
        self.stats["joint_states_rejected"] += 1
        self.stats["rejected_inputs"] += 1
        self.log("warning", f"joint_states: message dropped: {reason}")

    def _known(self, names: list[str], topic: str) -> list[str]:
        model = self.model
        if model is None:
            return []
        joints = set(model.robot.joint_names)
        known = [n for n in names if n in joints]
        unknown = [n for n in names if n not in joints]
        if unknown:
            self.log("warning", f"{topic}: ignoring unknown joints [{excerpt_list(unknown)}] (model {model.name!r} "
                                f"has [{excerpt_list(model.robot.joint_names, count=50)}])")
        return known

    def _on_estop(self, msg: Any, info: Any = None) -> None:
        received = self._receipt(info)
        self.stats["events"] += 1
        was_stopping = self.line.stopping
        edge = self.line.update(self._publisher(info), self.trigger.stopping(msg))
        if edge:
            with self.state_lock:
                at_receipt = self.history.received_by(received)
            self._trigger(instant=self._instant_of_receipt(received), stamped=False, received=received,
                          overrides={}, problem="", at_receipt=at_receipt, source=f"{self.trigger_rule.topic} topic")
        elif was_stopping and not self.line.stopping and self.session.active:
            # only the line's own release ends a stop: a cyclic false while the line was not stopping does not
            # end a stop that a brake event started
            self._end_stop("E-stop line released")

    def _on_brake_event(self, msg: BrakeEvent, info: Any = None) -> None:
        received = self._receipt(info)
        self.stats["events"] += 1
        if msg.action == BrakeEvent.RELEASE:
            self._known(list(msg.joint_names), "brake_events")  # reports unknown names; a release re-arms anyway
            if self.session.active:
                self._end_stop("brakes released")
            return
        if msg.action != BrakeEvent.ENGAGE:
            self.stats["rejected_inputs"] += 1
            self.log("warning", f"brake_events: unknown action {msg.action} ignored")
            return
        if not self.p["trigger_on_brake_event"] and not self.session.active:
            return
        names = self._known(list(msg.joint_names), "brake_events")
        problem = ""
        try:
            overrides = io.brake_overrides(msg, names, max_delay=self.p["max_engage_delay"],
                                           bound_names={"engage_delay": "max_engage_delay"})
        except ValueError as err:  # the trigger still counts: its prediction says why it cannot be trusted
            overrides, problem = {}, f"brake_events: {graph.one_line(err)}"
            self.stats["rejected_inputs"] += 1
            self.log("warning", problem)
        instant = stamp_to_seconds(msg.header.stamp)
        stamped = instant > 0
        if not stamped:
            instant = self._instant_of_receipt(received)
        ahead = instant - self._now()
        if stamped and ahead > self.p["future_stamp_tolerance"] and not problem:
            # the trigger still counts; its prediction refuses the future instant, and this line names the field
            problem = (f"brake_events: header.stamp: {ahead:.3f} s in the future (future_stamp_tolerance "
                       f"{self.p['future_stamp_tolerance']:g} s)")
            self.stats["rejected_inputs"] += 1
            self.log("warning", problem)
        at_receipt = None
        if not stamped:
            with self.state_lock:
                at_receipt = self.history.received_by(received)
        self._trigger(instant=instant, stamped=stamped, received=received, overrides=overrides, problem=problem,
                      at_receipt=at_receipt, source="brake event")

    def _trigger(self, *, instant: float, stamped: bool, received: float, overrides: dict, problem: str,
                 at_receipt: StateSample | None, source: str) -> None:
        self.stats["triggers"] += 1
        with self.continuous_gate.trigger():  # no continuous output computed before this trigger is published
            kind, stop = self.session.trigger(instant=instant, stamped=stamped, received=received,
                                              wall=time.monotonic(), source=source, overrides=overrides,
                                              at_receipt=at_receipt, problem=problem)
        self._wake_trigger_worker()
        if kind == "new":
            self.get_logger().info(f"E-stop {stop.number} triggered by {source}")

    def _wake_trigger_worker(self) -> None:
        """E-stop work is due: other work pauses (``work_priority``) and the trigger worker wakes up."""
        self.urgent.raise_()
        self._trigger_wake.set()

    def _end_stop(self, why: str) -> None:
        stop, republish = self.session.rearm()
        if stop is None:
            return
        self.continuous_rate.restart()  # nothing continuous ran during the stop: judge its rate afresh
        self.get_logger().info(f"{why}: E-stop {stop.number} ended, re-armed")
        if republish and stop.last_prediction is not None:
            self._publish_final(stop.last_prediction)

    def _publish_final(self, prediction: StopPrediction) -> None:
        final = copy.copy(prediction)
        final.final = True
        self.pub_pred.publish(final)

    def _on_lock_event(self, msg: LockEvent, info: Any = None) -> None:
        self.stats["events"] += 1
        action = {LockEvent.LOCK: "LOCK", LockEvent.UNLOCK: "UNLOCK"}.get(msg.action)
        if action is None:  # judged before the names: a bad event is reported even when it names no joint
            self.stats["rejected_inputs"] += 1
            self.log("warning", f"lock_events: unknown action {msg.action} ignored")
            return
        if not msg.joint_names:
            self.stats["rejected_inputs"] += 1
            self.log("warning", f"lock_events: joint_names: empty, {action} of no joint ignored")
            return
        names = self._known(list(msg.joint_names), "lock_events")
        if not names:
            return
        t = stamp_to_seconds(msg.header.stamp)
        stop = self.session.current
        self.get_logger().info(f"lock event {action} {names[:20]} ({msg.source[:80] or 'no source'})"
                               + (f" during E-stop {stop.number}" if stop else ""))
        if stop is None or action != "LOCK" or self.model is None:
            return
        if stop.last_result is None:  # the prediction is not known yet: judge the lock against it when it is
            self.session.defer_lock((t, tuple(names)))
            return
        self._apply_lock(stop, t, names)

    def _apply_lock(self, stop: Any, t: float, names: Any) -> None:
        """A lock of joints that the stop's current prediction still has moving at ``t`` revises it (an abrupt
        lock, momentum-consistent jump in the core); locks of joints already at rest change nothing."""
        t_rel = t - stop.instant
        if not math.isfinite(t_rel) or t_rel < -STAMP_TOL:
            self.log("warning", f"lock_events: LOCK stamped {-t_rel:.4f} s before the E-stop ignored")
            return
        if t_rel > self.p["horizon"] or stop.last_result is None:
            return  # after the predicted interval: nothing still moves that the prediction covers
        robot = self.model.robot
        idx = [robot.joint(n).idx_v for n in names]
        result = stop.last_result
        moving = [n for n, i in zip(names, idx) if not (result.joint_stop_times[i] <= t_rel + 1e-6)]
        if moving:
            self.session.add_lock(io.estop.LockEvent(max(t_rel, 0.0), tuple(names)), time.monotonic())
            self._wake_trigger_worker()

    # ================================================================== trigger worker
    def _trigger_loop(self) -> None:
        while not self._stopping.is_set():
            epoch = self.urgent.epoch
            job = self.session.take_job()
            if job is None:
                self.urgent.settle(epoch)  # nothing due: the paused work goes on
                self._trigger_wake.wait(0.05)
                self._trigger_wake.clear()
                continue
            if job.revision > 0 and not self.revision_bucket.allow():  # merge revisions beyond the rate
                self.stats["refused_work"] += 1
                self.session.put_back(job)
                time.sleep(min(0.05, 1.0 / max(self.p["event_rate_limit"], 1e-3)))
                continue
            try:
                self._run_job(job)
            except Exception as err:  # noqa: BLE001 - the worker must survive anything; say so on the topic
                self.log("error", f"trigger worker: unexpected {type(err).__name__}: {graph.one_line(err)}")
                self._publish_failure(job.scenario, f"internal error ({type(err).__name__})", job=job)
                self.session.record(job, False, None, None, None)
            finally:
                self._running = None

    def _run_job(self, job: StopJob) -> None:
        model = self.model
        if model is None:
            self._finish_failure(job, "no robot model yet (waiting for robot_description)")
            return
        if job.problem:
            self._finish_failure(job, job.problem)
            return
        with self.state_lock:
            choice = choose_start_state(self.history, instant=job.instant, stamped=job.stamped,
                                        received=job.received, now=self._now(),
                                        waited=time.monotonic() - job.wall, limits=self._limits(),
                                        at_receipt=job.at_receipt)
        if choice.wait:
            self.session.put_back(job)
            time.sleep(0.002)
            return
        if not choice.ok:
            self._finish_failure(job, choice.reason, choice)
            return
        self._running = (job, time.monotonic())
        outcome = self._predict(model, model.robot, choice.sample.state, job.overrides, locks=job.locks)
        late = self._late.pop((job.number, job.revision), None)
        if late is not None:  # already answered success=false by the watchdog: the late result is dropped
            if self.session.record(job, False, None, late, None) == "final" and not late.final:
                self._publish_final(late)
            return
        if outcome.result is None:
            self._finish_failure(job, outcome.reason, choice)
            return
        final = not self.session.is_current(job.number)
        pred = self._publish_result(model, outcome.result, job.scenario, job.instant, choice, job.revision, final,
                                    trigger_wall=job.wall)
        if self.session.record(job, bool(pred.success), outcome.result, pred, choice.sample) == "final" \
                and not pred.final:
            self._publish_final(pred)  # the stop ended while this prediction was made
        if job.stamped and pred.success:  # a state closer to the instant may have come while this one ran
            with self.state_lock:
                closer = self.history.stamped_by(job.instant)
            if closer is not None and self.session.closer_start_state(closer, time.monotonic()) is not None:
                self._wake_trigger_worker()
        stop = self.session.current
        if stop is not None and stop.number == job.number and stop.last_result is not None:
            for t, names in self.session.take_deferred_locks(job.number):
                self._apply_lock(stop, t, names)

    def _finish_failure(self, job: StopJob, reason: str, choice: StartChoice | None = None) -> None:
        pred = self._publish_failure(job.scenario, reason, job=job, choice=choice)
        if self.session.record(job, False, None, pred, None) == "final" and not pred.final:
            self._publish_final(pred)

    def _limits(self) -> StartLimits:
        return StartLimits(self.p["max_start_state_age"], self.p["future_stamp_tolerance"],
                           self.p["state_wait_timeout"])

    def _on_watchdog(self) -> None:
        """Answer a trigger prediction that overran ``prediction_deadline`` now (its late result is dropped), and
        the predict_stop requests that waited longer than their deadline."""
        running = self._running
        if running is not None:
            job, started = running
            key = (job.number, job.revision)
            if time.monotonic() - started > self.p["prediction_deadline"] and key not in self._late:
                self.stats["refused_work"] += 1
                self._late[key] = self._publish_failure(
                    job.scenario, f"prediction still running after prediction_deadline "
                                  f"{self.p['prediction_deadline']:g} s", job=job)
        now = time.monotonic()
        with self._aux_lock:
            late = [r for r in self._requests if now > r.deadline and not r.future.done()]
        for r in late:
            r.response.success = False
            r.response.message = f"no answer within prediction_deadline {self.p['prediction_deadline']:g} s"
            r.response.prediction.success = False
            r.response.prediction.message = r.response.message
            self.stats["refused_work"] += 1
            r.future.set_result(r.response)

    # ================================================================== prediction
    def _predict(self, model: LoadedModel, robot: RobotModel, state: JointStateSnapshot, overrides: Any,
                 category: int | None = None, tcp_frame: str | None = None, horizon: float | None = None,
                 brakes: Any = None, locks: Any = ()) -> Outcome:
        """Call the core prediction; never raises (a failure is an Outcome with the reason)."""
        start = time.monotonic()
        base = brakes if brakes is not None else model.brakes
        if base is None:
            return Outcome(None, model.brake_error, 0.0)
        try:
            category = self.p["stop_category"] if category is None else category
            result = predict_stop(
                robot, base if not overrides else io.apply_overrides(robot, base, overrides), state.q, state.v,
                category=category, tcp_frame=tcp_frame or self.tcp_frame(robot), lock_events=tuple(locks),
                category_one=CategoryOne(deceleration=self.p["category1_deceleration"]) if category == 1 else None,
                settings=StopSettings(step=self.p["integration_step"], t_max=horizon or self.p["horizon"]),
            )
        except ValueError as err:
            return Outcome(None, graph.one_line(err), time.monotonic() - start)
        except Exception as err:  # noqa: BLE001 - e.g. the core's event-count guard: an answer, not a crash
            return Outcome(None, f"prediction failed ({type(err).__name__}): {graph.one_line(err)}",
                           time.monotonic() - start)
        seconds = time.monotonic() - start
        if seconds > self.p["prediction_deadline"]:
            return Outcome(None, f"prediction took {seconds:.2f} s, over prediction_deadline "
                                 f"{self.p['prediction_deadline']:g} s", seconds)
        return Outcome(result, "", seconds)

    def _publish_result(self, model: LoadedModel, result: Any, scenario: str, instant: float,
                        choice: StartChoice, revision: int, final: bool, trigger_wall: float | None) -> StopPrediction:
        robot = model.robot if scenario != "continuous" else model.aux
        stamp = seconds_to_stamp(instant)
        frame = self.p["frame_id"] or io.root_frame_of(robot)
        pred = io.stop_prediction_message(robot, result, stamp, frame, scenario, self.p["stop_category"],
                                          self.p["max_trajectory_points"])
        self._provenance(pred, model, choice, revision, final)
        self.pub_pred.publish(pred)  # first: the reactions' uniqueness check of a closed chain takes up to ~0.1 s
        if trigger_wall is not None:
            self.last_latency = time.monotonic() - trigger_wall
            self.latencies.append(self.last_latency)
            del self.latencies[:-1000]
        self.pub_traj.publish(pred.trajectory)
        self.pub_react.publish(io.joint_reactions_message(robot, result, stamp))
        scales = MarkerScales(force_scale=self.p["marker_force_scale"], torque_scale=self.p["marker_torque_scale"])
        self.pub_markers.publish(io.stop_markers_message(robot, result, stamp, frame, scales))
        self.ghost = joint_state_message(robot.joint_names, io.rest_positions(robot, result), [0.0] * robot.nv,
                                         stamp=stamp)
        self.pub_ghost.publish(self.ghost)
        self.replay.offer(robot, result, frame, continuous=scenario == "continuous")  # constant time
        self.last_result, self.last_prediction = result, pred
        self.stats["predictions"] += 1
        if scenario != "continuous":
            sample = choice.sample
            self.get_logger().info(
                f"{scenario}: predicted stop after {io.stop_time(result):.3f} s, TCP {pred.tcp_frame} path "
                f"{pred.tcp_path_length:.3f} m (straight {pred.tcp_straight_distance:.3f} m), {len(pred.events)} "
                f"events, start state {choice.age * 1e3:.1f} ms before the trigger"
                + (f" [velocities estimated for {list(sample.estimated)}]" if sample.estimated else "")
            )
        return pred

    @staticmethod
    def _provenance(pred: StopPrediction, model: LoadedModel | None, choice: StartChoice | None, revision: int,
                    final: bool) -> None:
        sample = choice.sample if choice is not None else None
        io.mark_provenance(
            pred, model_name=model.name if model else "", model_hash=model.hash if model else "",
            start_stamp=None if sample is None else (sample.header_stamp or sample.stamp),
            start_age=choice.age if choice is not None else math.nan,
            velocities_estimated=bool(choice is not None and choice.sample is not None
                                      and (choice.sample.estimated or choice.sample.unavailable)),
            revision=revision, final=final)

    def _publish_failure(self, scenario: str, reason: str, job: StopJob | None = None,
                         choice: StartChoice | None = None) -> StopPrediction:
        msg = StopPrediction()
        msg.header.stamp = seconds_to_stamp(job.instant) if job is not None else self.get_clock().now().to_msg()
        msg.scenario_id = scenario
        msg.stop_category = self.p["stop_category"]
        msg.success = False
        msg.message = reason
        final = job is not None and not self.session.is_current(job.number)
        self._provenance(msg, self.model, choice, job.revision if job is not None else 0, final)
        self.pub_pred.publish(msg)
        self.last_prediction = msg
        self.log("error", f"{scenario}: no prediction: {reason}")
        return msg

    # ================================================================== auxiliary worker
    def _on_continuous(self) -> None:
        if self.session.active or self.model is None:
            return
        with self._aux_lock:
            if self._aux_pending["continuous"]:
                return  # merged: one continuous prediction waits at a time
            self._aux_pending["continuous"] = True
        self._aux_queue.put("continuous")

    def _aux_loop(self) -> None:
        while not self._stopping.is_set():
            item = self._aux_queue.get()
            if item is None:
                return
            try:
                if item == "continuous":
                    with self._aux_lock:
                        self._aux_pending["continuous"] = False
                    self._continuous()
                elif item == "description":
                    with self._aux_lock:
                        text, self._aux_pending["description"] = self._aux_pending["description"], None
                    if text is not None:
                        self._replace_model(text)
                elif isinstance(item, _Request):
                    with self.urgent.yielding():  # the E-stop has priority over services
                        self._serve(item)
            except Exception as err:  # noqa: BLE001 - the worker must survive anything
                self.log("error", f"worker: unexpected {type(err).__name__}: {graph.one_line(err)}")

    def _continuous(self) -> None:
        """One "if the E-stop fired now" evaluation (nodes/live_freshness.py): computed with pauses for E-stop
        work, each output published only if no trigger came meanwhile, with the age of its input at publication
        and refused beyond the E-stop's own age limit. The nominal prediction is published as soon as it is made;
        the stopping distance follows once its envelope is evaluated."""
        model = self.model
        ticket = self.continuous_gate.ticket()
        if ticket is None or model is None:
            return
        with self.state_lock:
            sample = self.history.newest()
        if sample is None:
            return
        started = time.monotonic()
        now = self._now()
        choice = choose_start_state(self.history, instant=now, stamped=False, received=time.time(), now=now,
                                    waited=0.0, limits=self._limits(), at_receipt=sample)
        outcome, nominal = Outcome(None, choice.reason, 0.0), None
        if choice.ok:
            with self.urgent.yielding():  # pauses while an E-stop prediction is due or running
                outcome = self._predict(model, model.aux, sample.state, {})
                nominal = self._continuous_messages(model, sample, outcome)
        with self.continuous_gate.publishing(ticket) as allowed:
            if not allowed:
                return  # a trigger came while this was computed: nothing continuous during a stop
            self._publish_continuous(model, sample, nominal, outcome.reason)
        if self.p["stopping_distance"]:
            with self.urgent.yielding():
                distance = self._stopping_distance(model, sample, outcome)
            with self.continuous_gate.publishing(ticket) as allowed:
                if not allowed:
                    return
                age = input_age(self._now(), sample.stamp)
                reason = stale_reason(age, self.p["max_start_state_age"], self.p["future_stamp_tolerance"])
                if reason and distance.success:
                    distance = self._stopping_failure(model, sample, reason)
                distance.input_age = age
                self.pub_stopping.publish(distance)
        self.continuous_rate.record(time.monotonic() - started)

    def _continuous_messages(self, model: LoadedModel, sample: Any, outcome: Outcome) -> dict[str, Any] | None:
        """The messages of a continuous prediction, built before publication (the age is set then)."""
        if outcome.result is None:
            return None
        robot = model.aux
        stamp = seconds_to_stamp(sample.stamp)
        frame = self.p["frame_id"] or io.root_frame_of(robot)
        pred = io.stop_prediction_message(robot, outcome.result, stamp, frame, "continuous", self.p["stop_category"],
                                          self.p["max_trajectory_points"])
        scales = MarkerScales(force_scale=self.p["marker_force_scale"], torque_scale=self.p["marker_torque_scale"])
        return {"prediction": pred, "result": outcome.result,
                "reactions": io.joint_reactions_message(robot, outcome.result, stamp),
                "markers": io.stop_markers_message(robot, outcome.result, stamp, frame, scales),
                "ghost": joint_state_message(robot.joint_names, io.rest_positions(robot, outcome.result),
                                             [0.0] * robot.nv, stamp=stamp)}

    def _publish_continuous(self, model: LoadedModel, sample: Any, nominal: dict[str, Any] | None,
                            reason: str) -> None:
        """Publish (under the continuous gate) the nominal prediction with its input age at publication, or
        success=false naming why there is none (``reason``, or an input older than the E-stop's limit)."""
        age = input_age(self._now(), sample.stamp)
        reason = reason or stale_reason(age, self.p["max_start_state_age"], self.p["future_stamp_tolerance"])
        pred = None if reason or nominal is None else nominal["prediction"]
        if pred is None:
            self.stats["continuous_refused"] += 1
            pred = StopPrediction(scenario_id="continuous", stop_category=self.p["stop_category"], success=False,
                                  message=reason or "no prediction")
            pred.header.stamp = seconds_to_stamp(sample.stamp)
        io.mark_provenance(pred, model_name=model.name, model_hash=model.hash,
                           start_stamp=sample.header_stamp or sample.stamp, start_age=age,
                           velocities_estimated=bool(sample.estimated or sample.unavailable), revision=0, final=False)
        self.pub_pred.publish(pred)
        self.last_prediction = pred
        if not pred.success:
            return
        self.pub_traj.publish(pred.trajectory)
        self.pub_react.publish(nominal["reactions"])
        self.pub_markers.publish(nominal["markers"])
        self.ghost = nominal["ghost"]
        self.pub_ghost.publish(self.ghost)
        self.last_result = nominal["result"]
        self.stats["predictions"] += 1
        self.replay.offer(model.aux, nominal["result"], self.p["frame_id"] or io.root_frame_of(model.aux),
                          continuous=True)  # constant time

    def _stopping_distance(self, model: LoadedModel, sample: Any, outcome: Outcome) -> StoppingDistance:
        """The live stopping distance (nodes/live_stopping.py): nominal = the continuous prediction, worst case
        over the envelope predicted with the same settings; any failure is success=false with the reason."""
        tcp = self.tcp_frame(model.aux)
        live = None
        if outcome.result is not None and model.brakes is not None:
            live = self.live.evaluate(model.aux, model.brakes, outcome.result, self.p, tcp,
                                      lambda robot, brakes: self._predict(model, robot, sample.state, {},
                                                                          brakes=brakes))
            if not live.error and live.worst_rest is not None:
                self.replay.offer_worst(outcome.result, live.worst_rest)
        return io_stopping_message(live, outcome.reason, stamp=seconds_to_stamp(sample.stamp),
                                   frame=self.p["frame_id"] or io.root_frame_of(model.aux), model_name=model.name,
                                   model_hash=model.hash, category=self.p["stop_category"], tcp_frame=tcp)

    def _stopping_failure(self, model: LoadedModel, sample: Any, reason: str) -> StoppingDistance:
        return io_stopping_message(None, reason, stamp=seconds_to_stamp(sample.stamp),
                                   frame=self.p["frame_id"] or io.root_frame_of(model.aux), model_name=model.name,
                                   model_hash=model.hash, category=self.p["stop_category"],
                                   tcp_frame=self.tcp_frame(model.aux))

    async def _on_predict_stop(self, request: PredictStop.Request,
                               response: PredictStop.Response) -> PredictStop.Response:
        """Hand the request to the auxiliary worker and answer when it is done (the executor keeps serving)."""
        try:
            with self._aux_lock:
                self._requests = [r for r in self._requests if not r.future.done()]
                busy = len(self._requests) >= self.p["max_pending_requests"]
                if not busy:
                    future = Future(executor=self.executor)
                    item = _Request(request, response, future, time.monotonic() + self.p["prediction_deadline"]
                                    + 1.0)
                    self._requests.append(item)
            if busy:
                self.stats["refused_work"] += 1
                response.success = False
                response.message = (f"busy: {self.p['max_pending_requests']} requests already wait "
                                    "(max_pending_requests)")
                response.prediction.message = response.message
                return response
            self._aux_queue.put(item)
            return await future
        except Exception as err:  # noqa: BLE001 - a request must never take the node down
            self.log("error", f"predict_stop: unexpected {type(err).__name__}: {graph.one_line(err)}")
            response.success = False
            response.message = f"internal error ({type(err).__name__}): {graph.one_line(err)}"
            return response

    def _serve(self, item: _Request) -> None:
        if item.future.done():
            return  # already answered as over the deadline
        response = self._answer(item.request, item.response)
        if not item.future.done():
            item.future.set_result(response)
        self._answered_guard.trigger()

    def _answer_request(self, request: PredictStop.Request, response: PredictStop.Response) -> PredictStop.Response:
        """Validate and predict a PredictStop request (on the auxiliary worker)."""
        model = self.model
        try:
            if model is None:
                raise ValueError("no robot model yet (waiting for robot_description)")
            robot = model.aux
            try:
                parsed = parse_joint_state(request.state, robot.joint_names)
            except JointStateError as err:  # its text names the JointState field: say it is the request's state
                raise ValueError(f"state.{graph.one_line(err)}") from None
            missing = [n for n in robot.joint_names if n not in parsed.positions]
            if missing:
                raise ValueError(f"state.name: missing joints {missing}")
            if parsed.velocities is None:
                raise ValueError("state.velocity: required (one per joint)")
            if request.stop_category not in (0, 1):
                raise ValueError(f"stop_category: must be 0 or 1, got {request.stop_category}")
            if request.tcp_frame and not robot.model.existFrame(request.tcp_frame):
                raise ValueError(f"tcp_frame: {request.tcp_frame[:100]!r} is not a frame of {robot.name!r}")
            if not (math.isfinite(request.horizon) and request.horizon >= 0):
                raise ValueError(f"horizon: must be >= 0, got {request.horizon}")
            if request.horizon > self.p["max_horizon"]:
                raise ValueError(f"horizon: {request.horizon:g} s exceeds max_horizon {self.p['max_horizon']:g} s")
            brakes = io.brakes_from_yaml_text(robot, request.brake_config_yaml) if request.brake_config_yaml else None
            positions = np.array([parsed.positions[n] for n in robot.joint_names])
            v = np.array([parsed.velocities[n] for n in robot.joint_names])
            state = io.snapshot(robot, parsed.stamp, positions, v)
            outcome = self._predict(model, robot, state, {}, category=request.stop_category,
                                    tcp_frame=request.tcp_frame or None, horizon=request.horizon or None,
                                    brakes=brakes)
            if outcome.result is None:
                raise ValueError(outcome.reason)
        except (ValueError, RecursionError) as err:
            self.stats["rejected_inputs"] += 1
            reason = graph.one_line(err) if not isinstance(err, RecursionError) else \
                "brake_config_yaml: nested too deeply"
            response.success = False
            response.message = reason
            response.prediction.success = False
            response.prediction.message = reason
            if model is not None:
                response.prediction.model_name, response.prediction.model_hash = model.name, model.hash
            return response
        stamp = request.state.header.stamp
        frame = self.p["frame_id"] or io.root_frame_of(robot)
        response.prediction = io.stop_prediction_message(robot, outcome.result, stamp, frame, "service",
                                                         request.stop_category, self.p["max_trajectory_points"])
        io.mark_provenance(response.prediction, model_name=model.name, model_hash=model.hash,
                           start_stamp=stamp, start_age=0.0, velocities_estimated=False,
                           revision=0, final=True)
        response.reactions_at_rest = io.joint_reactions_message(robot, outcome.result, stamp)
        response.success = True
        response.message = "ok"
        return response

    # ================================================================== outputs
    def _on_ghost(self) -> None:
        if self.ghost is not None:
            ghost = copy.copy(self.ghost)
            ghost.header.stamp = self.get_clock().now().to_msg()
            self.pub_ghost.publish(ghost)

    def _publish_diagnostics(self) -> None:
        model = self.model
        status = DiagnosticStatus(name=f"{self.get_name()}: stop prediction", hardware_id=model.name if model else "")
        age = time.monotonic() - self._newest_state_wall if math.isfinite(self._newest_state_wall) else math.inf
        last = self.last_prediction
        level, text = DiagnosticStatus.OK, "ok"
        if model is None:
            level, text = DiagnosticStatus.ERROR, "no robot model"
        elif self.model_warning:
            level, text = DiagnosticStatus.WARN, self.model_warning
        elif model.brakes is None:
            level, text = DiagnosticStatus.ERROR, model.brake_error
        elif age > 1.0:
            level, text = DiagnosticStatus.WARN, "no complete joint state in the last second"
        shortfall = "" if self.session.active else self.continuous_rate.shortfall(self.p["continuous_rate"])
        if shortfall and level == DiagnosticStatus.OK:
            level, text = DiagnosticStatus.WARN, shortfall
        status.level, status.message = level, text[:300]
        values = {
            "model_name": model.name if model else "",
            "model_hash": model.hash if model else "",
            "joint_state_age": f"{age:.4f}",
            "last_scenario": last.scenario_id if last else "",
            "last_success": str(bool(last.success)) if last else "",
            "last_message": (last.message[:200] if last else ""),
            "last_latency": f"{self.last_latency:.4f}",
            "triggers": str(self.stats["triggers"]),
            "predictions": str(self.stats["predictions"]),
            "refused_work": str(self.stats["refused_work"]),
            "rejected_inputs": str(self.stats["rejected_inputs"]),
            "events": str(self.stats["events"]),
            "model_replacements_refused": str(self.stats["model_replacements_refused"]),
            "continuous_rate": f"{self.p['continuous_rate']:g}",
            "continuous_rate_achieved": f"{self.continuous_rate.achieved():.2f}",
            "continuous_shortfall": shortfall,
            "continuous_refused": str(self.stats["continuous_refused"]),
            "continuous_dropped_for_stop": str(self.continuous_gate.dropped),
            "paused_for_estop": str(self.urgent.pauses),
            "estop_line_holders": str(self.line.holders),
            "estop_unrecorded_holders": str(self.line.unrecorded),
        }
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        array = DiagnosticArray()
        array.header.stamp = self.get_clock().now().to_msg()
        array.status = [status]
        self.pub_diag.publish(array)


def main(args: list[str] | None = None) -> int:
    return run_node("estop_predictor", EstopPredictor, (P.ParameterError, ModelError, UnsupportedJointError), args)


if __name__ == "__main__":
    raise SystemExit(main())
