"""vtm-predict refuses a brake file whose holding capacity is below its sliding torque at load, in one line naming
the joint: such a file used to pass the loader and end the prediction in a traceback (``RuntimeError: stick/slip
decision: no consistent split found``, status 1) when the stretched, loaded shoulder could not hold."""

import os

import yaml

from vtm_dynamics.cli.predict import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_holding_below_sliding_without_breakaway_is_one_line_and_status_2(tmp_path, capsys):
    config = yaml.safe_load(open(os.path.join(REPO, "config", "ur5_brakes_coulomb_viscous.yaml")))
    for entry in config["brakes"]["joints"].values():
        entry["holding_torque"] = 0.8 * entry["sliding_torque"]
    path = tmp_path / "weak.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    code = main(["ur5", "--payload", "5", "--state", "stretched_j1", "--brakes", str(path)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("vtm-predict: error: brakes.joints.shoulder_pan_joint.holding_torque:") and "\n" not in err


def test_the_predictor_node_refuses_such_a_file_when_it_loads_its_brakes(tmp_path):
    """The node loads its brake_config once, at start-up, through the same reader: it refuses there, in one line,
    instead of failing at the first E-stop."""
    from vtm_dynamics.core.estop.brakes import BrakeConfigError
    from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
    from vtm_dynamics.nodes.prediction_io import load_brakes

    config = yaml.safe_load(open(os.path.join(REPO, "config", "ur5_brakes_coulomb_viscous.yaml")))
    config["brakes"]["joints"]["elbow_joint"]["holding_torque"] = 40.0  # sliding 52.969
    path = tmp_path / "weak.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    try:
        load_brakes(robot, str(path))
    except BrakeConfigError as err:
        message = str(err)
    else:
        raise AssertionError("the node's loader accepted a capacity below the sliding torque")
    assert message.startswith("brakes.joints.elbow_joint.holding_torque: 40 is below sliding_torque 52.969")
    assert "\n" not in message
