"""The ``check_trajectory`` service of ``estop_predictor`` (vtm_msgs/CheckTrajectory): would every emergency stop
along a planned trajectory end clear of the scene, and how fast may it run so that it does. Answered on the
node's auxiliary worker with pauses for E-stop work (``service_host``); no node, no executor: request in,
response out.

The request is converted and checked by ``stopsafe_io`` (every size capped, one line naming the field); the
check is the core's (:class:`~vtm_dynamics.core.stopsafe.check.TrajectoryChecker`, and
:func:`~vtm_dynamics.core.stopsafe.speed_scaling.largest_speed_scaling` for the uniform speed scaling) on the
current model's collision geometry and stop cases (``stopsafe_kit``). Every prediction of the answer is counted
against ``check_max_stops`` and ``check_deadline`` (:class:`~vtm_dynamics.nodes.stopsafe_kit.StopBudget`), so the
work stops within one prediction of either and the answer is ``success=false`` naming the parameter; the service's
own deadline (the watchdog's) is one second later. The answer carries the model's name and hash, the TCP frame,
the cases and the trajectory's stamp; a failure carries no numbers (``stopsafe_io.refuse_check``).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, MutableMapping

from vtm_dynamics.core.stopsafe.check import CheckSettings, TrajectoryChecker
from vtm_dynamics.core.stopsafe.speed_scaling import largest_speed_scaling
from vtm_dynamics.core.stopsafe.stop_cases import CheckCancelled
from vtm_dynamics.nodes import graph
from vtm_dynamics.nodes import stopsafe_io as io
from vtm_dynamics.nodes.model_slot import ModelSlot
from vtm_dynamics.nodes.prediction_io import root_frame_of
from vtm_dynamics.nodes.stopsafe_kit import StopBudget, StopsafeKits

#: The reason of an answer past ``check_deadline`` (its value follows).
LATE = "deadline: no answer within check_deadline"


class TrajectoryChecks:
    """Answers CheckTrajectory requests (module docstring) with the caps of the node's parameters ``p`` and its
    ``stop_category`` for a request that names none; ``stats['rejected_inputs']`` counts refused requests, ``log``
    gets one line per bad request."""

    def __init__(self, models: ModelSlot, kits: StopsafeKits, p: Mapping[str, Any], stats: MutableMapping[str, int],
                 log: Callable[[str, str], Any], clock: Callable[[], float] = time.monotonic) -> None:
        self.models, self.kits, self.limits = models, kits, io.CheckLimits.of(p)
        self.default_category = int(p["stop_category"])
        self.stats, self.log, self.clock = stats, log, clock

    @property
    def late(self) -> str:
        """The reason of an answer past the deadline."""
        return f"{LATE} {self.limits.deadline:g} s"

    @property
    def deadline(self) -> float:
        """[s] the service's deadline (``service_host``): one second after the check's own, which the budget of
        its predictions enforces."""
        return self.limits.deadline + 1.0

    def answer(self, request: Any, response: Any) -> Any:
        """Validate, check (and search) one request; returns ``response`` filled."""
        start = self.clock()
        model = self.models.current
        budget = StopBudget(self.limits.max_stops, start + self.limits.deadline, "check_max_stops", self.late,
                            self.clock)
        try:
            if model is None:
                raise ValueError("no robot model yet (waiting for robot_description)")
            response.model_name, response.model_hash = model.name, model.hash
            trajectory = io.trajectory_of(request.trajectory, self.limits)
            scene = io.scene_of(request, self.limits)
            categories = io.categories_of(request, self.default_category)
            kit = self.kits.kit(model)
            io.check_against(kit.geometry.robot, trajectory)
            setup = kit.setup(categories, budget)
            settings = CheckSettings(margin=request.margin,
                                     sampling=io.sampling_of(request, trajectory, len(setup.cases), self.limits))
            checker = TrajectoryChecker(setup, kit.geometry, scene, settings, kit.tcp_frame)
            result = checker.check(trajectory)
            scaling = largest_speed_scaling(checker, trajectory) if request.search_speed_scaling else None
        except (ValueError, CheckCancelled) as err:
            reason = graph.one_line(err).removeprefix("cancelled: ")
            if not isinstance(err, CheckCancelled):
                self.stats["rejected_inputs"] += 1
                self.log("warning", f"check_trajectory: request refused: {reason}")
            return self._done(self.refuse(response, reason), start)
        response.header.stamp = request.trajectory.header.stamp
        response.header.frame_id = root_frame_of(kit.geometry.robot)
        response.tcp_frame = kit.tcp_frame
        io.fill_check(response, result, scaling, checker.cases, budget.used)
        response.success = True
        response.message = "every predicted stop ends clear" if result.safe else \
            f"unsafe: first at t = {result.first_unsafe.time:.4f} s: {result.first_unsafe.reason}" \
            if result.first_unsafe is not None else "unsafe: a stop did not end within the horizon"
        return self._done(response, start)

    def _done(self, response: Any, start: float) -> Any:
        response.computation_time = self.clock() - start
        return response

    def refuse(self, response: Any, reason: str) -> Any:
        """``response`` as a failure with ``reason`` (no numbers that look like a result)."""
        return io.refuse_check(response, reason)
