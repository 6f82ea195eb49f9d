"""Node parameters are declared with descriptions and validated at start-up and at runtime, with one-line reasons."""

import pytest
import rclpy
from rclpy.parameter import Parameter

from test.nodes.node_harness import TEST_BRAKES, init_rclpy
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes.controller_parameters import PARAMETERS as CONTROLLER_PARAMETERS
from vtm_dynamics.nodes.estop_parameters import PARAMETERS as PREDICTOR_PARAMETERS
from vtm_dynamics.nodes.estop_predictor import EstopPredictor
from vtm_dynamics.nodes.robot_sim import PARAMETERS as SIM_PARAMETERS
from vtm_dynamics.nodes.robot_sim import RobotSim


@pytest.fixture(scope="module", autouse=True)
def ros():
    init_rclpy()
    yield
    rclpy.try_shutdown()


def _predictor(**overrides):
    params = {"robot": "ur5", "brake_config": TEST_BRAKES, "ghost_rate": 0.0, **overrides}
    return EstopPredictor(parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])


@pytest.mark.parametrize("specs", [PREDICTOR_PARAMETERS, SIM_PARAMETERS, CONTROLLER_PARAMETERS],
                         ids=["estop_predictor", "robot_sim", "projection_controller"])
def test_every_parameter_has_a_description_and_its_default_passes_its_own_validation(specs):
    names = [s.name for s in specs]
    assert len(names) == len(set(names))
    for s in specs:
        assert len(s.description) > 20, s.name
        assert s.check(s.default) is None, s.name


def test_descriptors_are_visible_through_the_ros_parameter_api():
    node = _predictor()
    try:
        d = node.describe_parameter("horizon")
        assert "Maximum predicted time" in d.description and d.additional_constraints == "0 < horizon <= 600 s"
        assert node.describe_parameter("robot").read_only
    finally:
        node.destroy_node()


@pytest.mark.parametrize("name, value, reason", [
    ("horizon", -1.0, "horizon: must be a finite number > 0 (got -1.0)"),
    ("stop_category", 2, "stop_category: must be one of 0, 1 (got 2)"),
    ("robot", "ur10", "robot: must be one of '', 'ur5', 'ur3', 'planar_3r' (got 'ur10')"),
    ("brake_config", "/nonexistent/brakes.yaml", "brake_config: file does not exist"),
    ("continuous_rate", 5000.0, "continuous_rate: must lie in [0.0, 1000.0]"),
    ("event_burst", 0, "event_burst: must lie in [1, 100000] (got 0)"),
])
def test_a_bad_start_value_stops_the_node_with_a_reason_naming_the_parameter(name, value, reason):
    with pytest.raises(P.ParameterError) as err:
        _predictor(**{name: value})
    assert str(err.value).startswith(reason)
    assert "\n" not in str(err.value)


def test_after_start_up_only_the_live_parameters_change_and_within_their_range():
    node = _predictor()
    try:
        for name, value in (("horizon", 2.5), ("trigger_on_brake_event", False), ("max_start_state_age", 10.0),
                            ("brake_config", "/etc/hostname"), ("allow_model_replacement", True),
                            ("robot", "planar_3r"), ("tcp_frame", "wrist_3_link"), ("use_sim_time", True)):
            r = node.set_parameters([Parameter(name, value=value)])[0]
            assert not r.successful and name in r.reason, (name, r.reason)
        assert node.p["horizon"] == 5.0 and node.p["trigger_on_brake_event"] and node.p["brake_config"] == TEST_BRAKES
        assert not node.get_parameter("use_sim_time").value
        r = node.set_parameters([Parameter("marker_force_scale", value=float("nan"))])[0]
        assert not r.successful and r.reason.startswith("marker_force_scale: must lie in")
        r = node.set_parameters([Parameter("marker_force_scale", value=0.01)])[0]
        assert r.successful and node.p["marker_force_scale"] == 0.01
        r = node.set_parameters([Parameter("marker_force_scale", value=None)])[0]  # a deletion
        assert not r.successful and "cannot be" in r.reason
        assert node.has_parameter("marker_force_scale")
    finally:
        node.destroy_node()


def test_the_parameter_policy_names_every_live_parameter_with_its_reason():
    node = _predictor()
    try:
        assert set(node.parameter_policy.live) == {"marker_force_scale", "marker_torque_scale"}
        for s in PREDICTOR_PARAMETERS:
            assert node.describe_parameter(s.name).read_only == (s.name not in node.parameter_policy.live), s.name
    finally:
        node.destroy_node()


def test_robot_sim_rejects_a_demo_motion_of_the_wrong_size():
    with pytest.raises(P.ParameterError) as err:
        RobotSim(parameter_overrides=[Parameter("brake_config", value=TEST_BRAKES),
                                      Parameter("motion_amplitude", value=[0.1, 0.2])])
    assert str(err.value) == "motion_amplitude: expected 6 finite numbers, got 2"
    with pytest.raises(P.ParameterError) as err:
        RobotSim(parameter_overrides=[Parameter("publish_rate", value=100.0)])
    assert str(err.value).startswith("publish_rate: must lie in [250.0, 5000.0]")


def test_parameter_table_lists_every_parameter():
    table = P.describe(PREDICTOR_PARAMETERS)
    for s in PREDICTOR_PARAMETERS:
        assert f"`{s.name}`" in table


def test_docs_describe_every_parameter_of_both_nodes():
    import os

    from test.ros_helpers import REPO_ROOT

    doc = open(os.path.join(REPO_ROOT, "docs", "ros.md"), encoding="utf-8").read()
    for s in list(PREDICTOR_PARAMETERS) + list(SIM_PARAMETERS):
        assert f"| `{s.name}` |" in doc, s.name


def test_a_list_parameter_with_an_empty_default_is_initialized_and_checked_by_its_validator():
    """rclpy infers an empty list as a byte array and leaves a parameter declared by type alone uninitialized
    (then the get_parameters service answers no value for a request naming it): an empty default is declared with
    dynamic typing and a value, and the validator checks the elements."""
    specs = (P.ParameterSpec("joints", (), "Joints commanded, in the controller's order.", P.names),
             P.ParameterSpec("offset", (), "A point on the frame, three coordinates [m].", P.numbers(3)))
    assert P.values(specs) == {"joints": (), "offset": ()}
    assert P.values(specs, {"joints": ["a", "b"], "offset": [0.0, 0.1, 0.2]}) == {"joints": ("a", "b"),
                                                                                    "offset": (0.0, 0.1, 0.2)}
    for value, reason in ((["a", "a"], "joints: repeated names (got ['a', 'a'])"),
                          (5, "joints: must be a list of strings (got 5)")):
        with pytest.raises(P.ParameterError) as err:
            P.values(specs, {"joints": value})
        assert str(err.value) == reason
    with pytest.raises(P.ParameterError, match="offset: must hold 3 values or none"):
        P.values(specs, {"offset": [1.0]})
    node = rclpy.create_node("list_parameters")
    try:
        p = P.declare_validated(node, specs)
        assert p == {"joints": (), "offset": ()}
        assert [x.value for x in node.get_parameters(["joints", "offset"])] == [[], []]
        assert node.describe_parameter("joints").dynamic_typing and node.describe_parameter("joints").read_only
    finally:
        node.destroy_node()
