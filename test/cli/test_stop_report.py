"""The brake file vtm-calibrate writes says truly where each value comes from: a capacity no stop tested is written
at the static friction, and its comment says so (it used to say "prior value" beside a value that was not the
prior's)."""

from __future__ import annotations

import math
from dataclasses import replace

import yaml

from vtm_dynamics.cli.robot_choice import default_brakes_path, load_robot
from vtm_dynamics.cli.stop_report import brake_yaml
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.capacity_bounds import CapacityInterval
from vtm_dynamics.core.estop.identification import Identification, ParameterEstimate


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


def test_the_conservative_file_says_an_unidentified_friction_is_written_at_its_lower_bound_not_the_prior():
    """A sliding torque no sample shows goes to the lower end of what is known about it in the conservative file;
    its comment used to say "prior value" beside a value that was not the prior's."""
    _, robot, _ = load_robot("ur5")
    prior = brakes_from_config(robot, default_brakes_path("ur5")).brakes
    first = prior[0]
    written = replace(first, sliding_torque=0.02 * first.sliding_torque, breakaway_torque=None,
                      holding_torque=0.02 * first.sliding_torque)
    unseen = ParameterEstimate(first.joint, "sliding_torque", None, None, False, first.sliding_torque,
                               "no sample shows it: it slides at most 1 ms after its brake engages",
                               conservative=written.sliding_torque)
    ident = replace(_identification(prior, []), conservative_brakes=(written, *prior[1:]), estimates=(unseen,))
    text = brake_yaml(ident, ["site.mcap"], conservative=True)
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("sliding_torque:"))
    assert float(line.split(":")[1].split("#")[0]) == written.sliding_torque
    assert "not identified" in line and "lower end" in line and "lengthens the stop" in line, line
    assert not line.rstrip().endswith("prior value"), line


def test_the_replay_table_shows_the_joint_that_moved_most_per_unit_and_why_a_stop_was_not_predicted(tmp_path):
    """The UR5 on a linear track: the track travelled 0.05 m, the shoulder 0.2 rad. The table's one row per stop
    named the shoulder (0.2 > 0.05, metres compared with radians) and never showed the track; a stop the engine
    could not predict showed only n/a."""
    import os

    import numpy as np

    from test.core.joint_type_models import write_track_robot
    from vtm_dynamics.cli.stop_report import comparison_table
    from vtm_dynamics.core.estop.stop_comparison import StopComparison
    from vtm_dynamics.core.robot.model import RobotModel

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    urdf, _ = write_track_robot(str(tmp_path), os.path.join(repo, "config", "ur5_brakes.yaml"))
    robot = RobotModel.from_urdf_file(urdf)
    travel = np.array([0.05, 0.2, -0.1, 0.05, 0.0, 0.0, 0.01])
    nan = np.full(robot.nv, np.nan)
    c = StopComparison("bag#1", travel, nan, 0.3, math.nan, 0.2, math.nan, math.nan, np.zeros(0),
                       np.zeros((0, robot.nv)), "q0: track_joint outside the joint limits")
    lines = comparison_table(robot, [c]).splitlines()
    assert lines[1].split()[:3] == ["bag#1", "track_joint", "0.0500"] and lines[1].split()[5] == "m"
    assert lines[2].split()[:2] == ["shoulder_pan_joint", "0.2000"] and lines[2].split()[4] == "rad"
    assert lines[3].split(None, 2) == ["not", "predicted:", "q0: track_joint outside the joint limits"]
