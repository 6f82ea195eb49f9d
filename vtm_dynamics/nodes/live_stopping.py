"""Live stopping distance: "if the E-stop fired now", the TCP stopping distance and time from the newest joint
state, nominal and the worst case of the uncertainty envelope, on ``stopping_distance`` (vtm_msgs/StoppingDistance).

ISO/TS 15066 speed-and-separation monitoring puts the robot's stopping distance into the protective separation
distance; what it needs is the worst credible value now, not the nominal one alone. In continuous mode
(``continuous_rate`` > 0) the predictor hands every continuous prediction (the nominal case) to
:class:`LiveStopping`, which predicts the envelope's other cases (brake torque x, engage delay x, payload at the
robot's payload frame, the same as the separation distance's: corners plus ``stopping_envelope_random`` seeded samples, :func:`vtm_dynamics.core.estop.envelope.envelope_samples`)
through the node's own prediction call (same category, horizon, step and deadline) and publishes the nominal and
the worst values. A case that fails, or that is not at rest within the horizon (its distance is then the distance
travelled until the horizon, not to rest), makes the message ``success=false`` naming it: a worst case over part of
the envelope, or a distance short of the rest, is never published as a result. Units: m, s, kg.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from vtm_msgs.msg import StoppingDistance

from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.defaults import ENVELOPE_DELAY_FACTOR, ENVELOPE_TORQUE_FACTOR
from vtm_dynamics.core.estop.envelope import EnvelopeSpec, envelope_samples
from vtm_dynamics.core.estop.limit_crossings import crossings_text
from vtm_dynamics.core.estop.payload import with_payload
from vtm_dynamics.core.robot.catalogue import ROBOTS
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes import params as P

RATED_PAYLOAD = -1.0  # stopping_envelope_payload_max: the named robot's rated payload


def _payload_max(value: Any) -> str | None:
    if value == RATED_PAYLOAD or P.in_range(0.0, 1000.0)(value) is None:
        return None
    return "must be -1 (the rated payload) or lie in [0, 1000]"


def envelope_payload_max(p: Mapping[str, Any]) -> float:
    """[kg] the envelope's largest payload from the parameters: ``stopping_envelope_payload_max``, or for -1 the
    rated payload of the catalogue robot named by ``robot`` (0 when there is none: a robot given by URDF or by
    robot_description has no rating the node knows). Before, the default was 0 kg, so the node's live stopping
    distance, separation distance and trajectory check left out the payload the command-line tools include: on
    the UR5's demo state the worst case stopped in 0.106 s instead of 0.219 s."""
    value = float(p["stopping_envelope_payload_max"])
    if value != RATED_PAYLOAD:
        return value
    spec = ROBOTS.get(p.get("robot") or "")
    return float(spec.rated_payload) if spec is not None and spec.rated_payload else 0.0


LIVE_PARAMETERS = (
    P.ParameterSpec("stopping_distance", True, "In continuous mode, also publish 'stopping_distance' "
                    "(vtm_msgs/StoppingDistance): nominal and envelope worst-case TCP stopping distance and time."),
    P.ParameterSpec("stopping_envelope", True, "Evaluate the envelope for the worst case; false: worst = nominal "
                    "(envelope_cases 1)."),
    P.ParameterSpec("stopping_envelope_torque_min", ENVELOPE_TORQUE_FACTOR[0],
                    "Envelope: smallest brake-torque factor.",
                    P.in_range(0.01, 10.0), constraint="0.01 .. 10"),
    P.ParameterSpec("stopping_envelope_torque_max", ENVELOPE_TORQUE_FACTOR[1], "Envelope: largest brake-torque factor.",
                    P.in_range(0.01, 10.0), constraint="0.01 .. 10, >= torque_min (else the message is a failure naming it)"),
    P.ParameterSpec("stopping_envelope_delay_min", ENVELOPE_DELAY_FACTOR[0], "Envelope: smallest engage-delay factor.",
                    P.in_range(0.0, 10.0), constraint="0 .. 10"),
    P.ParameterSpec("stopping_envelope_delay_max", ENVELOPE_DELAY_FACTOR[1], "Envelope: largest engage-delay factor.",
                    P.in_range(0.0, 10.0), constraint="0 .. 10, >= delay_min (else the message is a failure naming it)"),
    P.ParameterSpec("stopping_envelope_payload_max", RATED_PAYLOAD, "Envelope: largest payload [kg], a point mass "
                    "at the robot's payload frame (tool0 on the shipped arms, as in the separation distance and "
                    "vtm-stopping-data; else the TCP frame). The smallest is 0; the model's own payload, if any, "
                    "comes on top. -1 (default): the rated payload of the shipped robot named by 'robot' (UR5 5 kg, "
                    "UR3 3 kg), as vtm-check-trajectory and vtm-safety-distance take it; 0 for any other robot.",
                    _payload_max, constraint="-1 or 0 .. 1000 kg"),
    P.ParameterSpec("stopping_envelope_random", 0, "Envelope: seeded random interior cases beside the corners.",
                    P.in_range(0, 64), constraint="0 .. 64"),
)


