"""``solvability_reporter``: which joint reactions of the robot model are uniquely determined.

A thin node over :func:`vtm_dynamics.core.reactions.solvability.analyze_solvability` (Wojtyra & Frączek 2013).

Inputs
  ``robot_description`` (std_msgs/String, transient-local, the ROS 2 convention) or the ``urdf_path`` parameter:
  the URDF, with the vtm_dynamics extension elements (``<loop_closure>``, ``<knife_edge>``,
  ``<driving_constraint>``; see docs/urdf_extension.md).
  ``joint_states`` (sensor_msgs/JointState, best effort; ``joint_states_topic``): the configuration to analyse.
  Latest wins: at most ``max_update_rate`` analyses per second, each of the newest state received, one at a time.
Outputs
  ``~/report`` (vtm_msgs/SolvabilityReport, transient-local: late subscribers get the last report),
  ``~/markers`` (visualization_msgs/MarkerArray, transient-local): every pair as a sphere coloured by verdict
  (green unique, orange partly unique, red not unique) with its name, and arrows along the reaction directions
  that are still unique in pairs that are not (``solvability_io.solvability_markers``), in the model's root frame
  (``marker_frame`` overrides its name),
  ``/diagnostics`` (diagnostic_msgs/DiagnosticArray: OK when every reaction is unique, WARN naming the pairs whose
  reactions are not, ERROR when the newest description cannot be analysed).
Service
  ``~/analyze`` (vtm_msgs/AnalyzeSolvability): analyse any URDF text, independent of the robot description.

Messages are data: ``robot_description`` and ``AnalyzeSolvability.urdf`` must hold URDF XML text; anything else
(a file name, say) is refused with one line naming the field, and no file is ever opened for a message. Only the
``urdf_path`` parameter (trusted configuration) names a file, read once at start-up.

Bounded work: sizes are checked before any parse (``max_description_bytes``, ``max_links`` by a bounded count of
``<link`` tags, ``max_positions``); the analysis itself runs in a warm child process (:mod:`bounded_worker`) with a
wall-time deadline (``analysis_deadline``) and an address-space limit (``analysis_memory_limit``): a child that
overruns either is killed and replaced, the answer is ``success: false`` with the reason, and the node keeps
serving. The service and description callbacks are coroutines that await the child, so the executor keeps running
other callbacks meanwhile; at most ``max_pending_requests`` service calls wait, further ones are refused at once.

Report rule: ``~/report`` holds the newest *successful* analysis of the robot description. A description that
cannot be analysed is reported on ``/diagnostics`` (ERROR) and in the log and does not replace a good report; before
any good report exists, the failure report itself is latched so that subscribers learn why there is none.

Run: ``ros2 run vtm_dynamics solvability_reporter --ros-args -p urdf_path:=urdf/parallelogram_4bar.urdf``.
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from vtm_dynamics.core.reactions.solvability import DEFAULT_RANK_RTOL, METHODS
from vtm_dynamics.core.robot.urdf_extension import URDFExtensionError, read_urdf_file
from vtm_dynamics.nodes import graph
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes.bounded_worker import CRASHED, DEADLINE, ERROR, MEMORY, BoundedWorker, Outcome
from vtm_dynamics.nodes.diagnostics import diagnostic_array
from vtm_dynamics.nodes.node_main import run_node
from vtm_dynamics.nodes.solvability_io import (
    description_problem,
    solvability_markers,
    diagnostic_status,
    error_status,
    failure_message,
    positions_problem,
    report_message,
)
from vtm_dynamics.nodes.solvability_task import PRELOAD, StateAnalysis, analyze_state, analyze_text
from vtm_dynamics.nodes.work_queue import WorkQueue
from vtm_msgs.msg import SolvabilityReport as SolvabilityReportMsg
from vtm_msgs.srv import AnalyzeSolvability

#: Why the marker sizes may change at run time (the only parameters of this node that may).
MARKERS_ONLY = "drawing only: the sizes in ~/markers of the next report; no analysis, cap or verdict changes"

PARAMETERS = [
    P.ParameterSpec("urdf_path", "", "URDF file to analyse at start-up; empty: wait for the robot_description topic.",
                    P.existing_file_or_empty, read_only=True),
    P.ParameterSpec("robot_description_topic", "robot_description",
                    "Topic of the URDF text (std_msgs/String, transient-local); empty: do not subscribe.",
                    read_only=True),
    P.ParameterSpec("planar", False, "Analyse in planar absolute coordinates (x, y, phi per body) instead of spatial "
                    "ones; only for mechanisms that move in the x-y plane."),
    P.ParameterSpec("relative_tolerance", DEFAULT_RANK_RTOL, "Relative singular-value tolerance of the rank and B_X "
                    "decisions (times the largest singular value of the constraint matrix).",
                    P.in_range(1e-15, 1e-2), constraint="1e-15 <= value <= 1e-2"),
    P.ParameterSpec("max_description_bytes", 2_000_000, "Largest URDF text accepted from robot_description or "
                    "~/analyze [bytes of UTF-8]; checked before any parse.", P.in_range(1, 1_000_000_000),
                    constraint="1 <= value <= 1e9"),
    P.ParameterSpec("max_links", 500, "Most <link> elements (bodies) a URDF may declare; counted before any parse.",
                    P.in_range(1, 100_000), constraint="1 <= value <= 100000"),
    P.ParameterSpec("max_positions", 10_000, "Most entries of AnalyzeSolvability.positions.",
                    P.in_range(1, 10_000_000), constraint="1 <= value <= 1e7"),
    P.ParameterSpec("analysis_deadline", 10.0, "Wall time one analysis may take [s]; the worker process is then "
                    "killed and replaced and the answer is success=false.", P.in_range(0.01, 3600.0),
                    constraint="0.01 <= value <= 3600"),
    P.ParameterSpec("analysis_memory_limit", 1_500_000_000, "Address-space limit of the analysis worker process "
                    "[bytes] (RLIMIT_AS; includes about 0.6 GB of libraries and thread stacks).",
                    P.in_range(100_000_000, 1_000_000_000_000), read_only=True, constraint="1e8 <= value <= 1e12"),
    P.ParameterSpec("analysis_method", "auto", "dense (SVD, with the rank cross-check), sparse (memory ~ nonzeros "
                    "of the constraint matrix) or auto (dense up to 400 constraint rows, sparse above).",
                    P.one_of(METHODS), constraint="auto, dense or sparse"),
    P.ParameterSpec("joint_states_topic", "joint_states", "Topic of the configuration to analyse "
                    "(sensor_msgs/JointState); empty: analyse the neutral configuration only.", read_only=True),
    P.ParameterSpec("max_update_rate", 2.0, "Most analyses per second triggered by joint states [1/s]; each takes "
                    "the newest state (latest wins), one at a time.", P.in_range(0.01, 100.0),
                    constraint="0.01 <= value <= 100"),
    P.ParameterSpec("marker_frame", "", "frame_id of ~/markers; empty: the model's root link.", read_only=True),
    P.ParameterSpec("marker_arrow_length", 0.1, "Length of a unique-direction arrow in ~/markers [m].",
                    P.in_range(1e-4, 100.0), constraint="1e-4 <= value <= 100", live=MARKERS_ONLY),
    P.ParameterSpec("marker_size", 0.03, "Diameter of a pair's sphere in ~/markers [m].",
                    P.in_range(1e-4, 100.0), constraint="1e-4 <= value <= 100", live=MARKERS_ONLY),
    P.ParameterSpec("max_pending_requests", 4, "Most ~/analyze calls waiting for the worker; further calls are "
                    "refused at once with success=false.", P.in_range(1, 1000), constraint="1 <= value <= 1000"),
]

_HARDWARE = "robot_description"


@dataclass(frozen=True)
class _Job:
    """One admitted analysis: the URDF text and what to analyse it with."""

    urdf: str
    planar: bool
    positions: tuple[float, ...]
    rtol: float
    names: tuple[str, ...] = ()  # joint names of ``positions`` (a joint state); empty: Pinocchio order


class SolvabilityReporter(Node):
    """Publishes the solvability report of the robot description and serves analyses of any URDF text."""

    def __init__(self, **kwargs: Any) -> None:
        self.closing = ExitStack()  # what destroy_node undoes, registered as it is made (rclpy destroys a node
        super().__init__("solvability_reporter", **kwargs)  # whose constructor failed too, at context shutdown)
        self.log = graph.LogLimiter(self.get_logger())
        self.p = P.declare_validated(self, PARAMETERS, on_change=self._on_change)
        self.report_pub = self.create_publisher(SolvabilityReportMsg, "~/report", graph.LATCHED)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", graph.OUTPUT_DEPTH)
        self.marker_pub = self.create_publisher(MarkerArray, "~/markers", graph.LATCHED)
        self.worker = self.closing.enter_context(
            BoundedWorker(self.p["analysis_deadline"], self.p["analysis_memory_limit"], preload=PRELOAD))
        # one thread hands jobs to the worker in arrival order; callbacks await its results. On destroy it is
        # stopped first, without waiting: closing the worker then ends the analysis it waits for
        self._dispatch = WorkQueue("solvability", lambda err: self.log("error", f"dispatch: {graph.one_line(err)}"))
        self.closing.callback(self._dispatch.stop, 0.0)
        self._pending = 0
        self._generation = 0
        self.urdf_text = ""
        self.good_report: SolvabilityReportMsg | None = None
        self._latest_state: tuple[tuple[str, ...], tuple[float, ...]] | None = None  # newest, not yet analysed
        self._state_busy = False
        self.states_dropped = 0  # joint states superseded by a newer one before analysis (latest wins)
        # every step that touches message contents reports an unexpected exception as one line and carries on
        self._admit_description = graph.guarded(self.log, "robot_description")(self._admit_description)
        self._publish_outcome = graph.guarded(self.log, "robot_description")(self._publish_outcome)
        self._admit_request = graph.guarded(self.log, "~/analyze", default="response")(self._admit_request)
        self._answer = graph.guarded(self.log, "~/analyze", default="response")(self._answer)
        # reentrant: a coroutine that awaits the worker must not hold the group, or the next request would wait
        waiting = ReentrantCallbackGroup()
        self.create_service(AnalyzeSolvability, "~/analyze", self._analyze_service, callback_group=waiting)
        if self.p["robot_description_topic"]:
            self.create_subscription(String, self.p["robot_description_topic"], self._on_description, graph.LATCHED,
                                     callback_group=waiting)
        if self.p["joint_states_topic"]:
            self._on_joint_state = graph.guarded(self.log, "joint_states")(self._on_joint_state)
            self.create_subscription(JointState, self.p["joint_states_topic"], self._on_joint_state,
                                     graph.sensor_qos(1))
            self._state_timer = self.create_timer(1.0 / self.p["max_update_rate"], self._on_state_tick,
                                                  callback_group=waiting)
        if self.p["urdf_path"]:  # trusted configuration: the only place a file is read
            text = read_urdf_file(os.path.expanduser(self.p["urdf_path"]))  # bounded, a regular file only
            job = self._admit_description(text)
            if job is not None:
                self._publish_outcome(job, self._generation, self._run(job, self._generation))

    def destroy_node(self) -> None:
        self.closing.close()
        super().destroy_node()

    # ----------------------------------------------------------------------------------------- running the work
    def _run(self, job: _Job, generation: int | None = None) -> Outcome | None:
        """Run ``job`` in the worker (blocking; on the dispatch thread or at start-up). None: superseded by a newer
        description before it started."""
        if generation is not None and generation != self._generation:
            return None
        try:
            if generation is not None:  # the robot description, at a joint state or neutral: report + markers
                return self.worker.run(analyze_state, job.urdf, job.planar, job.names, job.positions, job.rtol,
                                       self.p["max_links"], self.p["analysis_method"],
                                       deadline=self.p["analysis_deadline"])
            return self.worker.run(analyze_text, job.urdf, job.planar, job.positions, job.rtol, self.p["max_links"],
                                   self.p["analysis_method"], deadline=self.p["analysis_deadline"])
        except Exception as err:  # noqa: BLE001 - the worker never raises; this keeps the await safe if it did
            return Outcome(CRASHED, reason=f"worker: {type(err).__name__}")

    async def _in_worker(self, job: _Job, generation: int | None = None) -> Outcome | None:
        """Await ``job`` without blocking the executor: the executor keeps serving other callbacks meanwhile."""
        executor = self.executor
        done = executor.create_future() if executor is not None else None
        work = self._dispatch.call(self._run, job, generation)
        if done is None:  # not spun by an executor: nothing else to serve
            return work.result()
        done.add_done_callback(lambda _f: None)  # completing a future with a callback wakes the executor
        work.add_done_callback(lambda w: done.set_result(
            w.result() if w.exception() is None else Outcome(CRASHED, reason="worker: dispatch failed")))
        return await done

    # ------------------------------------------------------------------------------------- robot_description
    def _on_change(self, changes: dict) -> None:
        """Only the live parameters (marker sizes) get here; every other parameter is read-only after start-up."""
        self.p.update(changes)

    async def _on_description(self, msg: String) -> None:
        await self._describe(msg.data)

    async def _describe(self, text: str) -> None:
        job = self._admit_description(text)
        if job is None:
            return
        generation = self._generation
        outcome = await self._in_worker(job, generation)
        self._publish_outcome(job, generation, outcome)

    def _admit_description(self, text: str) -> _Job | None:
        """Check the description before any parse; publish the refusal, or return the job (newest generation)."""
        self._generation += 1
        problem = description_problem(text, "robot_description", self.p["max_description_bytes"],
                                      self.p["max_links"])
        if problem is not None:
            self._publish_failure(problem)
            return None
        self.urdf_text = text
        return _Job(text, bool(self.p["planar"]), (), float(self.p["relative_tolerance"]))

    def _publish_outcome(self, job: _Job, generation: int, outcome: Outcome | None) -> None:
        if outcome is None or generation != self._generation:
            return  # a newer description arrived meanwhile: its analysis is what counts
        if not outcome.ok:
            self._publish_failure(f"robot_description: cannot analyse: {failure_reason('', outcome)}")
            return
        value = outcome.value
        report = value.report if isinstance(value, StateAnalysis) else value
        stamp = self.get_clock().now().to_msg()
        if isinstance(value, StateAnalysis):
            self.marker_pub.publish(solvability_markers(
                value.placements, self.p["marker_frame"] or value.frame, stamp, self.p["marker_arrow_length"],
                self.p["marker_size"]))
        msg = report_message(report)
        msg.header.stamp = stamp
        diag = diagnostic_array(stamp, diagnostic_status(report, report.model or _HARDWARE))
        line = f"{report.model}: rank {report.rank}, redundancy {report.redundancy}; {msg.message}"
        self.log("warning" if report.unsolvable else "info", line)
        self.good_report = msg
        self.report_pub.publish(msg)
        self.diag_pub.publish(diag)

    # -------------------------------------------------------------------------------------------- joint_states
    def _on_joint_state(self, msg: JointState) -> None:
        """Keep only the newest state (cheap, linear checks); the timer decides when it is analysed."""
        problem = positions_problem(msg.position, self.p["max_positions"])
        if problem is None and len(msg.name) != len(msg.position):
            problem = f"name: {len(msg.name)} names for {len(msg.position)} positions"
        if problem is not None:
            self.log("warning", f"joint_states: ignored: {problem}")
            return
        if self._latest_state is not None:
            self.states_dropped += 1
        self._latest_state = (tuple(str(n) for n in msg.name), tuple(float(x) for x in msg.position))

    async def _on_state_tick(self) -> None:
        """At most ``max_update_rate`` times a second: analyse the newest state, if any, unless one is running."""
        if self._latest_state is None or self._state_busy or not self.urdf_text:
            return
        names, positions = self._latest_state
        self._latest_state = None
        job = _Job(self.urdf_text, bool(self.p["planar"]), positions, float(self.p["relative_tolerance"]), names)
        generation = self._generation
        self._state_busy = True
        try:
            outcome = await self._in_worker(job, generation)
        finally:
            self._state_busy = False
        self._publish_outcome(job, generation, outcome)

    def _publish_failure(self, reason: str) -> None:
        """ERROR on /diagnostics and in the log; the latched report is replaced only if no good one exists."""
        stamp = self.get_clock().now().to_msg()
        kept = self.good_report
        text = reason if kept is None else f"{reason}; ~/report still holds the last good report ({kept.model_name})"
        self.log("error", text)
        diag = diagnostic_array(stamp, error_status(_HARDWARE, text))
        if kept is None:
            msg = failure_message("", reason)
            msg.header.stamp = stamp
            self.report_pub.publish(msg)
        self.diag_pub.publish(diag)

    # ----------------------------------------------------------------------------------------------- ~/analyze
    async def _analyze_service(self, request: AnalyzeSolvability.Request,
                               response: AnalyzeSolvability.Response) -> AnalyzeSolvability.Response:
        admitted = self._admit_request(request, response)
        if not isinstance(admitted, _Job):
            return response
        self._pending += 1
        try:
            outcome = await self._in_worker(admitted)
        finally:
            self._pending -= 1
        return self._answer(response, outcome)

    def _admit_request(self, request: AnalyzeSolvability.Request,
                       response: AnalyzeSolvability.Response) -> _Job | AnalyzeSolvability.Response:
        problem = (description_problem(request.urdf, "urdf", self.p["max_description_bytes"], self.p["max_links"])
                   or positions_problem(request.positions, self.p["max_positions"]))
        if problem is None and self._pending >= self.p["max_pending_requests"]:
            problem = f"busy: {self._pending} requests already wait for the analysis (max_pending_requests)"
        if problem is not None:
            return self._refuse(response, problem)
        return _Job(request.urdf, bool(request.planar), tuple(float(x) for x in request.positions),
                    float(self.p["relative_tolerance"]))

    def _answer(self, response: AnalyzeSolvability.Response, outcome: Outcome) -> AnalyzeSolvability.Response:
        if not outcome.ok:
            return self._refuse(response, failure_reason("urdf", outcome))
        response.report = report_message(outcome.value)
        response.report.header.stamp = self.get_clock().now().to_msg()
        response.success = True
        response.message = response.report.message
        return response

    def _refuse(self, response: AnalyzeSolvability.Response, reason: str) -> AnalyzeSolvability.Response:
        response.success = False
        response.message = reason
        response.report = failure_message("", reason)
        self.log("warning", f"~/analyze: {reason}")
        return response


def failure_reason(field: str, outcome: Outcome) -> str:
    """One line for an analysis that did not succeed: the core's own reason for bad input (it names the element
    or field), otherwise what stopped the worker."""
    prefix = f"{field}: " if field else ""
    if outcome.kind == ERROR and outcome.expected:
        named = outcome.reason.startswith(("positions:", f"{field}:")) or not field  # already names its field
        return outcome.reason if named else prefix + outcome.reason
    if outcome.kind == ERROR:
        return f"{prefix}analysis failed ({outcome.error_type}: {outcome.reason})"
    parameter = {DEADLINE: " (analysis_deadline)", MEMORY: " (analysis_memory_limit)"}.get(outcome.kind, "")
    return f"{prefix}analysis stopped: {outcome.reason}{parameter}"


def main(args: list[str] | None = None) -> int:
    return run_node("solvability_reporter", SolvabilityReporter, (P.ParameterError, OSError, URDFExtensionError), args)


if __name__ == "__main__":
    sys.exit(main())
