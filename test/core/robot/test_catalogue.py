"""The robot catalogue says what its files say: every robot's URDF loads with the joints, frames and limits the
catalogue states, its default brakes name its joints, its named states are states of the model, and the figures
and tests it states are about joints it has."""

from __future__ import annotations

import numpy as np
import pytest

from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.package_data import package_data_dir, package_data_file
from vtm_dynamics.core.robot.catalogue import DEFAULT_ROBOT, ROBOT_NAMES, ROBOTS
from vtm_dynamics.core.robot.model import RobotModel


@pytest.fixture(scope="module", params=ROBOT_NAMES)
def entry(request):
    robot = ROBOTS[request.param]
    return robot, RobotModel.from_urdf_file(robot.urdf_path())


def test_the_catalogue_names_each_robot_once_and_the_default_is_one_of_them():
    assert len(set(ROBOT_NAMES)) == len(ROBOT_NAMES) and DEFAULT_ROBOT in ROBOT_NAMES
    assert all(name == robot.name for name, robot in ROBOTS.items())
    with pytest.raises(TypeError):
        ROBOTS["x"] = ROBOTS[DEFAULT_ROBOT]  # read-only


def test_the_urdf_has_the_stated_joints_and_frames(entry):
    robot, model = entry
    assert model.joint_names == robot.joint_names
    assert model.model.existFrame(robot.tcp_frame)
    assert robot.payload_frame is None or model.model.existFrame(robot.payload_frame)
    assert robot.rated_payload is None or robot.payload_frame is not None  # a rated payload needs its frame


def test_the_default_brakes_name_joints_of_the_robot(entry):
    robot, model = entry
    brakes = brakes_from_config(model, robot.brakes_path())
    assert {b.joint for b in brakes.brakes} <= set(robot.joint_names)


def test_the_named_states_are_states_of_the_model_within_its_limits(entry):
    robot, model = entry
    assert robot.states and robot.state("demo") is not None and robot.state("no such state") is None
    lower, upper = model.model.lowerPositionLimit, model.model.upperPositionLimit
    for state in robot.states:
        q, v = np.array(state.q), np.array(state.v)
        assert q.shape == v.shape == (model.nv,)
        assert np.all(lower <= q) and np.all(q <= upper)
        assert np.all(np.abs(v) <= model.model.velocityLimit + 1e-12)


def test_maximum_speeds_are_one_positive_speed_per_joint(entry):
    robot, _ = entry
    if robot.max_speeds is None:
        assert np.isnan(robot.max_speed(robot.joint_names[0]))
        return
    assert len(robot.max_speeds) == len(robot.joint_names) and min(robot.max_speeds) > 0
    assert robot.max_speed(robot.joint_names[-1]) == robot.max_speeds[-1]


def test_published_figures_and_stopping_tests_are_about_joints_of_the_robot(entry):
    robot, model = entry
    for figure in robot.published_stops:
        assert figure.joint in robot.joint_names and figure.angle > 0 and figure.time > 0
    if robot.published_stops:
        assert robot.brake_assumptions is not None and robot.rated_payload is not None
        assert len(robot.brake_assumptions.armature) == model.nv
    tests = robot.stopping_tests
    if tests is not None:
        assert set(tests.joints) | set(tests.fold_joints) <= set(robot.joint_names)
        assert len(tests.fold_joints) == len(tests.joints) and len(tests.base_pose) == model.nq
        assert robot.max_speeds is not None and robot.rated_payload is not None
    motion = robot.simulated_motion
    if motion is not None:
        assert all(len(x) in (1, model.nv) for x in (motion.home, motion.amplitude, motion.phase))


def test_package_data_is_found_by_plain_names_only():
    assert package_data_file("config", "ur5_brakes.yaml").endswith("ur5_brakes.yaml")
    assert package_data_dir("urdf") is not None and package_data_dir("no_such_directory") is None
    for name in ("../config/ur5_brakes.yaml", "/etc/passwd", "", ".", "..", "no_such_file.yaml"):
        assert package_data_file("config", name) is None


def test_the_example_robot_data_folder_is_where_the_wheels_metadata_puts_it(monkeypatch, tmp_path):
    import importlib.metadata
    import sys

    from vtm_dynamics.core import package_data

    dist = importlib.metadata.distribution("example-robot-data")  # the wheel's own record of where it is
    assert package_data.example_robot_data_share() == str(dist.locate_file("cmeel.prefix/share"))

    class Elsewhere:  # a wheel installed where no folder of sys.path has it: the metadata is asked
        def locate_file(self, path):
            return tmp_path / path

    monkeypatch.setattr(sys, "path", ["relative/site-packages", "", str(tmp_path / "empty")])
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Elsewhere())
    assert package_data.example_robot_data_share() == str(tmp_path / "cmeel.prefix" / "share")

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    assert package_data.example_robot_data_share() is None
