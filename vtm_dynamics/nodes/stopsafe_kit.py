"""The stop-safe tools of ``estop_predictor`` for its current model: the robot's collision geometry and the stop
cases, built once per model on the auxiliary worker and shared by the ``check_trajectory`` service
(``trajectory_check``) and the live protective separation distance (``live_separation``). Plain Python.

* Geometry: the URDF's ``<collision>`` elements through Pinocchio and coal
  (:func:`vtm_dynamics.core.stopsafe.robot_geometry.build_robot_geometry`, convex hulls of the meshes). Mesh files
  are found only inside the directories of the read-only parameter ``collision_package_dirs`` (trusted
  configuration, never a message); empty: the ``example-robot-data`` directory for the shipped UR robots, the
  package's ``urdf/`` for ``planar_3r``, else the directory of ``urdf_path``. The kit's kinematic model is its own
  (Pinocchio data per thread): use a kit only on the auxiliary worker.
* Stop cases (:class:`~vtm_dynamics.core.stopsafe.stop_cases.StopSetup`): the categories asked for, over the
  envelope of the live stopping distance (``stopping_envelope_*``: the same brake-torque, engage-delay and payload
  tolerances; ``stopping_envelope`` false: nominal brakes only), with the node's horizon, integration step and
  category-1 deceleration and torque limits and the model's brakes. A setup may carry a :class:`StopBudget`: every prediction is
  counted against a cap and a deadline, so a request's total predicted stops and wall time are bounded however the
  core's check and search divide their work.

A model that has no usable geometry (no ``<collision>``, a mesh not found) gets one line naming
``collision_package_dirs`` or the URDF; the E-stop prediction is unaffected. Units: SI.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from vtm_dynamics.core.estop import StopSettings
from vtm_dynamics.core.robot.catalogue import EXAMPLE_ROBOT_DATA, ROBOTS
from vtm_dynamics.core.stopsafe.robot_geometry import RobotGeometry, build_robot_geometry, example_robot_package_dir
from vtm_dynamics.core.stopsafe.scene import SceneError
from vtm_dynamics.core.stopsafe.stop_cases import CheckCancelled, StopSetup
from vtm_dynamics.nodes.live_stopping import LiveStopping
from vtm_dynamics.nodes.model_slot import LoadedModel
from vtm_dynamics.nodes.stop_worker import PredictionSettings

MAX_KITS = 4  # models whose kit is kept (a replaced model's kit goes first)


class StopBudget:
    """At most ``max_stops`` predictions until ``deadline`` (``time.monotonic()`` value); past either, the next
    prediction raises :class:`CheckCancelled` naming the parameter (``stops_name``, ``deadline_name``)."""

    def __init__(self, max_stops: int, deadline: float, stops_name: str, deadline_text: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_stops, self.deadline, self.clock = int(max_stops), float(deadline), clock
        self.stops_name, self.deadline_text = stops_name, deadline_text
        self.used = 0

    def spend(self) -> None:
        if self.used >= self.max_stops:
            raise CheckCancelled(f"{self.stops_name}: the check needs more than {self.max_stops} predicted stops")
        if self.clock() > self.deadline:
            raise CheckCancelled(self.deadline_text)
        self.used += 1


class _CountedBatch:
    """The engine's batch with every prediction counted against a budget."""

    def __init__(self, inner: Any, budget: StopBudget) -> None:
        self.inner, self.budget = inner, budget

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        self.budget.spend()
        return self.inner.predict(*args, **kwargs)


@dataclass
class BudgetedSetup(StopSetup):
    """A :class:`StopSetup` whose predictions are counted against ``budget`` (None: not counted)."""

    budget: StopBudget | None = None

    @property
    def batch(self) -> Any:
        inner = StopSetup.batch.fget(self)
        return inner if self.budget is None else _CountedBatch(inner, self.budget)


@dataclass
class StopsafeKit:
    """What the stop-safe tools need for one model (module docstring): its ``geometry`` (with its own kinematic
    model ``geometry.robot``), the ``tcp_frame``, and one stop setup per tuple of categories."""

    model: LoadedModel
    geometry: RobotGeometry
    tcp_frame: str
    make_setup: Callable[[tuple[int, ...]], BudgetedSetup]
    _setups: dict = field(default_factory=dict, repr=False)

    def setup(self, categories: tuple[int, ...], budget: StopBudget | None = None) -> BudgetedSetup:
        """The stop cases of ``categories`` (built once), counted against ``budget`` from now on."""
        if categories not in self._setups:
            self._setups[categories] = self.make_setup(categories)
        s = self._setups[categories]
        s.budget = budget
        return s


def package_dirs(p: Mapping[str, Any]) -> list[str]:
    """Where collision meshes may be read (module docstring)."""
    if p["collision_package_dirs"]:
        return [os.path.expanduser(d) for d in p["collision_package_dirs"]]
    spec = ROBOTS.get(p["robot"]) if not p["urdf_path"] else None
    if spec is not None:
        return [example_robot_package_dir()] if spec.urdf.package == EXAMPLE_ROBOT_DATA else \
            [os.path.dirname(spec.urdf_path())]
    return [os.path.dirname(os.path.abspath(os.path.expanduser(p["urdf_path"])))] if p["urdf_path"] else []


class StopsafeKits:
    """The kit of the current model, built on first use (module docstring); ``p`` the node's parameters."""

    def __init__(self, p: Mapping[str, Any], settings: PredictionSettings) -> None:
        self.p, self.settings = p, settings
        self._kits: dict[str, StopsafeKit | str] = {}

    def kit(self, model: LoadedModel) -> StopsafeKit:
        """The kit of ``model``; ``ValueError`` (one line, remembered) when its geometry cannot be built."""
        got = self._kits.get(model.hash)
        if got is None:
            if len(self._kits) >= MAX_KITS:
                self._kits.clear()
            got = self._kits[model.hash] = self._build(model)
        if isinstance(got, str):
            raise ValueError(got)
        return got

    def _build(self, model: LoadedModel) -> StopsafeKit | str:
        if model.brakes is None:
            return model.brake_error
        try:
            robot, geometry = build_robot_geometry(model.text, package_dirs(self.p))
        except (SceneError, ValueError) as err:
            return f"collision geometry of {model.name!r}: {err} (parameter collision_package_dirs)"
        tcp = self.settings.tcp_frame_of(robot)
        payload_frame = self.settings.payload_frame_of(robot)
        try:
            envelope = replace(LiveStopping.spec(dict(self.p)), payload_frame=payload_frame) \
                if self.p["stopping_envelope"] else None
        except ValueError as err:
            return str(err)
        s = self.settings
        engine = StopSettings(step=s.step, t_max=s.horizon)

        def make_setup(categories: tuple[int, ...]) -> BudgetedSetup:
            return BudgetedSetup(robot, model.brakes, envelope, categories, s.category_one(),
                                 payload_frame=payload_frame, settings=engine)

        return StopsafeKit(model, geometry, tcp, make_setup)
