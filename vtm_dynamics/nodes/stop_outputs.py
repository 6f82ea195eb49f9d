"""What ``estop_predictor`` publishes, and how its results become messages: the publication half of the node.

Outputs (topics relative to the node)
  ``stop_prediction``        vtm_msgs/StopPrediction: ``scenario_id`` "estop-<n>", "estop-<n>-rev<k>" or
                             "continuous"; the model's name and hash; the start state's stamp and age relative to
                             the trigger instant; ``velocities_estimated``; ``revision``; ``final`` (the last revision
                             of a stop is republished with it when the stop ends). Published FIRST: the reactions of a
                             closed chain take up to 0.1 s to build.
  ``predicted_trajectory``   trajectory_msgs/JointTrajectory (time from the E-stop instant)
  ``joint_reactions``        vtm_msgs/JointReactions at rest
  ``stop_markers``           visualization_msgs/MarkerArray (``markers``; arrow scales live parameters)
  ``predicted_joint_states`` sensor_msgs/JointState of the predicted rest pose (ghost robot), republished at
                             ``ghost_rate`` Hz with a fresh stamp
  ``stopping_distance``      vtm_msgs/StoppingDistance with each continuous round (``live_stopping``)
  ``predicted_motion(_markers)``  the replay of the latest stop (``ghost_replay``)
A failure is a StopPrediction with ``success=false`` and the reason, with whatever provenance there is. The
messages themselves are built by ``prediction_io`` and ``live_stopping``; this module adds the node's settings
(frame, category, point cap, marker scales), the provenance, and the order of publication.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, MutableMapping

from rclpy.node import Node
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray
from diagnostic_msgs.msg import DiagnosticStatus
from vtm_msgs.msg import JointReactions, StopPrediction, StoppingDistance

from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes import diagnostics, graph
from vtm_dynamics.nodes import prediction_io as io
from vtm_dynamics.nodes.continuous_messages import MessageRequest
from vtm_dynamics.nodes.continuous_mode import ContinuousRound
from vtm_dynamics.nodes.conversions import exact_stamp, joint_state_message, seconds_to_stamp
from vtm_dynamics.nodes.ghost_replay import GhostReplay
from vtm_dynamics.nodes.live_freshness import ContinuousGate
from vtm_dynamics.nodes.live_stopping import LiveStopping, stopping_distance_message
from vtm_dynamics.nodes.markers import MarkerScales
from vtm_dynamics.nodes.model_slot import LoadedModel, ModelSlot
from vtm_dynamics.nodes.stop_session import StartChoice, StateSample, StopJob
from vtm_dynamics.nodes.stop_worker import PredictionSettings, StopResult

LATENCIES = 1000  # timings of published E-stop predictions kept for the statistics
#: [s] in continuous mode the RViz outputs (stop_markers, predicted_joint_states) follow at most every this long;
#: the data outputs (stop_prediction, predicted_trajectory, joint_reactions) at every round. Building and sending
#: the markers was half of a round's work in the node process (about 2 ms of 4 at 90 Hz).
CONTINUOUS_VISUALS_PERIOD = 0.1


@dataclass(frozen=True)
class PublishedTiming:
    """When one E-stop prediction was published, on the node's monotonic clock [s]: ``trigger_wall`` the stop's
    trigger was handled, ``request_wall`` this prediction was requested (the trigger for a stop's first
    prediction, the change that made a revision due for a later one), ``published_wall`` it was published."""

    scenario: str
    trigger_wall: float
    request_wall: float
    published_wall: float

    @property
    def since_trigger(self) -> float:
        """[s] from the stop's trigger to this publication (for a revision: includes the earlier predictions)."""
        return self.published_wall - self.trigger_wall

    @property
    def since_request(self) -> float:
        """[s] from the request of this prediction to its publication."""
        return self.published_wall - self.request_wall


def published_timing(job: StopJob, published_wall: float) -> PublishedTiming:
    """The timing of ``job``'s prediction published at ``published_wall`` [s, monotonic]."""
    return PublishedTiming(job.scenario, job.trigger_wall, job.wall, published_wall)


def provenance(pred: StopPrediction, model: LoadedModel | None, choice: StartChoice | None, revision: int,
               final: bool) -> StopPrediction:
    """Mark ``pred`` with the model and start state it was made from (``prediction_io.mark_provenance``)."""
    sample = choice.sample if choice is not None else None
    return io.mark_provenance(
        pred, model_name=model.name if model else "", model_hash=model.hash if model else "",
        start_stamp=None if sample is None else (sample.header_stamp or sample.stamp),
        start_age=choice.age if choice is not None else math.nan,
        velocities_estimated=bool(sample is not None and (sample.estimated or sample.unavailable)),
        revision=revision, final=final)


