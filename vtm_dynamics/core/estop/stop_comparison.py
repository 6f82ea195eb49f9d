"""Predicted against recorded stops: stopping angles, stop times and TCP distances, and the safety verdict on them.

A prediction that stops the robot sooner or shorter than it really stopped is non-conservative: a separation
distance computed from it is too small. :func:`shortfalls` lists every stop whose predicted stop time or TCP
distance falls short of the recorded one by more than a tolerance. Stop times are read by one rule on both sides
(:func:`~.recorded.settle_time` with the recorded stop's threshold; for a recording without velocities on the speeds
:func:`~.recorded.position_velocities` derives from the positions at the recording's sample instants, the
recorded ones and the prediction's alike: :func:`predicted_stop_time`). Units: rad, s, m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.inputs import StopSettings
from vtm_dynamics.core.estop.output_error import StopPredictor, interp_hermite
from vtm_dynamics.core.estop.recorded import RecordedStop, position_velocities, settle_time
from vtm_dynamics.core.estop.results import StopPrediction
from vtm_dynamics.core.estop.series import configuration_of, travelled
from vtm_dynamics.core.robot.model import RobotModel


@dataclass(frozen=True)
class StopComparison:
    """Predicted vs recorded for one stop: stopping angles (nv) [rad] (rest minus trigger), stop times [s], TCP
    straight-line distances [m] (nan without a TCP frame) and the RMS angle residual [rad] over the samples; the
    prediction's sample times ``predicted_t`` [s] and positions ``predicted_q`` (K x nv, one per joint,
    :func:`predicted_positions`). Prismatic joints in m. ``failure``: why the engine could not predict the stop
    ("" when it did): a failed prediction compares as nan, and its reports give this reason rather than only
    "not at rest"."""

    label: str
    recorded_angles: np.ndarray
    predicted_angles: np.ndarray
    recorded_time: float
    predicted_time: float
    recorded_tcp: float
    predicted_tcp: float
    rms_residual: float
    predicted_t: np.ndarray
    predicted_q: np.ndarray
    failure: str = ""

    @property
    def main_joint(self) -> int:
        """The joint that moved most in the recording, all joints in one unit (a revolute robot's; with joints in
        rad and m use :meth:`main_joints`, which never compares metres with radians)."""
        return int(np.argmax(np.abs(self.recorded_angles)))

    def main_joints(self, units: Sequence[str]) -> list[int]:
        """Per position unit (``units``: one per joint, "rad" or "m"), in the order the units first appear, the
        joint of that unit that moved most in the recording. A travel in m and an angle in rad are not compared:
        a robot on a linear track has one main joint in rad and one in m."""
        travel = np.abs(np.asarray(self.recorded_angles, dtype=float))
        out = []
        for unit in dict.fromkeys(units):
            mine = [i for i, u in enumerate(units) if u == unit]
            out.append(mine[int(np.argmax(travel[mine]))])
        return out

    def relative(self, what: str, joint: int | None = None) -> float:
        """(predicted - recorded) / recorded of ``what`` in angle (of ``joint``, default :attr:`main_joint`), time,
        tcp; nan if unknown."""
        if what == "angle":
            i = self.main_joint if joint is None else joint
            rec, pred = abs(self.recorded_angles[i]), abs(self.predicted_angles[i])
        elif what == "time":
            rec, pred = self.recorded_time, self.predicted_time
        else:
            rec, pred = self.recorded_tcp, self.predicted_tcp
        return (pred - rec) / rec if rec and math.isfinite(rec) and math.isfinite(pred) else math.nan


def predicted_positions(robot: RobotModel, prediction: StopPrediction, stop: RecordedStop) -> np.ndarray:
    """(K x nv) the predicted position of every joint [rad; m for prismatic joints] at the prediction's samples,
    continuous with the recorded start ``stop.q0``: ``prediction.q`` where q is a vector; a continuous joint
    (q holds its (cos, sin)) counted from its recorded angle, whole turns included."""
    if robot.nq == robot.nv:
        return prediction.q
    return np.asarray(stop.q0, dtype=float) + travelled(robot, prediction.q)


def predicted_stop_time(prediction: StopPrediction, stop: RecordedStop, rest_speed: float | None = None,
                        positions: np.ndarray | None = None) -> float:
    """The stop time [s] of ``prediction`` by the rule ``stop`` was timed with (threshold ``rest_speed`` [rad/s],
    default the stop's), read on the recording's own sample instants (continued at its median sample step while the
    prediction goes on after the last one), so that the recording's noise is the only difference between the two
    sides: :func:`~.recorded.settle_time` of the predicted velocities there (cubic Hermite from the prediction's
    velocities and accelerations), or, for a stop timed by its positions (``stop.timed_by_positions``), of
    :func:`~.recorded.position_velocities` of the predicted angles there; nan if the prediction does not come to
    rest; ``positions``: the prediction's one position per joint (:func:`predicted_positions`; default
    ``prediction.q``, right where q is a vector). (Read on the prediction's own samples, up to 20 ms apart, the
    linear interpolation of the speed between them put stop times of Coulomb-viscous brakes up to 3.2 % early against a 500 Hz recording of the same stop.)"""
    rest_speed = stop.rest_speed if rest_speed is None else rest_speed
    if not prediction.stopped:
        return math.nan
    times = recording_instants(prediction, stop)
    if not stop.timed_by_positions:
        return settle_time(times, interp_hermite(prediction.t, prediction.v, prediction.a, times), rest_speed)
    q = interp_hermite(prediction.t, prediction.q if positions is None else positions, prediction.v, times)
    return settle_time(times, position_velocities(times, q), rest_speed)


def recording_instants(prediction: StopPrediction, stop: RecordedStop) -> np.ndarray:
    """The sample instants [s] of ``stop``, continued at its median sample step past its last one while
    ``prediction`` goes on (its state is constant past its end)."""
    times = np.asarray(stop.t, dtype=float)
    steps = np.diff(times)
    step = float(np.median(steps[steps > 0])) if np.any(steps > 0) else 0.0
    if step > 0 and prediction.t[-1] > times[-1]:
        more = int(math.ceil((prediction.t[-1] - times[-1]) / step)) + 2  # past the end: q is constant there
        times = np.concatenate([times, times[-1] + step * np.arange(1, more + 1)])
    return times


def compare_prediction(robot: RobotModel, prediction: StopPrediction | None, stop: RecordedStop,
                       tcp_frame: str | None, rest_speed: float | np.ndarray | None = None,
                       failure: str = "") -> StopComparison:
    """One stop's comparison (a failed prediction compares as nan, ``failure`` saying why); the predicted stop time
    by the rule the recorded one was read with (:func:`predicted_stop_time`), threshold ``rest_speed`` [rad/s, m/s
    for a prismatic joint; one value or one per joint] (default: the stop's own)."""
    rest_speed = stop.rest_speed if rest_speed is None else rest_speed
    rec_tcp = pred_tcp = math.nan
    if tcp_frame is not None:
        a = robot.frame_placement(configuration_of(robot, stop.q0), tcp_frame).translation
        b = robot.frame_placement(configuration_of(robot, stop.q[-1]), tcp_frame).translation
        rec_tcp = float(np.linalg.norm(b - a))
    if prediction is None:
        nan = np.full(robot.nv, math.nan)
        return StopComparison(stop.label, stop.q[-1] - stop.q0, nan, stop.stop_time, math.nan, rec_tcp, math.nan,
                              math.nan, np.zeros(0), np.zeros((0, robot.nv)),
                              failure or "the engine gave no prediction")
    positions = predicted_positions(robot, prediction, stop)
    qp = interp_hermite(prediction.t, positions, prediction.v, stop.t)
    if tcp_frame is not None:
        pred_tcp = prediction.tcp_straight_distance
    return StopComparison(
        stop.label, stop.q[-1] - stop.q0, prediction.stopping_angles, stop.stop_time,
        predicted_stop_time(prediction, stop, rest_speed, positions), rec_tcp, pred_tcp,
        float(np.sqrt(np.mean((qp - stop.q) ** 2))), prediction.t, positions,
    )


def compare_stops(robot: RobotModel, brakes: BrakeSet, stops: Sequence[RecordedStop], tcp_frame: str | None = None,
                  settings: StopSettings = StopSettings(step=0.01), rest_speed: float | np.ndarray | None = None,
                  predictor: StopPredictor | None = None) -> list[StopComparison]:
    """Predicted vs recorded stopping angle, time and TCP distance for each stop (see :class:`StopComparison`).
    The predicted time is read by the rule the recorded stop time was read with (:func:`predicted_stop_time`),
    with ``rest_speed`` [rad/s] (default: each stop's own threshold)."""
    predictor = predictor or StopPredictor(robot, settings)
    failures: list[str] = []
    preds = predictor.predict_many([(brakes, s) for s in stops], tcp_frame, to_rest=True, failures=failures)
    return [compare_prediction(robot, p, s, tcp_frame, rest_speed, f) for p, s, f in zip(preds, stops, failures)]


@dataclass(frozen=True)
class Shortfall:
    """A stop predicted shorter than recorded: ``what`` (time | tcp), the relative error (negative; nan when the
    prediction did not come to rest or failed), and ``failure``: why the engine could not predict it ("" if it
    did)."""

    label: str
    what: str
    relative: float
    failure: str = ""


def shortfalls(comparisons: Sequence[StopComparison], tolerance: float) -> list[Shortfall]:
    """Every stop whose predicted stop time or TCP distance is shorter than recorded by more than ``tolerance``
    (relative), or that the prediction does not bring to rest (unknown counts as short)."""
    out = []
    for c in comparisons:
        for what in ("time", "tcp"):
            rel = c.relative(what)
            if what == "tcp" and not math.isfinite(c.recorded_tcp):
                continue
            if not math.isfinite(rel) or rel < -tolerance:
                out.append(Shortfall(c.label, what, rel, c.failure))
    return out
