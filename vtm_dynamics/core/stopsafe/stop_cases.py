"""The stops predicted from each sampled state: every stop category asked for, over the envelope's cases.

A case is one stop category (IEC 60204-1: 0 or 1) with one corner (or interior sample) of the uncertainty envelope
(:func:`vtm_dynamics.core.estop.envelope.envelope_samples`: brake-torque factor, engage-delay factor, payload).
:func:`predict_stops` is the ONE place where this package asks the E-stop engine for predictions (Müller 2026,
eq. (3) with the brakes' generalized forces, eq. (22) at abrupt locks), through the engine's batch
(:class:`vtm_dynamics.core.estop.batch.StopBatch`: each case is what :func:`vtm_dynamics.core.estop.predict_stop`
gives, with the compiled engines, payload models and scaled brakes set up once). Units: SI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from vtm_dynamics.core.estop import CategoryOne, StopInputError, StopPrediction, StopSettings
from vtm_dynamics.core.estop.batch import StopBatch
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.envelope import EnvelopeSpec, envelope_samples
from vtm_dynamics.core.estop.payload import with_payload
from vtm_dynamics.core.robot.model import RobotModel

MAX_CASES = 64  # categories x envelope samples per state


class CheckCancelled(RuntimeError):
    """The caller's cancel hook asked to stop, or the deadline passed (the message says which)."""


@dataclass(frozen=True)
class StopCase:
    """One predicted stop per state: ``category`` and the envelope factors ``torque_factor``, ``delay_factor`` and
    ``payload`` [kg]."""

    category: int
    torque_factor: float
    delay_factor: float
    payload: float

    def label(self) -> str:
        return (f"cat {self.category}, torque x{self.torque_factor:.3g}, delay x{self.delay_factor:.3g}, "
                f"payload {self.payload:.3g} kg")


@dataclass
class StopSetup:
    """Everything that is the same for all stops: the bare ``robot`` (no payload), its ``brakes``, the
    ``envelope`` (None: the nominal brakes only), the ``categories``, the category-1 ramp ``category_one``, the
    ``payload_frame`` and the engine ``settings``. Derived lazily: the cases, a model per payload mass and scaled
    brakes per case, through the batch (one setup per thread)."""

    robot: RobotModel
    brakes: BrakeSet
    envelope: EnvelopeSpec | None = None
    categories: tuple[int, ...] = (0,)
    category_one: CategoryOne | None = None
    payload_frame: str | None = None
    settings: StopSettings = StopSettings()
    _models: dict = field(default_factory=dict, repr=False)
    _batch: StopBatch | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.categories or any(c not in (0, 1) for c in self.categories) or \
                len(set(self.categories)) != len(self.categories):
            raise StopInputError(f"categories: expected 0 and/or 1, got {list(self.categories)}")
        if self.envelope is not None and self.envelope.payload[1] > 0 and self.payload_frame is None:
            self.payload_frame = self.envelope.payload_frame
        if self.envelope is not None and self.envelope.payload[1] > 0 and self.payload_frame is None:
            raise StopInputError("envelope.payload_frame: a frame is needed to attach a payload")
        if len(self.cases) > MAX_CASES:
            raise StopInputError(f"envelope: {len(self.cases)} cases per state, more than {MAX_CASES}")

    @property
    def cases(self) -> tuple[StopCase, ...]:
        samples = envelope_samples(self.envelope) if self.envelope is not None else [(1.0, 1.0, 0.0)]
        return tuple(StopCase(c, tf, df, m) for c in self.categories for tf, df, m in samples)

    @property
    def worst_corner(self) -> tuple[StopCase, ...]:
        """One case per category: the weakest brakes, the longest delays, the heaviest payload of the envelope
        (the corner that usually stops last; :mod:`vtm_dynamics.core.estop.envelope` says why it is a sample,
        not a bound)."""
        if self.envelope is None:
            return tuple(StopCase(c, 1.0, 1.0, 0.0) for c in self.categories)
        e = self.envelope
        return tuple(StopCase(c, float(e.torque_factor[0]), float(e.delay_factor[1]), float(e.payload[1]))
                     for c in self.categories)

    def model(self, mass: float) -> RobotModel:
        if mass not in self._models:
            self._models[mass] = self.robot.copy() if mass == 0 else with_payload(self.robot, mass, self.payload_frame)
        return self._models[mass]

    @property
    def batch(self) -> StopBatch:
        """The engine's batch over this setup's models (shared with :meth:`model`) and brakes."""
        if self._batch is None:
            self._batch = StopBatch(self.model(0.0), self.brakes, self.payload_frame, models=self._models)
        return self._batch



def predict_stops(setup: StopSetup, q: np.ndarray, v: np.ndarray, *,
                  cases: Sequence[StopCase] | None = None, cancel: Callable[[], bool] | None = None,
                  progress: Callable[[int, int], None] | None = None) -> list[tuple[StopPrediction, ...]]:
    """Predict every case of ``setup`` (or the given ``cases``) from each state (``q`` N x nq [rad], ``v``
    N x nv [rad/s], model order): a list (N) of tuples (one prediction per case, in case order). ``cancel()`` is
    polled between states (:class:`CheckCancelled`); ``progress(done, total)`` counts stops. A state the engine
    refuses raises :class:`StopInputError` naming the state's index."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    v = np.atleast_2d(np.asarray(v, dtype=float))
    cases = setup.cases if cases is None else tuple(cases)
    c1 = setup.category_one or CategoryOne()
    out: list[tuple[StopPrediction, ...]] = []
    total = len(q) * len(cases)
    for n in range(len(q)):
        if cancel is not None and cancel():
            raise CheckCancelled("cancelled: the caller asked to stop")
        preds = []
        for case in cases:
            try:
                setup.model(case.payload)  # the batch shares this setup's models
                preds.append(setup.batch.predict(q[n], v[n], case.payload, case.torque_factor, case.delay_factor,
                                                 category=case.category, category_one=c1, settings=setup.settings))
            except StopInputError as err:
                raise StopInputError(f"state {n}: {err}") from None
        out.append(tuple(preds))
        if progress is not None:
            progress((n + 1) * len(cases), total)
    return out


def stop_times(predictions: Sequence[StopPrediction]) -> tuple[float, np.ndarray]:
    """(worst stop time [s], per-joint worst rest times [s]) over a state's cases; a stop that did not end within
    the horizon counts as its horizon."""
    worst = 0.0
    joints = np.zeros(len(predictions[0].joint_stop_times))
    for p in predictions:
        horizon = float(p.t[-1])
        worst = max(worst, p.stop_time if p.stopped and math.isfinite(p.stop_time) else horizon)
        js = np.where(np.isfinite(p.joint_stop_times), p.joint_stop_times, horizon)
        joints = np.maximum(joints, js)
    return worst, joints
