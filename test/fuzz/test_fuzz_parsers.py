"""Property-based fuzzing of the two text formats a message can carry into a node: the URDF extension elements
(``<loop_closure>``, ``<knife_edge>``, ``<driving_constraint>``; docs/urdf_extension.md) and the brake YAML
(``vtm_dynamics.core.estop.brakes``; the ``PredictStop.brake_config_yaml`` field).

Properties: the parser either returns or raises its documented error type (a ``ValueError``) with one line; never
another exception (``RecursionError``, ``MemoryError``, ``TypeError``...), never longer than
``CALLBACK_BOUND_S``; a certainly-bad brake YAML is rejected with a message naming a brake field, a certainly-valid
one is accepted.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import example, given, settings

from test.fuzz import strategies as S
from test.fuzz.harness import CALLBACK_BOUND_S, surveyable
from test.fuzz.scale import examples


@pytest.fixture(scope="module")
def ur5():
    from vtm_dynamics.nodes.model_source import model_from_urdf_text

    return model_from_urdf_text(S.ur5_urdf())


def timed(func, *args):
    t0 = time.perf_counter()
    try:
        return func(*args), None, time.perf_counter() - t0
    except Exception as err:  # noqa: BLE001 - the test classifies it
        return None, err, time.perf_counter() - t0


@settings(max_examples=examples(300))
@given(S.extension_urdfs())
@surveyable
def test_urdf_extension(text):
    from vtm_dynamics.core.robot.urdf_extension import URDFExtensionError, parse_urdf_extension

    _, err, seconds = timed(parse_urdf_extension, text)
    assert seconds <= CALLBACK_BOUND_S, f"parse_urdf_extension took {seconds:.3f} s"
    if err is not None:
        assert isinstance(err, URDFExtensionError), f"{type(err).__name__} escaped: {err}"
        assert "\n" not in str(err) and len(str(err)) <= 500, f"error is not one short line: {str(err)[:600]!r}"


@settings(max_examples=examples(150))
@given(S.extension_urdfs())
@surveyable
def test_model_with_extension(text):
    """The whole model build a node performs on a description (tree + extension elements)."""
    from vtm_dynamics.core.robot.model import ModelError
    from vtm_dynamics.nodes.model_source import model_from_urdf_text

    _, err, seconds = timed(model_from_urdf_text, text)
    assert seconds <= CALLBACK_BOUND_S, f"model build took {seconds:.3f} s"
    if err is not None:
        assert isinstance(err, ModelError), f"{type(err).__name__} escaped: {err}"
        assert "\n" not in str(err), f"error is not one line: {str(err)[:600]!r}"


@settings(max_examples=examples(300))
@given(S.brake_yamls())
@example(("brakes: " + "[" * 1000 + "]" * 1000, True))
@example(("brakes: " + "{a: " * 1000 + "1" + "}" * 1000, True))
@example(("1\U00096c4a\x91\x17)ÉC", True))  # a C1 control character: PyYAML's ReaderError escaped
@example(("brakes:\n  joints:\n    wrist_1_joint: {sliding_torque: 50.0, pawl_delay: 1e+300}\n", True))  # accepted
@example(("brakes:\n  joints:\n    elbow_joint: {sliding_torque: 50.0, holding_torque: 1e400}\n", True))  # accepted
@surveyable
def test_brake_yaml(ur5, text_bad):
    from vtm_dynamics.core.estop.brakes import BrakeConfigError
    from vtm_dynamics.nodes.prediction_io import brakes_from_yaml_text

    text, bad = text_bad
    result, err, seconds = timed(brakes_from_yaml_text, ur5, text)
    context = f"brake YAML ({len(text)} chars, {text[:80]!r})"
    assert seconds <= CALLBACK_BOUND_S, f"{context}: parsing took {seconds:.3f} s"
    if err is not None:
        assert isinstance(err, BrakeConfigError), f"{context}: {type(err).__name__} escaped: {str(err)[:200]}"
        assert "\n" not in str(err) and len(str(err)) <= 500, f"{context}: error is not one short line"
        assert "brake" in str(err), f"{context}: error names no brake field: {err}"
    if bad:
        assert err is not None, f"{context}: a bad brake configuration was accepted"
    elif bad is False:
        assert err is None, f"{context}: a valid brake configuration was rejected: {err}"
