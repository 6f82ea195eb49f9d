import os

import pytest

from test.recordings.recordings_testdata import REALISTIC, fit_realistic, realistic_plant
from vtm_dynamics.recordings.bag_files import read_recording
from vtm_dynamics.recordings.simulated import sample_stops, write_simulated_bag
from vtm_dynamics.recordings.stops import find_stops


@pytest.fixture(scope="session")
def realistic():
    """The realistic known-truth set (test/recordings/recordings_testdata.py): robot, truth, the plant's stops
    (about 15 s to simulate)."""
    robot = REALISTIC.robot()
    return robot, REALISTIC.truth(robot), realistic_plant(robot)


@pytest.fixture(scope="session")
def realistic_bag(realistic, tmp_path_factory):
    """Its stops seen through the driver-like sensor, as an MCAP bag."""
    robot, _, plant = realistic
    samples = sample_stops(plant, robot.joint_names, sensor=REALISTIC.sensor, seed=11)
    return write_simulated_bag(os.path.join(tmp_path_factory.mktemp("bags"), "realistic"), samples, "mcap")


@pytest.fixture(scope="session")
def realistic_stops(realistic, realistic_bag):
    robot = realistic[0]
    return find_stops(read_recording(realistic_bag), robot)


@pytest.fixture(scope="session")
def realistic_fit(realistic, realistic_stops):
    """The fit of the first ten stops from the shipped prior without the extended terms (20-40 s)."""
    robot = realistic[0]
    return fit_realistic(robot, realistic_stops[:REALISTIC.stops])
