"""The prediction worker of ``estop_predictor``: it takes a job of the stop session and returns what the prediction
gave, with its provenance - the job, the model (name and hash), the start state and its age - and never calls back
into the node, which turns the result into messages and publishes it. Plain Python (no node, no executor).

* :func:`predict` is the one prediction call of the node (E-stops, revisions, services, continuous mode, the
  envelope of the live stopping distance): the core's ``predict_stop`` with the node's settings (stop category,
  horizon, integration step, category-1 deceleration and torque limits, TCP frame), the brakes of the model (or those given) with a
  brake event's overrides, and the abrupt locks of the stop. It never raises: a failure is an :class:`Outcome`
  with the reason, and a prediction that took longer than ``prediction_deadline`` is a failure naming it.
* :meth:`StopWorker.run` predicts one :class:`~vtm_dynamics.nodes.stop_session.StopJob`: no model, a trigger input
  that makes any prediction untrustworthy (``job.problem``) or a start state that ``choose_start_state`` refuses is
  a result with the reason; a start state not there yet is a result that says *wait* (the caller puts the job back).
* Deadline: while a prediction runs, :meth:`StopWorker.overdue` names its job once it has run longer than
  ``prediction_deadline``; the caller publishes the failure and claims the answer with :meth:`StopWorker.claim_late`
  (which succeeds only while the job still runs), and the result of that job then carries the published failure
  (``late``) instead of its own prediction - one answer per job, never two.

Times: instants and stamps [s] on the node clock ``now``; waiting and deadlines [s] on ``monotonic``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from vtm_dynamics.core.estop import CategoryOne, LockEvent, StopSettings, predict_stop
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.defaults import CATEGORY1_TORQUE_LIMITS
from vtm_dynamics.core.robot.catalogue import ROBOTS
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes import graph
from vtm_dynamics.nodes.model_slot import LoadedModel, ModelSlot
from vtm_dynamics.nodes.model_source import default_tcp_frame
from vtm_dynamics.nodes.prediction_io import apply_overrides
from vtm_dynamics.nodes.state_intake import StateIntake
from vtm_dynamics.nodes.stop_session import StartChoice, StartLimits, StopJob


@dataclass(frozen=True)
class PredictionSettings:
    """What every prediction of the node is made with: IEC 60204-1 ``category`` (0 or 1), ``horizon`` [s], the
    integration ``step`` [s], the category-1 ``deceleration`` [rad/s^2], the wall-time ``deadline`` [s], the
    configured ``tcp_frame`` ('' or a frame the model may lack), the shipped robot's name (its tool frame) and the
    category-1 drives' ``torque_limits`` [N m] (None, "urdf" or one per joint: ``CategoryOne.torque_limits``)."""

    category: int
    horizon: float
    step: float
    deceleration: float
    deadline: float
    tcp_frame: str = ""
    robot_name: str = ""
    torque_limits: str | tuple[float, ...] | None = CATEGORY1_TORQUE_LIMITS

    def category_one(self) -> CategoryOne:
        """The category-1 ramp every category-1 prediction of the node is made with."""
        return CategoryOne(deceleration=self.deceleration, torque_limits=self.torque_limits)

    def tcp_frame_of(self, robot: RobotModel) -> str:
        """The configured TCP frame if ``robot`` has it, else the robot's tool frame."""
        f = self.tcp_frame
        return f if f and robot.model.existFrame(f) else default_tcp_frame(robot, self.robot_name)

    def payload_frame_of(self, robot: RobotModel) -> str:
        """Where the stopping envelope's payload (a point mass) is attached: the shipped robot's payload frame (the
        catalogue's, where ``vtm-stopping-data``, the maps and the stop-safe check put it) if ``robot`` has it,
        else the TCP frame. The same for the live stopping distance and the separation distance."""
        spec = ROBOTS.get(self.robot_name)
        f = spec.payload_frame if spec is not None else None
        return f if f and robot.model.existFrame(f) else self.tcp_frame_of(robot)


@dataclass(frozen=True)
class Outcome:
    """What a prediction produced (``result`` None: failed with ``reason``); ``seconds`` of wall time;
    ``messages``: its continuous messages serialized where it was made (``continuous_messages``), if asked."""

    result: Any
    reason: str
    seconds: float
    messages: Any = None


def predict(model: LoadedModel, robot: RobotModel, state: Any, settings: PredictionSettings,
            overrides: Mapping[str, Mapping[str, float]] | None = None, *, brakes: BrakeSet | None = None,
            **options: Any) -> Outcome:
    """Predict the stop of ``robot`` (``model.robot`` or ``model.aux``, or a payload variant) from ``state`` (a
    ``JointStateSnapshot``: ``q``, ``v``) with ``brakes`` or the model's; never raises (module docstring)."""
    base = brakes if brakes is not None else model.brakes
    if base is None:
        return Outcome(None, model.brake_error, 0.0)
    return predict_with_brakes(robot, base, state, settings, overrides, **options)


