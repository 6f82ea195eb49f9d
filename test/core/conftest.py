"""Shared fixtures for the core tests: the paper's planar 3R pendulum and a real 6-DOF arm (UR5)."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sibling helper modules (core_testdata, ...)
# the paper's scenarios and the peer runners live in bench/ and are shared with the benchmarks
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench"))

from core_testdata import PLANAR_3R, UR5  # noqa: E402
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf  # noqa: E402


@pytest.fixture(scope="session")
def planar_3r() -> RobotModel:
    return RobotModel.from_urdf_file(PLANAR_3R, gravity=(0.0, 0.0, -9.81))


@pytest.fixture(scope="session")
def ur5() -> RobotModel:
    return RobotModel.from_urdf_file(example_robot_urdf(UR5))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20260421)