@dataclass(frozen=True)
class LiveStop:
    """Nominal ``distance`` / ``path_length`` [m] and ``time`` [s], the worst of each over ``cases``, wall
    ``seconds``; ``error`` non-empty when some case failed (then the values are not a result); ``worst_rest``:
    the rest configuration of the case with the worst distance (for the replay's worst-case marker)."""

    distance: float
    path_length: float
    time: float
    worst_distance: float
    worst_path_length: float
    worst_time: float
    cases: int
    seconds: float
    error: str = ""
    worst_rest: Any = None


#: why a case that did not stop within the horizon gives no value
NOT_AT_REST = "not at rest within the horizon (no distance to rest; a longer horizon may give one)"

#: the parameters the envelope is evaluated with (what the prediction process is given of the node's)
ENVELOPE_KEYS = ("stopping_envelope", "stopping_envelope_torque_min", "stopping_envelope_torque_max",
                 "stopping_envelope_delay_min", "stopping_envelope_delay_max", "stopping_envelope_payload_max",
                 "stopping_envelope_random")


def envelope_parameters(p: Mapping[str, Any]) -> dict[str, Any]:
    """The envelope's parameters as the prediction process is given them, the largest payload resolved
    (:func:`envelope_payload_max`: the child does not know the robot's name)."""
    out = {k: p[k] for k in ENVELOPE_KEYS}
    out["stopping_envelope_payload_max"] = envelope_payload_max(p)
    return out


@dataclass(frozen=True)
class StopSummary:
    """What the envelope uses of the nominal prediction: TCP ``tcp_straight_distance`` and ``tcp_path_length``
    [m], ``stop_time`` [s], whether it ``stopped``, ``q_final`` and its ``limit_crossings`` (joints carried past
    their limits: then it is not the robot's stop)."""

    tcp_straight_distance: float
    tcp_path_length: float
    stop_time: float
    stopped: bool
    q_final: Any
    limit_crossings: tuple[str, ...] = ()

    @classmethod
    def of(cls, result: Any) -> "StopSummary":
        return cls(float(result.tcp_straight_distance), float(result.tcp_path_length), float(result.stop_time),
                   bool(result.stopped), result.q_final, tuple(result.limit_crossings))

    def values(self) -> tuple[float, float, float]:
        return _values(self)


def _past_limit(result: Any) -> str:
    """Why a stop that carries a joint past its limit gives no distance (as ``StopPrediction.limit_text``)."""
    return crossings_text(tuple(result.limit_crossings))


def _values(result: Any) -> tuple[float, float, float]:
    t = float(result.stop_time) if result.stopped else math.inf
    return float(result.tcp_straight_distance), float(result.tcp_path_length), t


