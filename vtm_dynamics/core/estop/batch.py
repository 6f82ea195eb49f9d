"""Many stop predictions in one call: states x payloads x brake tolerance factors (Müller 2026, eqs. (3) and (22)
with brakes, as :func:`~vtm_dynamics.core.estop.predict_stop`).

What the cases share is set up once: the model with each distinct payload (a point mass at ``payload_frame``,
:func:`.payload.with_payload`), the brakes scaled by each distinct (torque factor, delay factor) pair
(:meth:`BrakeSet.scaled`), and the compiled engine of each model with its tables. Each case is then
the same computation as one :func:`predict_stop` call with that model and those brakes, so the results are
bit-identical to N single calls (a test checks it). With ``generated=True`` (large batches: the workspace map) the
compiled engine computes M(q) and h(q, v) with generated, compiled code inside one compiled call per Runge-Kutta
step (:mod:`vtm_dynamics.core.estop.generated_dynamics`, with each model's inertias, so payloads included) and the
event loop as one compiled call (:mod:`vtm_dynamics.core.estop.compiled_driver`): about 2.5x the batch rate, but
0.3-0.5 s of set-up per process (about 20 s the first time on a machine), so small batches such as an envelope do
not take it. Its results agree with N single calls (which use Pinocchio's CRBA and RNEA) to
rounding, 1e-10 in stop times, rest angles and TCP distances (a test checks it); an unsupported model or a missing
generator use Pinocchio. Units: rad, rad/s, kg, s.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np

from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.inputs import CategoryOne, LockEvent, StopInputError, StopSettings, states_pass_checks
from vtm_dynamics.core.estop.payload import with_payload
from vtm_dynamics.core.estop.prediction import predict_with
from vtm_dynamics.core.estop.results import StopPrediction
from vtm_dynamics.core.estop.generated_dynamics import generated_stages, unavailable_reason
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.excerpt import first_line

MAX_BATCH = 10_000_000  # cases per call (a workspace map of 10^6 states runs in chunks far below this)


class BatchStopError(StopInputError):
    """A case of a batch could not be predicted: ``index`` names it, the message is the case's one-line error."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(f"case {index}: {message}")
        self.index = index
        self.reason = message


class StopBatch:
    """The shared set-up of a batch for ``robot`` (WITHOUT payload) and ``brakes``: payload models and scaled
    brakes built on first use and kept (pass ``models`` to share the payload models with other batches; one
    StopBatch per thread, like a RobotModel); ``generated``: M and h from generated code where available (module
    docstring; :meth:`generated_reason` says why not)."""

    def __init__(self, robot: RobotModel, brakes: BrakeSet, payload_frame: str | None = None,
                 models: dict[float, RobotModel] | None = None, generated: bool = False) -> None:
        self.robot, self.brakes, self.payload_frame = robot, brakes, payload_frame
        self.generated = generated
        self.models = {} if models is None else models
        self._scaled: dict[tuple[float, float], BrakeSet] = {}
        self._engines: dict = {}

    def model(self, payload: float) -> RobotModel:
        """The robot carrying ``payload`` [kg] at the payload frame (built once per mass)."""
        m = float(payload)
        if m not in self.models:
            if m != 0.0 and self.payload_frame is None:
                raise StopInputError("payload_frame: a frame is needed to attach a payload")
            self.models[m] = self.robot if m == 0.0 else with_payload(self.robot, m, self.payload_frame)
        return self.models[m]

    def scaled(self, torque_factor: float, delay_factor: float) -> BrakeSet:
        """The brakes scaled by the factors (:meth:`BrakeSet.scaled`, built once per pair)."""
        key = (float(torque_factor), float(delay_factor))
        if key not in self._scaled:
            if len(self._scaled) >= 4096:  # maps draw the factors per state: keep the cache bounded
                self._scaled.clear()
            self._scaled[key] = self.brakes if key == (1.0, 1.0) else self.brakes.scaled(*key)
        return self._scaled[key]

    def predict(self, q: object, v: object, payload: float = 0.0, torque_factor: float = 1.0,
                delay_factor: float = 1.0, **options) -> StopPrediction:
        """One case (the keyword ``options`` of :func:`predict_stop`)."""
        return predict_with(self.model(payload), self.scaled(torque_factor, delay_factor), q, v,
                            engines=self._engines, generated=self.generated, **options)

    def generated_reason(self, payload: float = 0.0) -> str | None:
        """None when the stops with ``payload`` [kg] use generated M and h (or ``generated`` is off), else why they
        use Pinocchio (for a log line)."""
        if not self.generated:
            return None
        model = self.model(payload)
        return unavailable_reason(model) if generated_stages(model) is None else None


def predict_stops(
    robot: RobotModel,
    brakes: BrakeSet,
    q: Sequence,
    v: Sequence,
    *,
    payloads: Sequence[float] | None = None,
    torque_factors: Sequence[float] | None = None,
    delay_factors: Sequence[float] | None = None,
    payload_frame: str | None = None,
    category: int = 0,
    category_one: CategoryOne | None = None,
    lock_events: Iterable[LockEvent] = (),
    tcp_frame: str | None = None,
    settings: StopSettings = StopSettings(),
    progress: Callable[[int, int], None] | None = None,
    batch: StopBatch | None = None,
    generated: bool = False,
) -> list[StopPrediction]:
    """Predict N stops: case k starts from (q[k] [rad], v[k] [rad/s]) with ``payloads[k]`` [kg] at
    ``payload_frame`` (default 0) and the brakes scaled by ``torque_factors[k]`` and ``delay_factors[k]``
    (default 1); the other options are those of :func:`predict_stop` and apply to every case. ``robot`` carries
    no payload. ``progress(done, total)`` after each case; ``batch`` reuses the set-up of an earlier call (same
    robot and brakes); ``generated``: M and h from generated code where available (:class:`StopBatch`; ignored when
    ``batch`` is given). Raises :class:`BatchStopError` naming the first case that cannot be predicted."""
    n = len(q)
    if len(v) != n:
        raise StopInputError(f"v: {len(v)} states for {n} configurations")
    if n > MAX_BATCH:
        raise StopInputError(f"q: at most {MAX_BATCH} cases per batch, got {n}")
    columns = {}
    for name, given, default in (("payloads", payloads, 0.0), ("torque_factors", torque_factors, 1.0),
                                 ("delay_factors", delay_factors, 1.0)):
        col = np.full(n, default) if given is None else np.asarray(given, dtype=float).reshape(-1)
        if col.shape != (n,):
            raise StopInputError(f"{name}: expected {n} values, got {col.size}")
        columns[name] = col
    if batch is None:
        batch = StopBatch(robot, brakes, payload_frame, generated=generated)
    elif batch.robot is not robot or batch.brakes is not brakes:
        raise StopInputError("batch: set up for another robot or brake set")
    locks = tuple(lock_events)
    payload, torque, delay = (columns[name].tolist() for name in ("payloads", "torque_factors", "delay_factors"))
    checked = states_pass_checks(robot, q, v)  # else each case is checked, and the first that fails is named
    if checked is not None:
        q, v = checked
    out = []
    for k in range(n):
        try:
            out.append(batch.predict(q[k], v[k], payload[k], torque[k], delay[k], category=category,
                                     category_one=category_one, lock_events=locks, tcp_frame=tcp_frame,
                                     settings=settings, checked=checked is not None))
        except BatchStopError:
            raise
        except Exception as err:  # noqa: BLE001 - every failure of a case is reported with its index
            text = first_line(err)
            raise BatchStopError(k, text) from err
        if progress is not None:
            progress(k + 1, n)
    return out
