"""YAML text from a message (``PredictStop.brake_config_yaml``): every failure is the caller's one-line error, and
flow nesting beyond the depth limit is refused before PyYAML reads the text (its scanner looks ahead over
unclosed brackets, so the composer's own depth count comes too late to keep the refusal cheap)."""

from __future__ import annotations

import pytest

from vtm_dynamics.core import limited_yaml
from vtm_dynamics.core.estop.brakes import BrakeConfigError
from vtm_dynamics.core.limited_yaml import load_yaml_text


class _NoParser:
    def __init__(self, *args, **kwargs) -> None:
        raise AssertionError("the text reached the YAML parser")


@pytest.mark.parametrize("text", ["brakes: " + "[" * 1000 + "]" * 1000, "brakes: " + "{a: " * 1000 + "1" + "}" * 1000,
                                  "[" * 21 + "]" * 21, "[" * 100_000],
                         ids=["sequences_1000", "mappings_1000", "just_over_the_limit", "unclosed_100000"])
def test_deep_flow_nesting_is_refused_before_parsing(monkeypatch, text):
    monkeypatch.setattr(limited_yaml, "_LimitedLoader", _NoParser)
    with pytest.raises(BrakeConfigError) as err:
        load_yaml_text(text, "brake_config_yaml", BrakeConfigError, max_bytes=10**6)
    assert str(err.value).startswith("brake_config_yaml: nested deeper than 20 levels")


@pytest.mark.parametrize("text", ["a: '" + "[" * 50 + "'", 'a: "' + "{" * 50 + '\\" [[["', "a: 1 # " + "[" * 50,
                                  "a: it's [[[[" + "]" * 4 + " '" + "[" * 30 + "'"],
                         ids=["single_quoted", "double_quoted", "comment", "apostrophe_in_plain_scalar"])
def test_brackets_in_strings_and_comments_are_no_nesting(text):
    assert isinstance(load_yaml_text(text, "brake_config_yaml", BrakeConfigError), dict)


def test_twenty_levels_are_accepted():
    assert load_yaml_text("[" * 20 + "]" * 20, "f") == [[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]


@pytest.mark.parametrize("text", ["1\U00096c4a\x91\x17)ÉC", "brakes: \x00", "a: \ufffe"],
                         ids=["c1_control", "nul", "non_character"])
def test_characters_yaml_forbids_are_one_line_errors(text):
    with pytest.raises(BrakeConfigError) as err:
        load_yaml_text(text, "brake_config_yaml", BrakeConfigError)
    message = str(err.value)
    assert message.startswith("brake_config_yaml: ") and "\n" not in message and len(message) < 300, message


@pytest.mark.parametrize("text", [
    "brakes: 2020-13-45",  # a date PyYAML's timestamp constructor refuses (ValueError: month must be in 1..12)
    "brakes: " + "9" * 5000,  # over Python's 4300-digit limit for int()
    'brakes: !!int "xyz"',
    'brakes: !!float "x"',
    'brakes: !!timestamp "x"',  # AttributeError inside PyYAML: escaped the service's ValueError handling
], ids=["bad_date", "5000_digits", "int_tag", "float_tag", "timestamp_tag"])
def test_a_value_the_yaml_constructors_cannot_build_is_the_callers_one_line_error(text):
    with pytest.raises(BrakeConfigError) as err:
        load_yaml_text(text, "brake_config_yaml", BrakeConfigError)
    assert str(err.value).startswith("brake_config_yaml: a value cannot be read") and "\n" not in str(err.value)
