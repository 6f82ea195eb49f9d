"""The shipped brake configuration is looked up by robot name only for plain names: a model name taken from a
robot_description message (``<robot name="...">``) can never steer the lookup to another file."""

from __future__ import annotations

import os

import pytest

from vtm_dynamics.nodes import prediction_io as io
from vtm_dynamics.core.package_data import package_data_dir


def test_a_shipped_robot_finds_its_default_brakes():
    assert io.default_brake_config_path("ur5").endswith(os.path.join("config", "ur5_brakes.yaml"))


@pytest.mark.parametrize("name", ["../config/ur5", "../../config/ur5", "/etc/ur5", "ur5\x00", "ur5/../ur5", ""])
def test_a_name_that_is_not_a_plain_identifier_finds_no_file(name, tmp_path):
    # '../config/ur5' resolves to the shipped ur5 file through a path from the message: it must not be followed
    assert os.path.isfile(os.path.join(package_data_dir("config"), "..", "config", "ur5_brakes.yaml"))
    assert io.default_brake_config_path(name) == ""
