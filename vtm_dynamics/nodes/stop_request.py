"""The ``predict_stop`` service of ``estop_predictor`` (vtm_msgs/PredictStop): an on-demand prediction from a given
state, answered by the node's auxiliary worker (``service_queue``). No node, no executor: request in, response out.

The request is data: its state names every joint of the model (any order) with positions and velocities, its
``stop_category`` is 0 or 1, its ``tcp_frame`` (empty: the node's) a frame of the model, its ``horizon`` (0: the
node's) finite and at most ``max_horizon``, its ``brake_config_yaml`` (empty: the node's brakes) YAML text parsed
within limits. Anything else is ``success=false`` with one line naming the field, as is a prediction that fails
(its reason). The answer is predicted on the worker's copy of the model with the node's settings and carries the
model's name and hash; the service publishes nothing.
"""

from __future__ import annotations

import math
from typing import Any, Callable, MutableMapping

import numpy as np

from vtm_dynamics.nodes import graph
from vtm_dynamics.nodes import prediction_io as io
from vtm_dynamics.nodes.conversions import JointStateError, parse_joint_state
from vtm_dynamics.nodes.model_slot import ModelSlot
from vtm_dynamics.nodes.stop_worker import Outcome

#: ``scenario_id`` of a service answer.
SCENARIO = "service"


class StopRequests:
    """Answers PredictStop requests: ``predict(model, robot, state, **options)`` is the node's prediction call;
    ``frame_id`` ('' = the URDF root link) and ``max_points`` shape the answer; ``stats['rejected_inputs']``
    counts refused requests."""

    def __init__(self, models: ModelSlot, predict: Callable[..., Outcome], max_horizon: float, frame_id: str,
                 max_points: int, stats: MutableMapping[str, int]) -> None:
        self.models, self.predict, self.max_horizon = models, predict, float(max_horizon)
        self.frame_id, self.max_points, self.stats = frame_id, int(max_points), stats

    def answer(self, request: Any, response: Any) -> Any:
        """Validate and predict one request; returns ``response`` filled."""
        model = self.models.current
        try:
            if model is None:
                raise ValueError("no robot model yet (waiting for robot_description)")
            robot = model.aux
            state, brakes = self._inputs(request, robot)
            outcome = self.predict(model, robot, state, category=request.stop_category,
                                   tcp_frame=request.tcp_frame or None, horizon=request.horizon or None,
                                   brakes=brakes)
            if outcome.result is None:
                raise ValueError(outcome.reason)
        except (ValueError, RecursionError) as err:
            self.stats["rejected_inputs"] += 1
            reason = "brake_config_yaml: nested too deeply" if isinstance(err, RecursionError) else \
                graph.one_line(err)
            self.refuse(response, reason)
            if model is not None:
                response.prediction.model_name, response.prediction.model_hash = model.name, model.hash
            return response
        stamp = request.state.header.stamp
        frame = self.frame_id or io.root_frame_of(robot)
        response.prediction = io.stop_prediction_message(robot, outcome.result, stamp, frame, SCENARIO,
                                                         request.stop_category, self.max_points)
        io.mark_provenance(response.prediction, model_name=model.name, model_hash=model.hash, start_stamp=stamp,
                           start_age=0.0, velocities_estimated=False, revision=0, final=True)
        response.reactions_at_rest = io.joint_reactions_message(robot, outcome.result, stamp)
        response.success = True
        response.message = "ok"
        return response

    def refuse(self, response: Any, reason: str) -> Any:
        """``response`` as a failure with ``reason`` (also on its prediction)."""
        response.success = False
        response.message = reason
        response.prediction.success = False
        response.prediction.message = reason
        return response

    def _inputs(self, request: Any, robot: Any) -> tuple[Any, Any]:
        """(start state, brakes or None) of a request; ``ValueError`` naming the field."""
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
        if request.horizon > self.max_horizon:
            raise ValueError(f"horizon: {request.horizon:g} s exceeds max_horizon {self.max_horizon:g} s")
        brakes = io.brakes_from_yaml_text(robot, request.brake_config_yaml) if request.brake_config_yaml else None
        positions = np.array([parsed.positions[n] for n in robot.joint_names])
        v = np.array([parsed.velocities[n] for n in robot.joint_names])
        return io.snapshot(robot, parsed.stamp, positions, v), brakes
