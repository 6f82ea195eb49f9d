"""Emergency-stop prediction (Müller 2026, constraint activation): a braked robot after an emergency stop slides
against its brakes' sliding friction and its joints lock one after another; the group integrates eq. (3) with the
held joints as unit constraint rows (eq. (39)), decides stick and slip exactly from the constraint forces lambda,
and activates abrupt locks (pawls, lock events) with the momentum-consistent jump of eq. (22) in its closed form for
joint locks (eq. (21), U = 0; the general forms of eqs. (32) and (37) on request), for IEC 60204-1 stop categories
0 and 1. Modules: :mod:`.inputs` (scenario, settings, input checks), :mod:`.results` (events, prediction),
:mod:`.prediction` (the facade ``predict_stop``, result assembly, TCP path), :mod:`.event_loop` (the braking engine
and its events), :mod:`.held_dynamics` (eq. (3) with held joints), :mod:`.runge_kutta` (tableaus, steps,
continuous extension, crossing roots), :mod:`.stick_slip` (active-set decisions), :mod:`.abrupt_lock` (eq. (22)
via :func:`vtm_dynamics.core.switching.transitions.joint_lock_jump`), :mod:`.ramp` (category-1 deceleration),
:mod:`.wrenches` (joint reactions), :mod:`.series` (energies, momenta, dense series for plots); and around the
prediction: :mod:`.brakes` (the brake model and its YAML), :mod:`.payload` (a payload added to the model),
:mod:`.envelope` (the stop over brake, delay and payload tolerances), :mod:`.calibration` (brake parameters from
published stopping figures) and :mod:`.braked_plant` (an independent fixed-step reference plant of a category-0
stop, used by ``robot_sim`` and the tests).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: What the group exports, and the module each comes from: loaded on first use (PEP 562), so that importing a light
#: module of the group (``defaults``, ``inputs``, ``brakes``) does not load the engine and its compiled kernels.
_EXPORTS = {
    "JUMP_METHODS": "abrupt_lock", "TABLEAUS": "runge_kutta",
    "CategoryOne": "inputs", "LockEvent": "inputs", "StopInputError": "inputs", "StopSettings": "inputs",
    "check_stop_state": "inputs", "state_from_joint_names": "inputs",
    "StopEvent": "results", "StopPrediction": "results", "predict_stop": "prediction",
    "dense_series": "series", "energy_series": "series", "generalized_momenta": "series",
}
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from vtm_dynamics.core.estop.abrupt_lock import JUMP_METHODS
    from vtm_dynamics.core.estop.inputs import (
        CategoryOne, LockEvent, StopInputError, StopSettings, check_stop_state, state_from_joint_names,
    )
    from vtm_dynamics.core.estop.prediction import predict_stop
    from vtm_dynamics.core.estop.results import StopEvent, StopPrediction
    from vtm_dynamics.core.estop.runge_kutta import TABLEAUS
    from vtm_dynamics.core.estop.series import dense_series, energy_series, generalized_momenta


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