class StopOutputs:
    """The predictor's publishers and what it last published; ``p`` the node's parameters (read at each use: the
    marker scales may change), ``stats`` its counters, ``log`` its log limiter."""

    def __init__(self, node: Node, p: MutableMapping[str, Any], settings: PredictionSettings,
                 stats: MutableMapping[str, int], log: Callable[[str, str], Any],
                 gate: ContinuousGate | None = None) -> None:
        self.node, self.p, self.settings, self.stats, self.log = node, p, settings, stats, log
        self.gate = gate or ContinuousGate(lambda: False)  # a stop's outputs follow every continuous one
        depth = graph.OUTPUT_DEPTH
        self.pub_pred = node.create_publisher(StopPrediction, "stop_prediction", depth)
        self.pub_traj = node.create_publisher(JointTrajectory, "predicted_trajectory", depth)
        self.pub_react = node.create_publisher(JointReactions, "joint_reactions", depth)
        self.pub_markers = node.create_publisher(MarkerArray, "stop_markers", depth)
        self.pub_ghost = node.create_publisher(JointState, "predicted_joint_states", depth)
        self.pub_stopping = node.create_publisher(StoppingDistance, "stopping_distance", depth)
        self.replay = GhostReplay(node, p, log)  # predicted_motion(_markers): its own timer
        self.live = LiveStopping()  # "if the E-stop fired now" distance beside continuous predictions
        self.last_prediction: StopPrediction | None = None
        self.last_result: Any = None
        self.ghost: JointState | None = None
        self._visuals_at = -math.inf  # monotonic [s] of the last continuous markers
        self.clock = time.monotonic
        self.timings: list[PublishedTiming] = []  # of the E-stop predictions published, oldest first
        self.last_latency = math.nan  # [s] request -> publication of the newest (diagnostics' last_latency)

    def frame(self, robot: RobotModel) -> str:
        return self.p["frame_id"] or io.root_frame_of(robot)

    def _scales(self) -> MarkerScales:
        return MarkerScales(force_scale=self.p["marker_force_scale"], torque_scale=self.p["marker_torque_scale"])

    # ------------------------------------------------------------------------------------------------ E-stops
    def result(self, res: StopResult, final: bool) -> StopPrediction:
        """Publish a successful E-stop prediction (first the StopPrediction, then the rest); returns it."""
        robot, job = res.model.robot, res.job
        stamp = seconds_to_stamp(job.instant)
        frame = self.frame(robot)
        pred = io.stop_prediction_message(robot, res.result, stamp, frame, job.scenario, self.settings.category,
                                          self.p["max_trajectory_points"])
        provenance(pred, res.model, res.choice, job.revision, final)
        self.gate.after_continuous()
        self.pub_pred.publish(pred)
        timing = published_timing(job, self.clock())
        self.last_latency = timing.since_request
        self.timings.append(timing)
        del self.timings[:-LATENCIES]
        self._companions(robot, res.result, pred, stamp, frame)
        self.replay.offer(robot, res.result, frame, continuous=False)  # constant time
        self.last_result, self.last_prediction = res.result, pred
        self.stats["predictions"] += 1
        sample = res.choice.sample
        label = res.result.invalid_label()  # a stop past a joint limit or cut off by the horizon: said, as a warning
        logger = self.node.get_logger()
        (logger.warning if label else logger.info)(
            f"{job.scenario}: {label + ': ' + res.result.invalid_text() + '; ' if label else ''}"
            f"predicted stop after {io.stop_time(res.result):.3f} s, TCP {pred.tcp_frame} path "
            f"{pred.tcp_path_length:.3f} m (straight {pred.tcp_straight_distance:.3f} m), {len(pred.events)} "
            f"events, start state {res.choice.age * 1e3:.1f} ms before the trigger"
            + (f" [velocities estimated for {list(sample.estimated)}]" if sample.estimated else ""))
        return pred

    def _companions(self, robot: RobotModel, result: Any, pred: StopPrediction, stamp: Any, frame: str) -> None:
        self.pub_traj.publish(pred.trajectory)
        self.pub_react.publish(io.joint_reactions_message(robot, result, stamp))
        self.pub_markers.publish(io.stop_markers_message(robot, result, stamp, frame, self._scales()))
        self.ghost = joint_state_message(robot.joint_names, io.rest_positions(robot, result), [0.0] * robot.nv,
                                         stamp=stamp)
        self.pub_ghost.publish(self.ghost)

    def failure(self, scenario: str, reason: str, *, job: StopJob | None, model: LoadedModel | None,
                choice: StartChoice | None = None, final: bool = False) -> StopPrediction:
        """Publish ``success=false`` with ``reason`` (and what provenance there is); returns it."""
        msg = self.failure_message(scenario, reason, job=job, model=model, choice=choice, final=final)
        self.publish_failure(msg)
        return msg

    def failure_message(self, scenario: str, reason: str, *, job: StopJob | None, model: LoadedModel | None,
                        choice: StartChoice | None = None, final: bool = False) -> StopPrediction:
        msg = StopPrediction()
        msg.header.stamp = seconds_to_stamp(job.instant) if job is not None else \
            self.node.get_clock().now().to_msg()
        msg.scenario_id = scenario
        msg.stop_category = self.settings.category
        msg.success = False
        msg.message = reason
        return provenance(msg, model, choice, job.revision if job is not None else 0, final)

    def publish_failure(self, msg: StopPrediction) -> None:
        self.gate.after_continuous()
        self.pub_pred.publish(msg)
        self.last_prediction = msg
        self.log("error", f"{msg.scenario_id}: no prediction: {msg.message}")

    def final(self, prediction: StopPrediction) -> None:
        """Republish a stop's last prediction marked final."""
        final = copy.copy(prediction)
        final.final = True
        self.gate.after_continuous()
        self.pub_pred.publish(final)

    def ghost_tick(self) -> None:
        """Republish the predicted rest pose with a fresh stamp (keeps the ghost's TF fresh)."""
        if self.ghost is not None:
            ghost = copy.copy(self.ghost)
            ghost.header.stamp = self.node.get_clock().now().to_msg()
            self.pub_ghost.publish(ghost)

    def status(self, models: ModelSlot, state_age: float, shortfall: str, values: dict[str, str]) -> DiagnosticStatus:
        """The node's /diagnostics status: ERROR without a model or brakes, WARN for a refused model, joint states
        older than a second or a continuous rate not reached; the model, the newest state's age [s], the last
        prediction and its latency [s], the counters, and ``values``."""
        model, last = models.current, self.last_prediction
        level, text = diagnostics.OK, "ok"
        if model is None:
            level, text = diagnostics.ERROR, "no robot model"
        elif models.warning:
            level, text = diagnostics.WARN, models.warning
        elif model.brakes is None:
            level, text = diagnostics.ERROR, model.brake_error
        elif state_age > 1.0:
            level, text = diagnostics.WARN, "no complete joint state in the last second"
        if shortfall and level == diagnostics.OK:
            level, text = diagnostics.WARN, shortfall
        head = {"model_name": model.name if model else "", "model_hash": model.hash if model else "",
                "joint_state_age": f"{state_age:.4f}", "last_scenario": last.scenario_id if last else "",
                "last_success": str(bool(last.success)) if last else "",
                "last_message": last.message[:200] if last else "", "last_latency": f"{self.last_latency:.4f}"}
        counts = {k: str(self.stats[k]) for k in ("triggers", "predictions", "refused_work", "rejected_inputs",
                                                  "events")}
        return diagnostics.status(f"{self.node.get_name()}: stop prediction", level, text,
                                  {**head, **counts, "model_replacements_refused": str(models.refused), **values},
                                  hardware_id=model.name if model else "", limit=300)

    # ------------------------------------------------------------------------------------------------ continuous
    def message_request(self, model: LoadedModel, sample: StateSample) -> MessageRequest:
        """What the prediction process needs to build a round's messages (``continuous_messages``)."""
        return MessageRequest(sample.stamp, sample.header_stamp, self.frame(model.aux), self.settings.category,
                              self.p["max_trajectory_points"], model.name, model.hash,
                              bool(sample.estimated or sample.unavailable))

    def nominal(self, round_: ContinuousRound) -> dict[str, Any] | None:
        """The messages of a round's nominal prediction, built before publication (the age is set then): as the
        prediction process serialized them (``serialized``), or built here."""
        result = round_.outcome.result
        if result is None:
            return None
        robot, stamp = round_.model.aux, exact_stamp(round_.sample.header_stamp, round_.sample.stamp)
        frame = self.frame(robot)
        if round_.outcome.messages is not None:
            out = {"serialized": round_.outcome.messages, "result": result}
        else:
            pred = io.stop_prediction_message(robot, result, stamp, frame, "continuous", self.settings.category,
                                              self.p["max_trajectory_points"])
            out = {"prediction": pred, "result": result,
                   "reactions": io.joint_reactions_message(robot, result, stamp)}
        now = self.clock()
        if now - self._visuals_at >= CONTINUOUS_VISUALS_PERIOD:  # RViz's markers and ghost: 10 Hz is plenty
            self._visuals_at = now
            out["markers"] = io.stop_markers_message(robot, result, stamp, frame, self._scales())
            out["ghost"] = joint_state_message(robot.joint_names, io.rest_positions(robot, result),
                                               [0.0] * robot.nv, stamp=stamp)
        return out

    def publish_nominal(self, round_: ContinuousRound, nominal: dict[str, Any] | None, age: float,
                        stale: str) -> None:
        """Publish the nominal prediction with its input age, or success=false naming why there is none."""
        model, sample = round_.model, round_.sample
        reason = round_.outcome.reason or stale
        if not reason and nominal is not None and "serialized" in nominal:
            self._publish_serialized(model, nominal, age)
            return
        pred = None if reason or nominal is None else nominal["prediction"]
        if pred is None:
            self.stats["continuous_refused"] += 1
            pred = StopPrediction(scenario_id="continuous", stop_category=self.settings.category, success=False,
                                  message=reason or "no prediction")
            pred.header.stamp = exact_stamp(sample.header_stamp, sample.stamp)
        io.mark_provenance(pred, model_name=model.name, model_hash=model.hash,
                           start_stamp=sample.header_stamp or sample.stamp, start_age=age,
                           velocities_estimated=bool(sample.estimated or sample.unavailable), revision=0, final=False)
        self.pub_pred.publish(pred)
        self.last_prediction = pred
        if not pred.success:
            return
        self.pub_traj.publish(pred.trajectory)
        self.pub_react.publish(nominal["reactions"])
        self._publish_rest(model, nominal)

    def _publish_serialized(self, model: LoadedModel, nominal: dict[str, Any], age: float) -> None:
        """A fresh round's messages as the prediction process serialized them, with the age at publication; as
        for a message built here, a prediction that is not a valid stop (not at rest within the horizon, or a joint
        carried past its limit: ``success=false``) goes out alone. Before, only the first was checked: a round
        resting past a joint limit published its trajectory, reactions, markers and ghost, and /diagnostics said
        "ok"."""
        messages, result = nominal["serialized"], nominal["result"]
        valid = bool(result.valid)
        self.pub_pred.publish(messages.prediction_with_age(age))
        self.last_prediction = StopPrediction(scenario_id="continuous", stop_category=self.settings.category,
                                              success=valid, message="ok" if valid else
                                              result.invalid_text())  # what /diagnostics reports of it
        if not valid:
            return
        self.pub_traj.publish(messages.trajectory)
        self.pub_react.publish(messages.reactions)
        self._publish_rest(model, nominal)

    def _publish_rest(self, model: LoadedModel, nominal: dict[str, Any]) -> None:
        if "markers" in nominal:
            self.pub_markers.publish(nominal["markers"])
            self.ghost = nominal["ghost"]
            self.pub_ghost.publish(self.ghost)
        self.last_result = nominal["result"]
        self.stats["predictions"] += 1
        self.replay.offer(model.aux, nominal["result"], self.frame(model.aux), continuous=True)  # constant time

    def stopping_distance(self, round_: ContinuousRound, predict: Callable[..., Any],
                          envelope: Callable[..., Any] | None = None) -> StoppingDistance:
        """The live stopping distance of a round: nominal = its prediction, worst case over the envelope predicted
        with the same settings (``predict(model, robot, state, brakes=...)`` per case, or ``envelope(model, robot,
        state, nominal, p, payload_frame)`` for all of them, e.g. ``PredictionProcess.envelope``); a failure is
        success=false."""
        model, outcome = round_.model, round_.outcome
        payload_frame = self.settings.payload_frame_of(model.aux)
        live = None
        if outcome.result is not None and model.brakes is not None:
            if envelope is not None:
                live = envelope(model, model.aux, round_.sample.state, outcome.result, self.p, payload_frame)
            else:
                live = self.live.evaluate(model.aux, model.brakes, outcome.result, self.p, payload_frame,
                                          lambda robot, brakes: predict(model, robot, round_.sample.state,
                                                                        brakes=brakes))
            if not live.error and live.worst_rest is not None:
                self.replay.offer_worst(outcome.result, live.worst_rest)
        return self._distance(round_, live, outcome.reason)

    def publish_stopping(self, round_: ContinuousRound, distance: StoppingDistance, age: float, stale: str) -> None:
        if stale and distance.success:
            distance = self._distance(round_, None, stale)
        distance.input_age = age
        self.pub_stopping.publish(distance)

    def _distance(self, round_: ContinuousRound, live: Any, reason: str) -> StoppingDistance:
        model = round_.model
        return stopping_distance_message(live, reason, stamp=exact_stamp(round_.sample.header_stamp,
                                                                              round_.sample.stamp),
                                         frame=self.frame(model.aux), model_name=model.name, model_hash=model.hash,
                                         category=self.settings.category,
                                         tcp_frame=self.settings.tcp_frame_of(model.aux))
