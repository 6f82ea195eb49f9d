"""Generated M(q) and h(q, v): the same numbers as Pinocchio's CRBA and nonLinearEffects (to rounding) for every
robot it covers, with the robot's actual inertias (payloads on any body, armature); models it does not cover and a
switched-off generator give None and a reason; a cache entry is used only for its own key."""

import os

import numpy as np
import pinocchio as pin
import pytest

from core_testdata import PLANAR_3R
from joint_type_models import ur5_text, with_continuous
from vtm_dynamics.core.estop.payload import with_payload
from vtm_dynamics.core.estop import generated_dynamics as gd
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf

PANDA = "panda_description/urdf/panda.urdf"
FINGERS = ("panda_finger_joint1", "panda_finger_joint2")


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory):
    """Generated modules go to a directory of this test module (compiled once for all its tests)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(gd.ENV_CACHE, str(tmp_path_factory.mktemp("generated")))
        mp.delenv(gd.ENV_SWITCH, raising=False)
        yield


@pytest.fixture(scope="module")
def panda() -> RobotModel:
    """The Panda arm with its gripper fingers fixed (Pinocchio merges them into the hand's inertia)."""
    full = RobotModel.from_urdf_file(example_robot_urdf(PANDA))
    lock = [full.model.getJointId(n) for n in FINGERS]
    return RobotModel(pin.buildReducedModel(full.model, lock, pin.neutral(full.model)), full.extension,
                      full.urdf_text)


def pinocchio_mh(robot: RobotModel, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    M = pin.crba(robot.model, robot.data, q)
    return np.triu(M) + np.triu(M, 1).T, pin.nonLinearEffects(robot.model, robot.data, q, v).copy()


def body_frame(robot: RobotModel, joint: int) -> str:
    """The name of the body frame moved by joint ``joint`` (1-based Pinocchio joint index)."""
    for f in robot.model.frames:
        if f.type == pin.FrameType.BODY and f.parentJoint == joint:
            return f.name
    raise AssertionError(f"no body frame on joint {joint}")


def assert_agrees(robot: RobotModel, rng: np.random.Generator, states: int = 40) -> None:
    generated = gd.generated_stages(robot)
    assert generated is not None, gd.unavailable_reason(robot)
    lo = np.maximum(robot.model.lowerPositionLimit, -np.pi)
    hi = np.minimum(robot.model.upperPositionLimit, np.pi)
    for _ in range(states):
        q, v = rng.uniform(lo, hi), rng.uniform(-3.0, 3.0, robot.nv)
        M, h = generated.evaluate(q, v)
        Mp, hp = pinocchio_mh(robot, q, v)
        assert np.abs(M - Mp).max() <= 1e-12 * np.abs(Mp).max()
        assert np.abs(h - hp).max() <= 1e-12 * np.abs(hp).max()


def loaded(robot: RobotModel, joint: int, rng: np.random.Generator) -> RobotModel:
    """``robot`` with a 0.5-8 kg payload, its centre of mass up to 0.15 m off the frame's origin and a random
    rotational inertia, on the body of ``joint``."""
    spread = rng.normal(size=(3, 3))
    return with_payload(robot, rng.uniform(0.5, 8.0), body_frame(robot, joint), rng.uniform(-0.15, 0.15, 3),
                        0.05 * spread @ spread.T + 0.01 * np.eye(3))


@pytest.mark.parametrize("name", ["ur5", "panda", "planar_3r"])
def test_generated_m_and_h_are_pinocchios_to_rounding(name, request, rng):
    assert_agrees(request.getfixturevalue(name), rng)


@pytest.mark.parametrize("name", ["ur5", "panda", "planar_3r"])
def test_payloads_on_the_last_and_on_another_body_are_honoured(name, request, rng):
    robot = request.getfixturevalue(name)
    last = robot.model.njoints - 1
    assert_agrees(loaded(robot, last, rng), rng, states=15)
    assert_agrees(loaded(robot, last - 1, rng), rng, states=15)
    assert_agrees(loaded(loaded(robot, 1, rng), last, rng), rng, states=15)


def test_the_armature_is_on_the_diagonal_as_in_pinocchio(ur5, rng):
    robot = ur5.copy()
    robot.model.armature = np.array([0.5, 0.4, 0.3, 0.1, 0.1, 0.05])
    assert_agrees(robot, rng, states=10)


def test_inertias_are_read_again_when_they_change(ur5, rng):
    robot = ur5.copy()
    generated = gd.generated_stages(robot)
    q, v = rng.uniform(-1, 1, 6), rng.uniform(-1, 1, 6)
    before, _ = generated.evaluate(q, v)
    robot.model.inertias[3] = robot.model.inertias[3] + pin.Inertia(2.0, np.array([0.1, 0.0, 0.0]), np.eye(3) * 0.01)
    generated.load_inertias()
    M, h = generated.evaluate(q, v)
    Mp, hp = pinocchio_mh(robot, q, v)
    assert np.abs(M - Mp).max() <= 1e-12 * np.abs(Mp).max() and np.abs(h - hp).max() <= 1e-12 * np.abs(hp).max()
    assert np.abs(M - before).max() > 1e-3


def test_a_continuous_joint_falls_back_with_a_reason():
    robot = RobotModel.from_urdf(with_continuous(ur5_text(), "elbow_joint"))
    assert gd.generated_stages(robot) is None
    assert "continuous" in gd.unavailable_reason(robot)


def test_an_axis_not_of_unit_length_falls_back_with_a_reason(planar_3r):
    with open(PLANAR_3R, encoding="utf-8") as fh:
        text = fh.read()
    start = text.index('<joint name="joint2"')
    axis = text.index("<axis", start)
    end = text.index("/>", axis)
    robot = RobotModel.from_urdf(text[:axis] + '<axis xyz="0 2 0"' + text[end:])
    assert gd.generated_stages(robot) is None
    assert "unit length" in gd.unavailable_reason(robot)


def test_switched_off_it_falls_back_with_a_reason(planar_3r, monkeypatch):
    monkeypatch.setenv(gd.ENV_SWITCH, "off")
    assert gd.generated_stages(planar_3r) is None
    assert gd.ENV_SWITCH in gd.unavailable_reason(planar_3r)


def test_the_cache_key_names_what_the_code_depends_on(planar_3r, ur5):
    key = gd.cache_key(planar_3r, "adam 1")
    assert gd.cache_key(planar_3r, "adam 1") == key
    assert gd.cache_key(planar_3r, "adam 2") != key  # generator versions
    assert gd.cache_key(ur5, "adam 1") != key  # URDF text and joint order
    upside_down = RobotModel.from_urdf_file(PLANAR_3R, gravity=(0.0, 0.0, 9.81))
    assert gd.cache_key(upside_down, "adam 1") != key  # gravity is traced as a constant


def test_an_entry_made_for_another_key_is_not_used(planar_3r):
    key = gd.cache_key(planar_3r, "test versions")
    path = gd.module_path(planar_3r, key)
    with open(path, encoding="utf-8") as fh:
        good = fh.read()
    assert good.startswith("# ") and key in good.splitlines()[0]
    other = "f" * 64 if key[0] != "f" else "0" * 64
    with open(path, "w", encoding="utf-8") as fh:  # same name, another key inside: a stale or foreign entry
        fh.write(good.replace(key, other))
    assert gd.module_path(planar_3r, key) == path
    with open(path, encoding="utf-8") as fh:
        assert fh.read() == good
    with open(path, "w", encoding="utf-8") as fh:  # a truncated entry
        fh.write(good[: len(good) // 2])
    gd.module_path(planar_3r, key)
    with open(path, encoding="utf-8") as fh:
        assert fh.read() == good
    assert gd.module_path(planar_3r, gd.cache_key(planar_3r, "other versions")) != path
    assert os.path.dirname(path) == gd.cache_directory()


def test_a_model_locked_away_from_zero_falls_back_with_a_reason(panda):
    full = RobotModel.from_urdf_file(example_robot_urdf(PANDA))
    locked = pin.neutral(full.model)
    locked[full.model.idx_qs[full.model.getJointId("panda_joint3")]] = 0.7  # ADAM would fix joint 3 at 0
    lock = [full.model.getJointId(n) for n in FINGERS + ("panda_joint3",)]
    robot = RobotModel(pin.buildReducedModel(full.model, lock, locked), full.extension, full.urdf_text)
    assert gd.generated_stages(robot) is None
    assert "differ from Pinocchio" in gd.unavailable_reason(robot)
