"""The brake file vtm-calibrate writes says truly where each value comes from: a capacity no stop tested is written
at the static friction, and its comment says so (it used to say "prior value" beside a value that was not the
prior's)."""

from __future__ import annotations

import math
import os
from dataclasses import replace

import yaml

from vtm_dynamics.cli.robot_choice import default_brakes_path, load_robot
from vtm_dynamics.cli.stop_report import brake_yaml
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.capacity_bounds import CapacityInterval
from vtm_dynamics.core.estop.identification import Identification


def _identification(brakes, capacities) -> Identification:
    return Identification("ur5", tuple(brakes), tuple(brakes), (), tuple(capacities), 1e-4, 1e-4, 100, 10, 1.0, "",
                          (), 1e-4, 0.95)


def test_an_untested_capacity_is_written_at_the_static_friction_and_its_comment_says_so():
    _, robot, _ = load_robot("ur5")
    prior = brakes_from_config(robot, default_brakes_path("ur5")).brakes
    first = prior[0]
    floor = max(first.sliding_torque, first.breakaway_torque or 0.0)
    assert first.holding_torque > floor  # the prior's capacity is another value than the one written
    fitted = [replace(first, holding_torque=floor), *prior[1:]]
    untested = CapacityInterval(first.joint, floor, math.inf, floor, floor, (), (), central=math.inf)
    text = brake_yaml(_identification(fitted, [untested]), ["site.mcap"])
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("holding_torque:"))
    assert float(line.split(":")[1].split("#")[0]) == floor
    assert "prior" not in line and "not tested by the stops" in line and "static friction" in line
    assert yaml.safe_load(text)["brakes"]["joints"][first.joint]["holding_torque"] == floor
