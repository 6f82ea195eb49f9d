"""The robot model of ``estop_predictor``: built once per description, one copy per worker, and the rule whether a
new description may replace it. Plain Python (no node, no executor): the node hands it text and installs what it says.

Building (:func:`build_model`): the URDF text is parsed once (``model_source.model_from_urdf_text``: text only,
sizes capped); the copy for the auxiliary worker (services, continuous mode) is ``RobotModel.copy`` (Pinocchio's
data is per thread, the model is shared by nothing else); the brakes come from ``brake_config`` or the package's
default for the robot (``brake_error`` says why there are none: every prediction is then refused with it); the
compiled engine is warmed up, so the first trigger is as fast as the hundredth (``core/estop/warm_up.py``). A joint
that a JointState cannot describe refuses the model (``UnsupportedJointError``).

Replacing (:class:`ModelSlot`): the first valid description sets the model. After that a different one is accepted
only if ``allow_model_replacement`` is true AND it has the same joint names; otherwise it is refused with the
reason (counted, and kept as the warning /diagnostics shows). An identical description is a no-op. The rule is
applied twice: before parsing (:meth:`ModelSlot.admit`: no parse for a description that cannot be installed) and
after (:meth:`ModelSlot.verdict`: the joint names are known only then, and the model may have changed meanwhile).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.warm_up import warm_up
from vtm_dynamics.core.excerpt import excerpt_list
from vtm_dynamics.core.robot.model import ModelError, RobotModel
from vtm_dynamics.nodes import graph
from vtm_dynamics.nodes.conversions import UnsupportedJointError, check_joint_state_compatible
from vtm_dynamics.nodes.model_source import model_from_urdf_text
from vtm_dynamics.nodes.prediction_io import load_brakes


def model_hash(text: str) -> str:
    """First 16 hex digits of the SHA-256 of the URDF text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class LoadedModel:
    """One robot model and its copy: ``robot`` for E-stops, ``aux`` for the service and continuous predictions;
    ``brakes`` (None: ``brake_error`` says why)."""

    robot: RobotModel
    aux: RobotModel
    text: str
    hash: str
    brakes: BrakeSet | None
    brake_error: str

    @property
    def name(self) -> str:
        return self.robot.name


def build_model(text: str, brake_config: str = "", robot_name: str = "", warm: bool = True) -> LoadedModel:
    """Parse ``text`` once and copy it for the second worker (module docstring); raises ``ModelError`` /
    ``UnsupportedJointError`` (one line) for a model the node cannot use."""
    robot = model_from_urdf_text(text)
    check_joint_state_compatible(robot)
    try:
        brakes, error = load_brakes(robot, brake_config, robot_name), ""
    except ValueError as err:
        brakes, error = None, graph.one_line(err)
    if brakes is not None and warm:
        warm_up(robot, brakes)
    return LoadedModel(robot, robot.copy(), text, model_hash(text), brakes, error)


@dataclass(frozen=True)
class ModelVerdict:
    """What to do with a description: ``action`` 'same' (identical: nothing), 'refuse' (``reason``), 'invalid'
    (it cannot be parsed or used: ``reason``), 'parse' (before parsing: go on) or 'install' (after parsing)."""

    action: str
    reason: str = ""


class ModelSlot:
    """The current model and the replacement rule (module docstring); thread-safe (callbacks and workers)."""

    def __init__(self, allow_replacement: bool) -> None:
        self.allow_replacement = bool(allow_replacement)
        self.current: LoadedModel | None = None
        self.warning = ""  # the last refusal (for /diagnostics)
        self.refused = 0
        self._lock = threading.Lock()

    def admit(self, text: str) -> ModelVerdict:
        """Before parsing ``text``: 'same', 'refuse' (replacement disabled) or 'parse'."""
        current = self.current
        if current is not None and text == current.text:
            return ModelVerdict("same")
        if current is not None and not self.allow_replacement:
            return self._refuse(f"robot_description: new description ignored (hash {model_hash(text)}): live model "
                                f"replacement is disabled (allow_model_replacement); keeping model {current.name!r} "
                                f"(hash {current.hash})")
        return ModelVerdict("parse")

    def verdict(self, model: LoadedModel) -> ModelVerdict:
        """After parsing: 'same', 'refuse' (replacement disabled, or other joints) or 'install'."""
        current = self.current
        if current is None:
            return ModelVerdict("install")
        if model.text == current.text:
            return ModelVerdict("same")
        keep = f"keeping model {current.name!r} (hash {current.hash})"
        if not self.allow_replacement:
            return self._refuse(f"robot_description: new description ignored (hash {model.hash}): live model "
                                f"replacement is disabled (allow_model_replacement); {keep}")
        if tuple(model.robot.joint_names) != tuple(current.robot.joint_names):
            return self._refuse(f"robot_description: new description ignored (hash {model.hash}): joints "
                                f"{list(model.robot.joint_names)} differ from the model's; {keep}")
        return ModelVerdict("install")

    def replace(self, text: str, build: Callable[[str], LoadedModel]) -> tuple[ModelVerdict, LoadedModel | None]:
        """On a worker: parse ``text`` with ``build`` (e.g. :func:`build_model`) and judge the model: 'same',
        'invalid' (it cannot be used: the reason), 'refuse' or 'install' (then the model is returned)."""
        current = self.current
        if current is not None and text == current.text:
            return ModelVerdict("same"), None
        try:
            model = build(text)
        except (ModelError, UnsupportedJointError, ValueError) as err:
            return ModelVerdict("invalid", f"robot_description: invalid robot description ignored "
                                           f"({graph.one_line(err)}); {self.keeping()}"), None
        return self.verdict(model), model

    def install(self, model: LoadedModel) -> None:
        self.current = model

    def known(self, names: Sequence[str], topic: str) -> tuple[list[str], str]:
        """(the ``names`` the model has, in order; a warning naming the others, or '') for an event on ``topic``;
        no model: nothing is known."""
        model = self.current
        if model is None:
            return [], ""
        joints = set(model.robot.joint_names)
        unknown = [n for n in names if n not in joints]
        warning = (f"{topic}: ignoring unknown joints [{excerpt_list(unknown)}] (model {model.name!r} has "
                   f"[{excerpt_list(model.robot.joint_names, count=50)}])") if unknown else ""
        return [n for n in names if n in joints], warning

    def keeping(self) -> str:
        """'keeping model <name>' or 'no model yet' (for error lines)."""
        current = self.current
        return f"keeping model {current.name!r}" if current is not None else "no model yet"

    def _refuse(self, reason: str) -> ModelVerdict:
        with self._lock:
            self.refused += 1
            self.warning = reason
        return ModelVerdict("refuse", reason)
