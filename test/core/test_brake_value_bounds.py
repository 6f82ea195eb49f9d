"""Brake values beyond anything physical are refused with the field named (a PredictStop request carries its own
brake YAML: pawl_delay 1e300 s was accepted). Infinite holding torques stay allowed (a form lock)."""

from __future__ import annotations

import math

import pytest

from vtm_dynamics.core.estop.brakes import BrakeConfigError, brake_from_mapping

BASE = {"sliding_torque": 50.0, "holding_torque": 70.0}


@pytest.mark.parametrize("field", ["engage_delay", "pawl_delay", "sliding_torque", "holding_torque", "viscous",
                                   "gear_ratio", "pawl_holding_torque"])
@pytest.mark.parametrize("value", [1e300, 1e7])
def test_absurd_values_are_refused_naming_the_field(field, value):
    with pytest.raises(BrakeConfigError) as err:
        brake_from_mapping("j1", {**BASE, field: value})
    message = str(err.value)
    assert f"brakes.joints.j1.{field}:" in message and "\n" not in message, message


@pytest.mark.parametrize("spec", [
    {"sliding_torque": 9000.0, "holding_torque": 12000.0, "engage_delay": 0.3, "viscous": 50.0},
    {"sliding_torque": 1.2, "side": "motor", "gear_ratio": 160.0, "pawl_delay": 0.05},
    {"sliding_torque": 10.0, "holding_torque": math.inf, "pawl_holding_torque": math.inf},
    {"sliding_torque": 1e5, "engage_delay": 10.0},
])
def test_real_brakes_are_accepted(spec):
    brake_from_mapping("j1", spec)


@pytest.mark.parametrize("field", ["holding_torque", "pawl_holding_torque"])
def test_a_number_that_overflows_is_not_taken_for_a_form_lock(field):
    """YAML 1.1 reads ``1e400`` (no dot) as a string; float() turns it into infinity, which for a holding torque
    means a form lock: an overflow must not silently become one. The explicit ``.inf`` still does."""
    with pytest.raises(BrakeConfigError) as err:
        brake_from_mapping("j1", {**BASE, field: "1e400"})
    assert f"brakes.joints.j1.{field}:" in str(err.value)
    assert math.isinf(getattr(brake_from_mapping("j1", {**BASE, field: math.inf}), field))
