"""Brake inputs from messages: PredictStop's brake_config_yaml and BrakeEvent overrides are capped and one-line."""

from __future__ import annotations

import math
import time

import pytest
from vtm_msgs.msg import BrakeEvent

from vtm_dynamics.core.estop.brakes import BrakeConfigError, brakes_from_config
from vtm_dynamics.nodes import prediction_io as io
from vtm_dynamics.nodes.model_source import load_urdf_text, model_from_urdf_text

VALID = "brakes:\n  joints:\n    joint2: {sliding_torque: 10.0, holding_torque: 12.0, engage_delay: 0.01}\n"


@pytest.fixture(scope="module")
def robot():
    return model_from_urdf_text(load_urdf_text("planar_3r"))


@pytest.fixture(scope="module")
def configured(robot):
    return brakes_from_config(robot, {"brakes": {"joints": {
        "joint1": {"sliding_torque": 20.0, "holding_torque": 25.0, "viscous": 1.0, "engage_delay": 0.02}}}})


def _one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message and len(message) < 300, message
    return message


@pytest.mark.parametrize("text", ["[" * 1000 + "]" * 1000, "{a: " * 1000 + "1" + "}" * 1000,
                                  "- " * 1000 + "x"], ids=["flow_sequences", "flow_mappings", "block_sequences"])
def test_nested_yaml_text_is_one_brake_config_error(robot, text):
    with pytest.raises(BrakeConfigError) as err:
        io.brakes_from_yaml_text(robot, text)
    message = _one_line(err)
    assert message.startswith("brake_config_yaml:") and "nested deeper" in message


def test_ten_megabytes_of_yaml_text_are_refused_fast(robot):
    text = VALID + "#" + "x" * 10_000_000
    t0 = time.perf_counter()
    with pytest.raises(BrakeConfigError) as err:
        io.brakes_from_yaml_text(robot, text)
    assert _one_line(err).startswith("brake_config_yaml:") and "bytes" in str(err.value)
    assert time.perf_counter() - t0 < 2.0


def test_yaml_aliases_are_refused_in_message_text(robot):
    text = "a: &x [1, 2]\nb: [*x, *x, *x]\n"
    with pytest.raises(BrakeConfigError) as err:
        io.brakes_from_yaml_text(robot, text)
    assert "alias" in _one_line(err)


def test_valid_yaml_text_still_works_and_caps_are_configurable(robot):
    assert io.brakes_from_yaml_text(robot, VALID).braked.tolist() == [False, True, False]
    with pytest.raises(BrakeConfigError, match="bytes"):
        io.brakes_from_yaml_text(robot, VALID, max_bytes=20)
    nested = "brakes:\n  joints:\n    joint2: {sliding_torque: 10.0}\n"
    with pytest.raises(BrakeConfigError, match="nested deeper"):
        io.brakes_from_yaml_text(robot, nested, max_depth=2)


def _event(names, **arrays) -> BrakeEvent:
    msg = BrakeEvent(joint_names=list(names))
    for field, values in arrays.items():
        setattr(msg, field, [float(x) for x in values])
    return msg


def test_a_huge_delay_override_is_rejected_naming_field_and_joint(robot):
    with pytest.raises(ValueError) as err:
        io.brake_overrides(_event(["joint1"], engage_delay=[1e6]), robot.joint_names)
    message = _one_line(err)
    assert "engage_delay" in message and "joint1" in message
    assert io.brake_overrides(_event(["joint1"], engage_delay=[0.5]), robot.joint_names) == {
        "joint1": {"engage_delay": 0.5}}
    assert io.brake_overrides(_event(["joint1"], engage_delay=[2.0]), robot.joint_names, max_delay=3.0) == {
        "joint1": {"engage_delay": 2.0}}


@pytest.mark.parametrize("field", ["sliding_torque", "viscous_coefficient", "holding_torque"])
def test_absurd_torque_overrides_are_rejected(robot, field):
    for value in (1e9, math.inf):
        with pytest.raises(ValueError) as err:
            io.brake_overrides(_event(["joint2"], **{field: [value]}), robot.joint_names)
        assert f"{field}[joint2]" in _one_line(err)


def test_torque_overrides_are_bounded_relative_to_the_configured_brake(robot, configured):
    ok = io.brake_overrides(_event(["joint1"], sliding_torque=[150.0]), robot.joint_names)
    assert io.apply_overrides(robot, configured, ok).sliding_torque[0] == 150.0
    too_much = io.brake_overrides(_event(["joint1"], sliding_torque=[250.0]), robot.joint_names)
    with pytest.raises(ValueError) as err:
        io.apply_overrides(robot, configured, too_much)
    assert "sliding_torque[joint1]" in _one_line(err)
    viscous = io.brake_overrides(_event(["joint1"], viscous_coefficient=[11.0]), robot.joint_names)
    with pytest.raises(ValueError, match=r"viscous_coefficient\[joint1\]"):
        io.apply_overrides(robot, configured, viscous)
    assert io.apply_overrides(robot, configured, too_much, max_torque_factor=20.0).sliding_torque[0] == 250.0


def test_override_joint_names_are_capped_and_unique(robot):
    many = [f"j{i}" for i in range(20_000)]
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="joint_names"):
        io.brake_overrides(_event(many, engage_delay=[0.1] * len(many)), robot.joint_names)
    assert time.perf_counter() - t0 < 2.0
    with pytest.raises(ValueError, match="joint_names: duplicate"):
        io.brake_overrides(_event(["joint1", "joint1"], engage_delay=[0.1, 0.2]), robot.joint_names)
