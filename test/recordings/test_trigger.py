"""Trigger values are read by the type of the trigger field: the text itself for a string field, true/false for a
bool, a number or a constant name of the type for a numeric field; a value the field can never hold is a
configuration error naming it, never a trigger that silently never fires."""

import pytest
from std_msgs.msg import Bool, Float64, String
from vtm_msgs.msg import BrakeEvent

from vtm_dynamics.recordings.trigger import TriggerConfigError, TriggerMatcher, TriggerRule


def _matcher(type_name: str, field: str, values: tuple[str, ...], sample) -> TriggerMatcher:
    return TriggerMatcher(TriggerRule("plc_estop", type_name, field, values), sample)


@pytest.mark.parametrize("text", ["1", "true", "ROBOT_EMERGENCY_STOP", " E-STOP "])
def test_a_string_field_matches_the_text_as_written(text):
    """A PLC bridge that sends the text "1" or "true" for 'stopping' is matched by exactly that text."""
    matcher = _matcher("std_msgs/msg/String", "data", (text,), String())
    assert matcher.stopping(String(data=text))
    assert not matcher.stopping(String(data="0"))


def test_a_bool_field_takes_true_or_false_in_any_case():
    matcher = _matcher("std_msgs/msg/Bool", "data", ("TRUE",), Bool())
    assert matcher.stopping(Bool(data=True)) and not matcher.stopping(Bool(data=False))


@pytest.mark.parametrize("text", ["1", "yes", "on"])
def test_a_bool_field_refuses_anything_but_true_or_false(text):
    with pytest.raises(TriggerConfigError, match=f"trigger_values: '{text}' is not true or false"):
        _matcher("std_msgs/msg/Bool", "data", (text,), Bool())


def test_a_numeric_field_takes_numbers_and_constant_names_of_the_type():
    matcher = _matcher("vtm_msgs/msg/BrakeEvent", "action", ("ENGAGE",), BrakeEvent())
    assert matcher.stopping(BrakeEvent(action=BrakeEvent.ENGAGE))
    assert not matcher.stopping(BrakeEvent(action=BrakeEvent.RELEASE))
    by_number = _matcher("vtm_msgs/msg/BrakeEvent", "action", (str(BrakeEvent.RELEASE),), BrakeEvent())
    assert by_number.stopping(BrakeEvent(action=BrakeEvent.RELEASE))
    assert _matcher("std_msgs/msg/Float64", "data", ("2.5",), Float64()).stopping(Float64(data=2.5))


@pytest.mark.parametrize("text", ["ENGAEG", "true", "stopping"])
def test_a_numeric_field_refuses_a_misspelt_constant_or_a_word_with_the_constants_listed(text):
    with pytest.raises(TriggerConfigError) as err:
        _matcher("vtm_msgs/msg/BrakeEvent", "action", ("ENGAGE", text), BrakeEvent())
    line = str(err.value)
    assert line.startswith(f"trigger_values: '{text}' is neither a number nor a constant of the type")
    assert "constants: ENGAGE, RELEASE" in line and "\n" not in line
