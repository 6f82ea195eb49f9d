"""``estop_predictor`` node: live emergency-stop prediction on a joint-state stream.

A thin node over ROS-free parts (docs/architecture.md lists them; each states its rules and has its tests): it
declares the parameters (``estop_parameters``), converts messages into the values the parts take, hands work to
its workers and publishes what comes back (``stop_outputs``). The physics is ``vtm_dynamics.core.estop``.

Inputs: ``robot_description`` (URDF text, never a path; or the ``urdf_path`` / ``robot`` parameter),
``joint_states`` (best effort: reliable and sensor-data publishers both match), ``estop`` (the E-stop line:
``trigger_*`` parameters), ``brake_events`` (ENGAGE / RELEASE, per-joint overrides), ``lock_events`` and
``person_position`` (``live_separation``). Outputs: ``stop_outputs``, ``live_separation``, ``/diagnostics``.
Services ``predict_stop`` (``stop_request``) and ``~/check_trajectory`` (``trajectory_check``).

Work and priorities. Triggers and events are never rate-limited or dropped (a deep reliable queue and cheap
callbacks); with ``event_thread`` an executor thread of their own serves them (``event_executor``), so floods on the
other inputs never queue before a trigger. Their work runs on the trigger worker, merged (revisions at most
``event_rate_limit`` per second); services, continuous rounds and parsing run on a second worker, which pauses while
E-stop work is due (both ``work_queue`` threads); the continuous rounds' predictions run in a child process
(``prediction_process``), where they never hold the interpreter lock the E-stop path needs. A prediction still
running after ``prediction_deadline`` is answered ``success=false`` by the watchdog timer. Parameters are read-only
after start-up except the marker scales (``parameter_policy``).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from vtm_msgs.msg import BrakeEvent, LockEvent
from vtm_msgs.srv import CheckTrajectory, PredictStop

from vtm_dynamics.core.estop.inputs import torque_limits_text
from vtm_dynamics.core.robot.model import ModelError
from vtm_dynamics.nodes import diagnostics, graph
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes import prediction_io as io
from vtm_dynamics.nodes.continuous_mode import ContinuousMode, ContinuousOutput
from vtm_dynamics.nodes.prediction_process import PredictionProcess
from vtm_dynamics.nodes.conversions import UnsupportedJointError, stamp_to_seconds
from vtm_dynamics.nodes.estop_line import EstopLine
from vtm_dynamics.nodes.estop_parameters import PARAMETERS, prediction_settings, start_limits, trigger_of
from vtm_dynamics.nodes.event_executor import EventExecutor
from vtm_dynamics.nodes.live_freshness import ContinuousGate
from vtm_dynamics.nodes.live_separation import LiveSeparation
from vtm_dynamics.nodes.model_slot import LoadedModel, ModelSlot, build_model
from vtm_dynamics.nodes.model_source import load_urdf_text
from vtm_dynamics.nodes.node_main import run_node
from vtm_dynamics.nodes.service_host import ServiceHost
from vtm_dynamics.nodes.state_intake import StateIntake, publisher_of, receipt_time
from vtm_dynamics.nodes.stop_outputs import StopOutputs
from vtm_dynamics.nodes.stop_request import StopRequests
from vtm_dynamics.nodes.stop_session import StopSession
from vtm_dynamics.nodes.stop_triggers import StopTriggers, TriggerStep
from vtm_dynamics.nodes.stop_worker import Outcome, StopResult, StopWorker, predict
from vtm_dynamics.nodes.stopsafe_kit import StopsafeKits
from vtm_dynamics.nodes.trajectory_check import TrajectoryChecks
from vtm_dynamics.nodes.work_priority import MESSAGE_BUILDERS, PAUSE_PACKAGE, UrgentWork
from vtm_dynamics.nodes.work_queue import WorkQueue

NODE_NAME = "estop_predictor"
SWITCH_INTERVAL = 2e-4  # [s] Python thread switch interval of a process that runs the predictor (run_node)
WATCHDOG_PERIOD = 0.05  # [s] granularity of the prediction_deadline check
HISTORY_LENGTH = 2000  # complete joint states kept (4 s at 500 Hz: a trigger served late still finds its state)
STATS = ("joint_states_ok", "joint_states_rejected", "predictions", "triggers", "events", "refused_work",
         "rejected_inputs", "continuous_refused")


class EstopPredictor(Node):
    """See the module docstring. Build with ``EstopPredictor(parameter_overrides=[...])`` or from ROS args."""

    def __init__(self, **node_kwargs: Any) -> None:
        self.closing = ExitStack()  # what destroy_node undoes, registered as it is made (rclpy destroys a node
        super().__init__(NODE_NAME, **node_kwargs)  # whose constructor failed too, when its context shuts down)
        self.log = graph.LogLimiter(self.get_logger())
        self.p = P.declare_validated(self, PARAMETERS, self._on_parameters)
        self.trigger_rule, trigger_type, self.trigger = trigger_of(self.p)
        self.line_source = f"{self.trigger_rule.topic} topic"
        self.stats = dict.fromkeys(STATS, 0)
        self.settings, limits = prediction_settings(self.p), start_limits(self.p)
        self.models = ModelSlot(self.p["allow_model_replacement"])
        self.intake = StateIntake(HISTORY_LENGTH, self.now, self.p["future_stamp_tolerance"],
                                  max_velocity_gap=self.p["max_start_state_age"],
                                  rest_hold=self.p["max_start_state_age"])
        self.session, self.line = StopSession(), EstopLine(self.p["max_estop_publishers"])
        self.continuous_gate = ContinuousGate(lambda: self.session.active)  # nothing continuous during a stop
        self.triggers = StopTriggers(self.session, self.line, self.continuous_gate, self.intake)
        self.revision_bucket = graph.TokenBucket(self.p["event_rate_limit"], self.p["event_burst"])
        self.urgent = UrgentWork(max_wait=2.0 * self.p["prediction_deadline"] + 1.0)  # other work pauses for E-stops
        self.worker = StopWorker(self.models, self.intake, self.settings, limits, self.now)
        self.outputs = StopOutputs(self, self.p, self.settings, self.stats, self.log, self.continuous_gate)
        # continuous predictions run in a child process (prediction_process: never the E-stop path's lock)
        self.continuous_calls = PredictionProcess(self.settings, self.p["prediction_deadline"] + 1.0,
                                                  before_call=self.urgent.pause)
        self.closing.callback(self.continuous_calls.close)  # also if the constructor fails below
        self.urgent.on_change = self.continuous_calls.suspend  # stopped while E-stop work is due or running
        if self.p["continuous_rate"] > 0:
            self.continuous_calls.start()
        self.continuous = ContinuousMode(self.continuous_gate, self.urgent, self.intake, self.models, limits,
                                         self.continuous_calls.predict, self.now,
                                         pause_packages=(PAUSE_PACKAGE, *MESSAGE_BUILDERS),
                                         nominal_options=lambda model, sample: {
                                             "messages": self.outputs.message_request(model, sample)})
        self.continuous.add(ContinuousOutput("stop_prediction", self.outputs.nominal, self.outputs.publish_nominal))
        self.continuous.add(ContinuousOutput("stopping_distance",
                                             lambda round_: self.outputs.stopping_distance(
                                                 round_, self.continuous_calls.predict,
                                                 self.continuous_calls.envelope),
                                             self.outputs.publish_stopping, lambda: self.p["stopping_distance"]))
        self.kits = StopsafeKits(self.p, self.settings)  # collision geometry and stop cases, built on first use
        self.separation = LiveSeparation(self, self.p, self.kits, self.settings.category, self.log, self.now)
        self.continuous.add(self.separation.output)
        self.requests = StopRequests(self.models, self.predict, self.p["max_horizon"], self.p["frame_id"],
                                     self.p["max_trajectory_points"], self.stats)
        text = load_urdf_text(self.p["robot"], self.p["urdf_path"])
        if text:  # the last step that may refuse the node; no thread runs before it
            self._install(self._build(text), self.p["urdf_path"] or f"robot {self.p['robot']!r}")
        self._stopping = False
        self.trigger_work = self.closing.enter_context(WorkQueue("estop-trigger-worker", self._on_worker_error))
        self.aux = self.closing.enter_context(WorkQueue("estop-aux-worker", self._on_worker_error))
        self.closing.callback(self._halt)  # first on destroy: paused work goes on, the workers can end
        self.closing.callback(self.continuous_calls.close)  # before that: a call waiting for the child returns
        self.events = self.closing.enter_context(EventExecutor(self, "estop-event-executor", self._on_worker_error)) \
            if self.p["event_thread"] else None
        group = self.events.group if self.events is not None else None
        events_qos = graph.events_qos(self.p["event_queue_depth"])
        if self.p["robot_description_topic"]:
            self.create_subscription(String, self.p["robot_description_topic"],
                                     graph.guarded(self.log, "robot_description")(self.on_description), graph.LATCHED)
        self.create_subscription(JointState, "joint_states", self._guard("joint_states", self.on_joint_state),
                                 graph.sensor_qos(20))
        for msg_type, topic, callback in ((trigger_type, self.trigger_rule.topic, self.on_estop),
                                          (BrakeEvent, "brake_events", self.on_brake_event),
                                          (LockEvent, "lock_events", self.on_lock_event)):
            self.create_subscription(msg_type, topic, self._guard(topic, callback), events_qos, callback_group=group)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", graph.OUTPUT_DEPTH)
        self.service_host = ServiceHost(self, self.aux, self.urgent, self.p["max_pending_requests"],
                                        self.p["prediction_deadline"] + 1.0, f"no answer within prediction_deadline "
                                        f"{self.p['prediction_deadline']:g} s", self.stats, self.log)
        self.service_host.offer(PredictStop, "predict_stop", self.requests)
        self.checks = TrajectoryChecks(self.models, self.kits, self.p, self.stats, self.log)
        self.service_host.offer(CheckTrajectory, "~/check_trajectory", self.checks)  # its deadline: check_deadline
        self.create_timer(WATCHDOG_PERIOD, graph.guarded(self.log, "watchdog")(self._on_watchdog))
        for rate, callback, where in ((self.p["continuous_rate"], self._on_continuous, "continuous"),
                                      (self.p["ghost_rate"], self.outputs.ghost_tick, "ghost"),
                                      (self.p["diagnostics_rate"], self._publish_diagnostics, "diagnostics")):
            if rate > 0:
                self.create_timer(1.0 / rate, graph.guarded(self.log, where)(callback))
        if self.events is not None:
            self.events.start()
        model = self.models.current.name if self.models.current else "(waiting for robot_description)"
        ramp = (f" (ramp {self.settings.deceleration:g} rad/s^2, drive torque limits "
                f"{torque_limits_text(self.settings.torque_limits)})" if self.settings.category == 1 else "")
        self.get_logger().info(f"estop_predictor ready: model {model}, stop category {self.p['stop_category']}{ramp}, "
                               f"continuous_rate {self.p['continuous_rate']} Hz")

    def destroy_node(self) -> None:
        self.closing.close()
        super().destroy_node()

    def _halt(self) -> None:
        """Shutting down: the trigger worker takes no more jobs; work paused for an E-stop goes on to its end."""
        self._stopping = True
        self.urgent.release()

    # ----------------------------------------------------------------------------------------- views of the parts
    @property
    def model(self) -> LoadedModel | None:
        return self.models.current

    @property
    def robot(self) -> Any:
        return self.models.current.robot if self.models.current else None

    @property
    def stop(self) -> Any:
        """The current stop (None when re-armed)."""
        return self.session.current

    @property
    def pending(self) -> Any:
        """The current stop while a prediction of it is due or running, else None (the demo waits on it)."""
        stop = self.session.current
        return stop if stop is not None and (stop.dirty or stop.in_flight) else None

    def now(self) -> float:
        """Node clock [s]."""
        return self.get_clock().now().nanoseconds * 1e-9

    def predict(self, model: LoadedModel, robot: Any, state: Any, **options: Any) -> Outcome:
        """The node's prediction call (``stop_worker.predict`` with the node's settings)."""
        return predict(model, robot, state, self.settings, **options)

    def _guard(self, where: str, func: Any) -> Any:
        """A guarded subscription callback that still receives the message info (receipt time, publisher)."""
        guarded = graph.guarded(self.log, where)(func)
        return lambda msg, info: guarded(msg, info)

    def _on_parameters(self, changes: dict[str, Any]) -> None:
        """Only the live parameters (the marker scales) get here (``parameter_policy``)."""
        self.p.update(changes)

    def _on_worker_error(self, err: BaseException) -> None:
        self.log("error", f"worker: unexpected {type(err).__name__}: {graph.one_line(err)}")

    # ------------------------------------------------------------------------------------------------- model
    def _build(self, text: str) -> LoadedModel:
        model = build_model(text, self.p["brake_config"], self.p["robot"])
        if model.brakes is None:
            self.log("error", f"brake configuration unusable, predictions refused: {model.brake_error}")
        return model

    def _install(self, model: LoadedModel, source: str) -> None:
        robot, tcp = model.robot, self.p["tcp_frame"]
        if tcp and not robot.model.existFrame(tcp):
            self.get_logger().warning(f"tcp_frame {tcp!r} is not in model {robot.name!r}; using "
                                      f"{self.settings.tcp_frame_of(robot)!r}")
        self.models.install(model)
        self.intake.reset(robot)
        self.outputs.ghost = None
        self.get_logger().info(f"model {robot.name!r} (hash {model.hash}) from {source}: joints "
                               f"{list(robot.joint_names)}")

    def on_description(self, msg: String) -> None:
        """Queue the description for the auxiliary worker (parsing can be slow); the newest one wins."""
        verdict = self.models.admit(msg.data)
        if verdict.action == "refuse":
            self.log("warning", verdict.reason)
        elif verdict.action == "parse":
            self.aux.submit(lambda text=msg.data: self._replace_model(text), key="description")

    def _replace_model(self, text: str) -> None:
        """On the auxiliary worker: parse and, if the slot's rule allows, install the description."""
        with self.urgent.yielding():  # parsing pauses for E-stop work
            verdict, model = self.models.replace(text, self._build)
        if verdict.action == "invalid":
            self._reject(verdict.reason, "error")
        elif verdict.action == "refuse":
            self.log("warning", verdict.reason)
        elif verdict.action == "install":
            self._install(model, "robot_description")

    # ------------------------------------------------------------------------------------------------ inputs
    def on_joint_state(self, msg: JointState, info: Any = None) -> None:
        got = self.intake.receive(msg, receipt_time(info), publisher_of(info))
        if got.no_model:
            self.log("warning", "joint_states: ignored until a robot model is known")
            return
        if got.rejected:
            self.stats["joint_states_rejected"] += 1
            self.stats["rejected_inputs"] += 1
            self.log("warning", f"joint_states: message dropped: {got.rejected}")
            return
        self.stats["joint_states_ok"] += 1
        if got.sample is not None and self.triggers.closer_state(got.sample):
            self._wake()  # a late state closer to the E-stop instant: revise from it
        for line in got.warnings:  # unknown joints, values older than those held, no velocities
            self.log("warning", line)

    def _known(self, names: list[str], topic: str) -> list[str]:
        known, warning = self.models.known(names, topic)
        if warning:
            self.log("warning", warning)
        return known

    def on_estop(self, msg: Any, info: Any = None) -> None:
        self.stats["events"] += 1
        self._act(self.triggers.line_value(publisher_of(info), self.trigger.stopping(msg), receipt_time(info),
                                           self.line_source), "E-stop line released")

    def on_brake_event(self, msg: BrakeEvent, info: Any = None) -> None:
        received = receipt_time(info)
        self.stats["events"] += 1
        if msg.action == BrakeEvent.RELEASE:
            self._known(list(msg.joint_names), "brake_events")  # reports unknown names; a release re-arms anyway
            if self.session.active:
                self._act(self.triggers.end(), "brakes released")
            return
        if msg.action != BrakeEvent.ENGAGE:
            self._reject(f"brake_events: unknown action {msg.action} ignored")
            return
        if not self.p["trigger_on_brake_event"] and not self.session.active:
            return
        instant, stamped, overrides, problem = io.engage_inputs(
            msg, self._known(list(msg.joint_names), "brake_events"), max_delay=self.p["max_engage_delay"],
            now=self.now(), receipt_instant=self.intake.instant_of(received),
            future_tolerance=self.p["future_stamp_tolerance"])
        if problem:  # the trigger still counts: its prediction says why it cannot be trusted
            self._reject(problem)
        self._act(self.triggers.engage(instant=instant, stamped=stamped, received=received, overrides=overrides,
                                       problem=problem, source="brake event"))

    def on_lock_event(self, msg: LockEvent, info: Any = None) -> None:
        self.stats["events"] += 1
        action = {LockEvent.LOCK: "LOCK", LockEvent.UNLOCK: "UNLOCK"}.get(msg.action)
        if action is None:  # judged before the names: a bad event is reported even when it names no joint
            self._reject(f"lock_events: unknown action {msg.action} ignored")
            return
        if not msg.joint_names:
            self._reject(f"lock_events: joint_names: empty, {action} of no joint ignored")
            return
        names = self._known(list(msg.joint_names), "lock_events")
        if not names:
            return
        stop, model = self.session.current, self.models.current
        self.log("info", f"lock event {action} {names[:20]} ({msg.source[:80] or 'no source'})"  # a repeated event
                 + (f" during E-stop {stop.number}" if stop else ""))  # is one line per period, not a /rosout flood
        if stop is not None and action == "LOCK" and model is not None:
            self._act(self.triggers.lock(stamp_to_seconds(msg.header.stamp), names, model.robot, self.p["horizon"]))

    def _reject(self, reason: str, level: str = "warning") -> str:
        self.stats["rejected_inputs"] += 1
        self.log(level, reason)
        return reason

    def _act(self, step: TriggerStep, why: str = "") -> None:
        """Do what an input's step says: wake the trigger worker (first: logging publishes on /rosout), count and
        log a trigger, end a stop."""
        if step.wake:
            self._wake()
        if step.kind in ("new", "joined", "revised"):
            self.stats["triggers"] += 1
        if step.kind == "new":
            self.get_logger().info(f"E-stop {step.stop.number} triggered by {step.stop.source}")
        if step.kind == "ended":
            self.continuous.rate.restart()  # nothing continuous ran during the stop: judge its rate afresh
            self.get_logger().info(f"{why}: E-stop {step.stop.number} ended, re-armed")
            if step.final is not None:
                self.outputs.final(step.final)
        if step.warning:
            self.log("warning", step.warning)

    # -------------------------------------------------------------------------------------------- E-stop work
    def _wake(self) -> None:
        """E-stop work is due: other work pauses (``work_priority``) and the trigger worker takes the due jobs."""
        self.urgent.raise_()
        self.trigger_work.submit(self._drain, key="due jobs")

    def _drain(self) -> None:
        """On the trigger worker: predict and publish every due job, then let paused work go on."""
        while not self._stopping:
            epoch = self.urgent.epoch
            job = self.session.take_job()
            if job is None:
                self.urgent.settle(epoch)  # nothing due: the paused work goes on
                return
            if job.revision > 0 and not self.revision_bucket.allow():  # merge revisions beyond the rate
                self.stats["refused_work"] += 1
                self.session.put_back(job)
                time.sleep(min(0.05, 1.0 / max(self.p["event_rate_limit"], 1e-3)))
                continue
            try:
                self._deliver(self.worker.run(job))
            except Exception as err:  # noqa: BLE001 - the worker must survive anything; say so on the topic
                self.log("error", f"trigger worker: unexpected {type(err).__name__}: {graph.one_line(err)}")
                self.outputs.failure(job.scenario, f"internal error ({type(err).__name__})", job=job,
                                     model=self.models.current, final=not self.session.is_current(job.number))
                self.session.record(job, False, None, None, None)

    def _deliver(self, res: StopResult) -> None:
        """Publish the answer to a job, record it in the session, and do what follows from it."""
        job, session = res.job, self.session
        if res.wait:  # its start state is not there yet
            session.put_back(job)
            time.sleep(0.002)
            return
        if res.late is not None:  # already answered success=false by the watchdog: the late result is dropped
            pred, result, used = res.late, None, None
        elif res.result is None:
            pred, result, used = self.outputs.failure(job.scenario, res.reason, job=job, model=res.model,
                                                      choice=res.choice, final=not session.is_current(job.number)), \
                None, None
        else:
            pred = self.outputs.result(res, final=not session.is_current(job.number))
            result, used = res.result, res.choice.sample
        if session.record(job, bool(pred.success), result, pred, used) == "final" and not pred.final:
            self.outputs.final(pred)  # the stop ended while this prediction was made
        if result is not None:
            self._act(self.triggers.after_result(job, bool(pred.success), res.model.robot, self.p["horizon"]))

    def _on_watchdog(self) -> None:
        """Answer a prediction that overran ``prediction_deadline`` now (its late result is dropped), and every
        service request that waited longer than its deadline."""
        job = self.worker.overdue()
        if job is not None:
            failure = self.outputs.failure_message(
                job.scenario, f"prediction still running after prediction_deadline {self.p['prediction_deadline']:g}"
                              " s", job=job, model=self.models.current, final=not self.session.is_current(job.number))
            if self.worker.claim_late(job, failure):
                self.stats["refused_work"] += 1
                self.outputs.publish_failure(failure)
        self.service_host.watchdog()

    # ------------------------------------------------------------------------------------------ continuous
    def _on_continuous(self) -> None:
        if not self.session.active and self.models.current is not None:
            self.aux.submit(self.continuous.run, key="continuous")  # merged: one round waits at a time

    def _publish_diagnostics(self) -> None:
        shortfall = "" if self.session.active else self.continuous.rate.shortfall(self.p["continuous_rate"])
        values = {"continuous_rate": f"{self.p['continuous_rate']:g}",
                  "continuous_rate_achieved": f"{self.continuous.rate.achieved():.2f}",
                  "continuous_shortfall": shortfall, "continuous_refused": str(self.stats["continuous_refused"]),
                  "continuous_dropped_for_stop": str(self.continuous_gate.dropped),
                  "continuous_cpus": self.continuous_calls.cpus, "paused_for_estop": str(self.urgent.pauses),
                  "estop_line_holders": str(self.line.holders), "estop_unrecorded_holders": str(self.line.unrecorded)}
        self.pub_diag.publish(diagnostics.diagnostic_array(self.get_clock().now().to_msg(), self.outputs.status(
            self.models, self.intake.age(), shortfall, values)))

def main(args: list[str] | None = None) -> int:
    return run_node(NODE_NAME, EstopPredictor, (P.ParameterError, ModelError, UnsupportedJointError), args,
                    switch_interval=SWITCH_INTERVAL)


if __name__ == "__main__":
    raise SystemExit(main())