def predict_with_brakes(robot: RobotModel, brakes: BrakeSet, state: Any, settings: PredictionSettings,
                        overrides: Mapping[str, Mapping[str, float]] | None = None, *, category: int | None = None,
                        tcp_frame: str | None = None, horizon: float | None = None, locks: Any = (),
                        clock: Callable[[], float] = time.monotonic) -> Outcome:
    """:func:`predict` with the brakes given (what a prediction process runs: it holds no model slot)."""
    start = clock()
    try:
        category = settings.category if category is None else category
        result = predict_stop(
            robot, brakes if not overrides else apply_overrides(robot, brakes, overrides), state.q, state.v,
            category=category, tcp_frame=tcp_frame or settings.tcp_frame_of(robot), lock_events=tuple(locks),
            category_one=settings.category_one() if category == 1 else None,
            settings=StopSettings(step=settings.step, t_max=horizon or settings.horizon),
        )
    except ValueError as err:
        return Outcome(None, graph.one_line(err), clock() - start)
    except Exception as err:  # noqa: BLE001 - e.g. the core's event-count guard: an answer, not a crash
        return Outcome(None, f"prediction failed ({type(err).__name__}): {graph.one_line(err)}", clock() - start)
    seconds = clock() - start
    if seconds > settings.deadline:
        return Outcome(None, f"prediction took {seconds:.2f} s, over prediction_deadline {settings.deadline:g} s",
                       seconds)
    return Outcome(result, "", seconds)


def abrupt_lock(t: float, names: tuple[str, ...]) -> LockEvent:
    """The core's abrupt lock of ``names`` at ``t`` [s] after the E-stop instant."""
    return LockEvent(max(t, 0.0), tuple(names))


@dataclass(frozen=True)
class StopResult:
    """The answer to one job with its provenance: the ``model`` used (None: there was none), the start-state
    ``choice``, the core ``result`` or the ``reason`` there is none; ``wait``: the start state is not there yet
    (put the job back); ``late``: the failure already published for this job because it overran the deadline."""

    job: StopJob
    model: LoadedModel | None
    choice: StartChoice | None = None
    result: Any = None
    reason: str = ""
    seconds: float = 0.0
    wait: bool = False
    late: Any = None


class StopWorker:
    """Predicts the jobs of the stop session from the joint states of ``intake`` with the model of ``models``."""

    def __init__(self, models: ModelSlot, intake: StateIntake, settings: PredictionSettings, limits: StartLimits,
                 now: Callable[[], float], monotonic: Callable[[], float] = time.monotonic) -> None:
        self.models, self.intake, self.settings, self.limits = models, intake, settings, limits
        self.now, self.monotonic = now, monotonic
        self.predict = predict  # the prediction call (a seam: tests wrap it)
        self._lock = threading.Lock()
        self._running: tuple[StopJob, float] | None = None  # the job being predicted, monotonic start
        self._late: dict[tuple[int, int], Any] = {}  # (stop, revision) -> the failure published for it

    def run(self, job: StopJob) -> StopResult:
        model = self.models.current
        if model is None:
            return StopResult(job, None, reason="no robot model yet (waiting for robot_description)")
        if job.problem:
            return StopResult(job, model, reason=job.problem)
        choice = self.intake.choose(self.limits, instant=job.instant, stamped=job.stamped, received=job.received,
                                    now=self.now(), waited=self.monotonic() - job.wall, at_receipt=job.at_receipt)
        if choice.wait:
            return StopResult(job, model, choice, wait=True)
        if not choice.ok:
            return StopResult(job, model, choice, reason=choice.reason)
        with self._lock:
            self._running = (job, self.monotonic())
        try:
            outcome = self.predict(model, model.robot, choice.sample.state, self.settings, job.overrides,
                                   locks=job.locks)
        finally:
            with self._lock:
                self._running = None
                late = self._late.pop((job.number, job.revision), None)
        return StopResult(job, model, choice, outcome.result, outcome.reason, outcome.seconds, late=late)

    # ------------------------------------------------------------------------------------------------ deadline
    def overdue(self) -> StopJob | None:
        """The running job once it has run longer than the deadline and is not answered yet, else None."""
        with self._lock:
            running = self._running
            if running is None:
                return None
            job, started = running
            if self.monotonic() - started <= self.settings.deadline or (job.number, job.revision) in self._late:
                return None
            return job

    def claim_late(self, job: StopJob, failure: Any) -> bool:
        """Answer ``job`` with ``failure`` (its result will carry it) if it still runs; returns whether it did."""
        with self._lock:
            running = self._running
            if running is None or running[0] != job:
                return False
            self._late[(job.number, job.revision)] = failure
            return True
