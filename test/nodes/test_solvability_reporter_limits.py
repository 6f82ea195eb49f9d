"""The checks solvability_reporter makes before any parse, and its parameter file. No ROS graph needed.

Expected verdicts follow from the caps and from the definition of URDF text (first non-blank character '<').
"""

import math
import os

import pytest
import yaml

from test.ros_helpers import REPO_ROOT
from vtm_dynamics.nodes.solvability_io import description_problem, positions_problem
from vtm_dynamics.nodes.solvability_reporter import PARAMETERS

CONFIG = os.path.join(REPO_ROOT, "config", "solvability_reporter.yaml")
ROBOT = '<robot name="r"><link name="a"/><link name="b"/></robot>'


@pytest.mark.parametrize("text", ["/etc/hostname", "robot.urdf", "file:///etc/hostname", "~/.bashrc", "",
                                  "   ", "package://vtm_dynamics/urdf/ur5.urdf", "r<robot/>"])
def test_anything_but_xml_text_is_refused_naming_the_field_and_never_quoted(text):
    problem = description_problem(text, "urdf", 2_000_000, 500)
    assert problem is not None and problem.startswith("urdf: not URDF XML text")
    assert (text.strip() or "@@") not in problem


def test_xml_text_within_the_caps_passes():
    assert description_problem(ROBOT, "urdf", 2_000_000, 500) is None
    assert description_problem("\n  \t" + ROBOT, "robot_description", 2_000_000, 500) is None
    assert description_problem(ROBOT, "urdf", len(ROBOT), 2) is None  # both caps are inclusive


def test_the_byte_cap_counts_utf8_bytes():
    text = '<robot name="ä"/>'  # 17 characters, 18 bytes
    assert description_problem(text, "urdf", 18, 1) is None
    problem = description_problem(text, "urdf", 17, 1)
    assert problem == "urdf: larger than max_description_bytes (17 bytes)"


def test_links_are_counted_as_tags_not_as_substrings():
    text = '<robot name="r"><link name="a"/><link\tname="b"></link><linkage/><!-- <link_x --></robot>'
    assert description_problem(text, "urdf", 10_000, 2) is None  # two <link> elements
    assert description_problem(text, "urdf", 10_000, 1) == "urdf: more than max_links (1) <link> elements"


def test_a_huge_link_count_is_refused_at_the_cap_and_a_count_below_it_passes():
    large = "<robot>" + "<link/>" * 200_000 + "</robot>"
    assert description_problem(large, "robot_description", 10**8, 200_000) is None
    assert description_problem(large, "robot_description", 10**8, 500) == (
        "robot_description: more than max_links (500) <link> elements")


@pytest.mark.parametrize("positions, expected", [
    ([0.0, math.nan], "positions: entry 1 is not a finite number"),
    ([math.inf], "positions: entry 0 is not a finite number"),
    ([0.0] * 11, "positions: 11 values exceed max_positions (10)"),
])
def test_positions_are_checked_for_count_and_finiteness(positions, expected):
    assert positions_problem(positions, 10) == expected


def test_valid_positions_pass():
    assert positions_problem([], 10) is None and positions_problem([0.1, -2.0, 3.0], 3) is None


def test_the_parameter_file_sets_only_declared_parameters_with_valid_values():
    config = yaml.safe_load(open(CONFIG, encoding="utf-8"))
    specs = {s.name: s for s in PARAMETERS}
    params = config["solvability_reporter"]["ros__parameters"]
    assert set(params) == set(specs)
    for key, value in params.items():
        spec = specs[key]
        assert type(value) is type(spec.default), f"{key}: {type(value).__name__}"
        assert spec.check(value) is None, spec.check(value)
        assert value == spec.default, f"{key}: the file documents the defaults"