class LiveStopping:
    """Envelope cases around a nominal continuous prediction (module docstring). Keeps the payload variants of the
    current model (one per distinct mass), rebuilt when the model changes."""

    def __init__(self) -> None:
        self._models: dict[tuple[int, float], RobotModel] = {}

    @staticmethod
    def spec(p: dict) -> EnvelopeSpec:
        """The envelope of the parameters; ``ValueError`` naming the parameter when a maximum is below its
        minimum (then the message says so instead of a value)."""
        for what in ("torque", "delay"):
            if p[f"stopping_envelope_{what}_max"] < p[f"stopping_envelope_{what}_min"]:
                raise ValueError(f"stopping_envelope_{what}_max: below stopping_envelope_{what}_min")
        tf = (p["stopping_envelope_torque_min"], p["stopping_envelope_torque_max"])
        df = (p["stopping_envelope_delay_min"], p["stopping_envelope_delay_max"])
        return EnvelopeSpec(torque_factor=tf, delay_factor=df, payload=(0.0, envelope_payload_max(p)),
                            n_random=int(p["stopping_envelope_random"]), seed=0)

    def _model(self, robot: RobotModel, mass: float, frame: str) -> RobotModel:
        if mass == 0:
            return robot
        key = (id(robot), mass)
        if key not in self._models:
            if len(self._models) > 64 or any(k[0] != id(robot) for k in self._models):
                self._models.clear()
            self._models[key] = with_payload(robot, mass, frame)
        return self._models[key]

    def evaluate(self, robot: RobotModel, brakes: BrakeSet, nominal: Any, p: dict, payload_frame: str,
                 predict: Callable[[RobotModel, BrakeSet], Any]) -> LiveStop:
        """The envelope around ``nominal`` (a core StopPrediction or its :class:`StopSummary`), its payload attached
        at ``payload_frame`` (``PredictionSettings.payload_frame_of``);
        ``predict(robot, brakes)`` returns the node's ``Outcome`` (``result`` None: ``reason``)."""
        start = time.monotonic()
        d0, l0, t0 = _values(nominal)
        worst = [d0, l0, t0]
        worst_rest = nominal.q_final
        cases = 1
        if not nominal.stopped or nominal.limit_crossings:
            return LiveStop(d0, l0, t0, math.nan, math.nan, math.nan, cases, time.monotonic() - start,
                            f"nominal case: {NOT_AT_REST if not nominal.stopped else _past_limit(nominal)}")
        if p["stopping_envelope"]:
            try:
                samples = envelope_samples(self.spec(p))[1:]
            except ValueError as err:
                return LiveStop(d0, l0, t0, math.nan, math.nan, math.nan, cases, time.monotonic() - start, str(err))
            for tf, df, mass in samples:
                outcome = predict(self._model(robot, mass, payload_frame), brakes.scaled(torque_factor=tf,
                                                                                    delay_factor=df))
                if outcome.result is None or not outcome.result.stopped or outcome.result.limit_crossings:
                    reason = outcome.reason if outcome.result is None else NOT_AT_REST if not \
                        outcome.result.stopped else _past_limit(outcome.result)
                    return LiveStop(d0, l0, t0, math.nan, math.nan, math.nan, cases, time.monotonic() - start,
                                    f"envelope case (torque x{tf:.3g}, delay x{df:.3g}, payload {mass:.3g} kg): "
                                    f"{reason}")
                values = _values(outcome.result)
                if values[0] > worst[0]:
                    worst_rest = outcome.result.q_final
                worst = [max(a, b) for a, b in zip(worst, values)]
                cases += 1
        return LiveStop(d0, l0, t0, *worst, cases, time.monotonic() - start, worst_rest=worst_rest)


def stopping_distance_message(live: LiveStop | None, reason: str, *, stamp: Any, frame: str, model_name: str,
                              model_hash: str, category: int, tcp_frame: str) -> StoppingDistance:
    """The message for ``live`` (None, or with an error: ``success=false`` with the reason, values NaN)."""
    msg = StoppingDistance()
    msg.header.stamp = stamp
    msg.header.frame_id = frame
    msg.model_name, msg.model_hash, msg.stop_category, msg.tcp_frame = model_name, model_hash, category, tcp_frame
    nan = math.nan
    if live is None or live.error:
        msg.success = False
        msg.message = reason or (live.error if live else "no prediction")
        msg.distance = msg.path_length = msg.time = nan
        msg.worst_distance = msg.worst_path_length = msg.worst_time = nan
        msg.envelope_cases = 0 if live is None else live.cases
        msg.computation_time = nan if live is None else live.seconds
        return msg
    msg.success = True
    msg.distance, msg.path_length, msg.time = live.distance, live.path_length, live.time
    msg.worst_distance, msg.worst_path_length, msg.worst_time = live.worst_distance, live.worst_path_length, live.worst_time
    msg.envelope_cases = live.cases
    msg.computation_time = live.seconds
    return msg
