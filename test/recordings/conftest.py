import os

import pytest

from test.recordings.recordings_testdata import samples
from vtm_dynamics.recordings.simulated import write_simulated_bag


@pytest.fixture(scope="session")
def truth_samples():
    """8 stops with known truth (about 10 s to simulate)."""
    return samples(8)


@pytest.fixture(scope="session")
def truth_bag(truth_samples, tmp_path_factory):
    """The 8 stops as an MCAP bag."""
    return write_simulated_bag(os.path.join(tmp_path_factory.mktemp("bags"), "truth"), truth_samples, "mcap")
