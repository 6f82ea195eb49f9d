"""The parameters of ``estop_predictor``: one table (name, default, description, validator, whether it may change
at run time), and the settings the node's parts take from it.

Every parameter is read-only after start-up except the marker scales (``parameter_policy``; docs/ros.md lists
why). The defaults of the physics (stop category, horizon, integration step, category-1 deceleration and torque limits) are the
core's (``core/estop/defaults.py``); ``live_stopping``, ``ghost_replay`` and ``stopsafe_parameters`` add their own
parameters.
"""

from __future__ import annotations

from typing import Any, Mapping

from vtm_dynamics.core.estop.defaults import (
    CATEGORY, CATEGORY1_DECELERATION, CATEGORY1_LONGEST_RAMP, CATEGORY1_TORQUE_LIMITS, HORIZON, INTEGRATION_STEP,
)
from vtm_dynamics.core.estop.inputs import StopInputError, torque_limits_from_text
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes.ghost_replay import REPLAY_PARAMETERS
from vtm_dynamics.nodes.live_stopping import LIVE_PARAMETERS
from vtm_dynamics.nodes.model_source import ROBOT_NAMES
from vtm_dynamics.nodes.stop_session import StartLimits
from vtm_dynamics.nodes.stop_worker import PredictionSettings
from vtm_dynamics.nodes.stopsafe_parameters import STOPSAFE_PARAMETERS
from vtm_dynamics.nodes.trigger_source import trigger_source
from vtm_dynamics.recordings.trigger import TriggerConfigError, TriggerMatcher, TriggerRule, rule_from_parameters

#: ``category1_torque_limits`` when none is set: the core's default, as the parameter's text ('' for none)
_TORQUE_LIMITS_DEFAULT = "" if CATEGORY1_TORQUE_LIMITS is None else str(CATEGORY1_TORQUE_LIMITS)


def _torque_limits(value: object) -> str | None:
    """Validator of ``category1_torque_limits``: the command lines' reading (``torque_limits_from_text``)."""
    if not isinstance(value, str):
        return "must be a string: '', 'urdf' or numbers separated by spaces"
    try:
        torque_limits_from_text(value)
    except StopInputError as err:
        return str(err).removeprefix("torque_limits: ")
    return None


#: Why the marker scales may change at run time (the only parameters of this node that may).
MARKERS_ONLY = "drawing only: the arrow lengths of stop_markers; no prediction, limit or published value changes"

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
                    "prediction "
                    "between events [s] (events are located exactly inside steps).", P.in_range(1e-6, 0.1),
                    constraint="1e-6 .. 0.1 s"),
    P.ParameterSpec("category1_deceleration", CATEGORY1_DECELERATION, "Category 1: joint deceleration limit of the "
                    "controlled ramp "
                    "[rad/s^2].", P.positive, constraint="> 0 rad/s^2"),
    P.ParameterSpec("category1_torque_limits", _TORQUE_LIMITS_DEFAULT, "Category 1: the drives' torque limits "
                    "[N m; N for prismatic joints] that lengthen the ramp until its torques fit (to at most "
                    f"{CATEGORY1_LONGEST_RAMP:g} s, else the prediction is success=false naming the joint): 'urdf' "
                    "for the model's effort limits, or one number per joint in model order separated by spaces (0: "
                    "none on that joint); empty: none, the drives deliver category1_deceleration whatever it takes "
                    "(the --torque-limits of the command lines).", _torque_limits,
                    constraint="'', 'urdf' or one number >= 0 per joint"),
    P.ParameterSpec("continuous_rate", 0.0, "Rate [Hz] of continuous 'if the E-stop fired now' predictions while "
                    "no stop is active; 0 disables. Merged: at most one waits at a time.", P.in_range(0.0, 1000.0),
                    constraint="0 <= rate <= 1000 Hz"),
    P.ParameterSpec("max_trajectory_points", 200, "Most points in the published JointTrajectory (evenly "
                    "subsampled, first and last kept).", P.in_range(2, 100000),
                    constraint="2 .. 100000"),
    P.ParameterSpec("max_start_state_age", 0.05, "Largest age [s] of the start state relative to the trigger "
                    "instant (a few joint-state periods); older: success=false with the age. Also the longest gap "
                    "between two positions a velocity is estimated over (position-only joint states).",
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
    P.ParameterSpec("trigger_values", ["true"], "Values of trigger_field that mean 'stopping', read by the "
                    "field's type: the text itself (string fields), true/false (bool fields), numbers or constant "
                    "names of the type (numeric fields, e.g. ROBOT_EMERGENCY_STOP); a value the field cannot hold "
                    "refuses the start. A message with any other value means 'not stopping'.", P.non_empty_list,
                    read_only=True,
                    constraint="1 .. 64 values"),
    P.ParameterSpec("trigger_on_brake_event", True, "A BrakeEvent ENGAGE fires a prediction like the estop topic."),
    P.ParameterSpec("event_queue_depth", 10000, "DDS history depth of the trigger and event subscriptions (deep: "
                    "a flood from one publisher must not push another's edge out of the queue while the node is "
                    "behind; 10000 holds 10 s of a 1 kHz flood).",
                    P.in_range(1, 100000), read_only=True, constraint="1 .. 100000"),
    P.ParameterSpec("event_thread", True, "Serve estop, brake_events and lock_events on an executor thread of "
                    "their own (a callback group of this node that only that thread serves), so floods on other "
                    "inputs never delay a trigger.", read_only=True),
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
PARAMETERS = PARAMETERS + STOPSAFE_PARAMETERS  # check_trajectory and the live separation distance (stopsafe_*)


def start_limits(p: Mapping[str, Any]) -> StartLimits:
    """The limits of a start state (``stop_session.choose_start_state``) from the parameters."""
    return StartLimits(p["max_start_state_age"], p["future_stamp_tolerance"], p["state_wait_timeout"])


def prediction_settings(p: Mapping[str, Any]) -> PredictionSettings:
    """What every prediction of the node is made with (``stop_worker.predict``), from the parameters."""
    return PredictionSettings(category=p["stop_category"], horizon=p["horizon"], step=p["integration_step"],
                              deceleration=p["category1_deceleration"], deadline=p["prediction_deadline"],
                              torque_limits=torque_limits_from_text(p["category1_torque_limits"]),
                              tcp_frame=p["tcp_frame"], robot_name=p["robot"])


def trigger_of(p: Mapping[str, Any]) -> tuple[TriggerRule, type, TriggerMatcher]:
    """The E-stop line's rule, message type and reader from the ``trigger_*`` parameters; a type or field that does
    not exist raises ``ParameterError`` naming the parameter (the node refuses to start)."""
    try:
        rule = rule_from_parameters(p["trigger_topic"], p["trigger_type"], p["trigger_field"], p["trigger_values"])
        msg_type, source = trigger_source(rule)
    except TriggerConfigError as err:
        raise P.ParameterError(str(err)) from None
    return rule, msg_type, source

