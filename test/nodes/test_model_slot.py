"""The predictor's model slot without ROS: one parse per description and a copy per worker, and the rule whether a
new description replaces the model (nodes/model_slot.py)."""

import os
import re

import numpy as np
import pytest

from vtm_dynamics.core.robot.model import ModelError
from vtm_dynamics.nodes.model_slot import ModelSlot, build_model, model_hash
from vtm_dynamics.nodes.model_source import load_urdf_text

BRAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "ur5_test_brakes.yaml")


@pytest.fixture(scope="module")
def ur5():
    return build_model(load_urdf_text("ur5"), BRAKES, "ur5", warm=False)


def _heavier(text: str) -> str:
    return re.sub(r'<mass value="([^"]+)"', lambda m: f'<mass value="{float(m.group(1)) * 10.0!r}"', text)


def test_a_model_is_parsed_once_and_each_worker_gets_a_copy_of_its_own(ur5):
    assert ur5.name == "ur5" and ur5.hash == model_hash(ur5.text) and len(ur5.hash) == 16
    assert ur5.aux is not ur5.robot and ur5.aux.model is not ur5.robot.model and ur5.aux.data is not ur5.robot.data
    assert ur5.aux.joint_names == ur5.robot.joint_names
    q = ur5.robot.neutral()
    assert np.array_equal(ur5.aux.mass_matrix(q), ur5.robot.mass_matrix(q))  # the same robot
    assert ur5.brakes is not None and not ur5.brake_error


def test_a_model_without_usable_brakes_carries_the_reason_and_no_brakes():
    model = build_model(load_urdf_text("ur5"), "/nonexistent/brakes.yaml", "ur5", warm=False)
    assert model.brakes is None and "brakes.yaml" in model.brake_error


def test_the_first_description_installs_and_an_identical_one_changes_nothing(ur5):
    slot = ModelSlot(allow_replacement=False)
    assert slot.admit(ur5.text).action == "parse" and slot.verdict(ur5).action == "install"
    slot.install(ur5)
    assert slot.admit(ur5.text).action == "same" and slot.refused == 0 and not slot.warning


def test_without_replacement_a_different_description_is_refused_before_any_parse(ur5):
    slot = ModelSlot(allow_replacement=False)
    slot.install(ur5)
    verdict = slot.admit(_heavier(ur5.text))
    assert verdict.action == "refuse" and "allow_model_replacement" in verdict.reason
    assert "keeping model 'ur5'" in verdict.reason and slot.refused == 1 and slot.warning == verdict.reason


def test_with_replacement_only_a_model_with_the_same_joints_is_installed(ur5):
    slot = ModelSlot(allow_replacement=True)
    slot.install(ur5)
    built = []

    def build(text):
        built.append(text)
        return build_model(text, BRAKES, "ur5", warm=False)

    verdict, heavy = slot.replace(_heavier(ur5.text), build)
    assert verdict.action == "install" and heavy.hash != ur5.hash and len(built) == 1
    verdict, other = slot.replace(load_urdf_text("planar_3r"), lambda text: build_model(text, warm=False))
    assert verdict.action == "refuse" and "differ from the model's" in verdict.reason and slot.refused == 1
    slot.install(heavy)
    assert slot.replace(heavy.text, build)[0].action == "same" and len(built) == 1  # no parse for the same text


def test_a_description_that_cannot_be_used_is_invalid_with_a_one_line_reason(ur5):
    slot = ModelSlot(allow_replacement=True)
    verdict, model = slot.replace("this is not XML", build_model)
    assert verdict.action == "invalid" and model is None
    assert verdict.reason.startswith("robot_description: invalid robot description ignored (")
    assert verdict.reason.endswith("; no model yet") and "\n" not in verdict.reason
    slot.install(ur5)
    assert slot.replace("<robot name='x'/>", build_model)[0].reason.endswith("; keeping model 'ur5'")
    with pytest.raises(ModelError):
        build_model("this is not XML")


def test_event_joint_names_are_split_into_known_ones_and_a_warning_naming_the_others(ur5):
    slot = ModelSlot(allow_replacement=False)
    assert slot.known(["elbow_joint"], "brake_events") == ([], "")  # no model: nothing is known
    slot.install(ur5)
    known, warning = slot.known(["elbow_joint", "gripper", "wrist_1_joint"], "lock_events")
    assert known == ["elbow_joint", "wrist_1_joint"]
    assert warning.startswith("lock_events: ignoring unknown joints [gripper] (model 'ur5' has [")
