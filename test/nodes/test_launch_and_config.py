"""The launch file, the parameter YAML and the RViz config agree with the nodes.

`launch` / `launch_ros` are not installable from PyPI, so the launch file is checked in three ways without them:
it compiles; its syntax tree declares the expected arguments and nodes; and its OpaqueFunction runs against small
stand-ins for the launch classes that record what they are given (resolved arguments, node parameters), so that
every parameter it passes is one the node declares and accepts.
"""

import ast
import os
import py_compile
import sys
import types

import pytest
import yaml

from test.ros_helpers import REPO_ROOT
from vtm_dynamics.nodes import markers
from vtm_dynamics.nodes.estop_parameters import PARAMETERS as PREDICTOR_PARAMETERS
from vtm_dynamics.nodes.robot_sim import PARAMETERS as SIM_PARAMETERS

LAUNCH = os.path.join(REPO_ROOT, "launch", "estop_predict.launch.py")
CONFIG = os.path.join(REPO_ROOT, "config", "estop_predict.yaml")
RVIZ = os.path.join(REPO_ROOT, "config", "rviz", "estop_predict.rviz")
ARGUMENTS = {"robot", "urdf", "brake_config", "stop_category", "sim", "rviz", "robot_state_publisher", "ghost",
             "params_file", "rviz_config", "use_sim_time"}
SPECS = {"estop_predictor": {s.name: s for s in PREDICTOR_PARAMETERS},
         "robot_sim": {s.name: s for s in SIM_PARAMETERS}}


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == name]


def _kw(call: ast.Call, key: str):
    for k in call.keywords:
        if k.arg == key:
            return k.value
    return None


def test_launch_file_compiles_and_declares_the_documented_arguments(tmp_path):
    py_compile.compile(LAUNCH, cfile=str(tmp_path / "launch.pyc"), doraise=True)
    tree = ast.parse(open(LAUNCH, encoding="utf-8").read())
    assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)
    declared = {c.args[0].value for c in _calls(tree, "DeclareLaunchArgument")}
    assert declared == ARGUMENTS
    for c in _calls(tree, "DeclareLaunchArgument"):
        assert _kw(c, "description") is not None and _kw(c, "default_value") is not None, c.args[0].value
    nodes = {(_kw(c, "package").value if isinstance(_kw(c, "package"), ast.Constant) else "vtm_dynamics",
              _kw(c, "executable").value) for c in _calls(tree, "Node")}
    assert nodes == {("robot_state_publisher", "robot_state_publisher"), ("tf2_ros", "static_transform_publisher"),
                     ("vtm_dynamics", "estop_predictor"), ("vtm_dynamics", "robot_sim"), ("rviz2", "rviz2")}
    conditions = [ast.unparse(_kw(c, "condition")) for c in _calls(tree, "Node") if _kw(c, "condition")]
    assert "IfCondition(LaunchConfiguration('sim'))" in conditions
    assert "IfCondition(LaunchConfiguration('rviz'))" in conditions
    # every node from another package can be switched off, so the vtm_dynamics nodes run without those packages
    for c in _calls(tree, "Node"):
        if isinstance(_kw(c, "package"), ast.Constant):
            assert _kw(c, "condition") is not None, ast.unparse(c)
    setup = open(os.path.join(REPO_ROOT, "setup.py"), encoding="utf-8").read()
    for exe in ("estop_predictor", "robot_sim"):
        assert f'"{exe} = vtm_dynamics.nodes.{exe}:main"' in setup


# ---------------------------------------------------------------------------------------------- stand-ins
class _Recorder:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _LaunchConfiguration(_Recorder):

    def perform(self, context):
        return context[self.args[0]]


def _fake_launch_modules() -> dict:
    mods = {}
    for name in ("launch", "launch.actions", "launch.conditions", "launch.substitutions", "launch_ros",
                 "launch_ros.actions", "launch_ros.parameter_descriptions", "launch_ros.substitutions"):
        mods[name] = types.ModuleType(name)
    mods["launch"].LaunchDescription = _Recorder
    for n in ("DeclareLaunchArgument", "LogInfo", "OpaqueFunction"):
        setattr(mods["launch.actions"], n, type(n, (_Recorder,), {}))
    mods["launch.conditions"].IfCondition = type("IfCondition", (_Recorder,), {})
    mods["launch.substitutions"].LaunchConfiguration = _LaunchConfiguration
    mods["launch.substitutions"].PathJoinSubstitution = type("PathJoinSubstitution", (_Recorder,), {})
    mods["launch_ros.actions"].Node = type("Node", (_Recorder,), {})
    mods["launch_ros.parameter_descriptions"].ParameterValue = type("ParameterValue", (_Recorder,), {})
    mods["launch_ros.substitutions"].FindPackageShare = type("FindPackageShare", (_Recorder,), {})
    return mods


@pytest.fixture
def launch_module(monkeypatch):
    for name, mod in _fake_launch_modules().items():
        monkeypatch.setitem(sys.modules, name, mod)
    namespace: dict = {"__name__": "estop_predict_launch"}
    exec(compile(open(LAUNCH, encoding="utf-8").read(), LAUNCH, "exec"), namespace)
    return namespace


def _context(**overrides) -> dict:
    ctx = {"robot": "ur5", "urdf": "", "brake_config": "", "stop_category": "0", "sim": "true", "rviz": "true",
           "robot_state_publisher": "true", "ghost": "true", "params_file": CONFIG, "rviz_config": RVIZ,
           "use_sim_time": "false"}
    ctx.update(overrides)
    return ctx


def _check_node_parameters(node, name):
    for entry in node.kwargs["parameters"]:
        if isinstance(entry, str):
            assert os.path.isfile(entry)
            continue
        for key, value in entry.items():
            if key == "use_sim_time":  # rclpy's built-in parameter, set on every node by the launch argument
                assert type(value) is bool, (name, value)
                continue
            spec = SPECS[name].get(key)
            assert spec is not None, f"{name} has no parameter {key!r}"
            assert type(value) is type(spec.default), (name, key, value)
            assert spec.check(value) is None, spec.check(value)


@pytest.mark.parametrize("overrides", [{}, {"robot": "planar_3r", "stop_category": "1"},
                                       {"urdf": "URDF", "robot": "ur5"}], ids=["ur5", "planar_3r", "urdf"])
def test_launch_function_passes_only_declared_valid_parameters(launch_module, overrides):
    from vtm_dynamics.nodes.model_source import robot_urdf_path

    if overrides.get("urdf") == "URDF":
        overrides["urdf"] = robot_urdf_path("planar_3r")
    description = launch_module["generate_launch_description"]()
    actions = description.args[0]
    declared = {a.args[0]: a.kwargs for a in actions if type(a).__name__ == "DeclareLaunchArgument"}
    assert set(declared) == ARGUMENTS
    opaque = [a for a in actions if type(a).__name__ == "OpaqueFunction"]
    assert len(opaque) == 1
    result = opaque[0].kwargs["function"](_context(**overrides))
    nodes = {(n.kwargs.get("namespace", ""), n.kwargs["name"]): n for n in result if type(n).__name__ == "Node"}
    assert set(nodes) == {("", "robot_state_publisher"), ("ghost", "robot_state_publisher"), ("", "ghost_anchor"),
                          ("ghost_replay", "robot_state_publisher"), ("", "replay_anchor"),
                          ("", "estop_predictor"), ("", "robot_sim"), ("", "rviz2")}
    ghost = nodes[("ghost", "robot_state_publisher")]
    assert ghost.kwargs["parameters"][0]["frame_prefix"] == "ghost/"
    assert ghost.kwargs["remappings"] == [("joint_states", "/predicted_joint_states")]
    root = "world" if overrides.get("robot", "ur5") == "ur5" and not overrides.get("urdf") else "base_link"
    assert nodes[("", "ghost_anchor")].kwargs["arguments"] == ["--frame-id", root, "--child-frame-id", "ghost/" + root]
    assert nodes[("", "rviz2")].kwargs["arguments"] == ["-d", RVIZ, "-f", root]
    replay = nodes[("ghost_replay", "robot_state_publisher")]  # the ghost replaying the predicted motion
    assert replay.kwargs["parameters"][0]["frame_prefix"] == "replay/"
    assert replay.kwargs["remappings"] == [("joint_states", "/predicted_motion")]
    assert nodes[("", "replay_anchor")].kwargs["arguments"] == ["--frame-id", root, "--child-frame-id",
                                                                 "replay/" + root]
    urdf_text = nodes[("", "robot_state_publisher")].kwargs["parameters"][0]["robot_description"].args[0]
    assert "<robot" in urdf_text
    _check_node_parameters(nodes[("", "estop_predictor")], "estop_predictor")
    _check_node_parameters(nodes[("", "robot_sim")], "robot_sim")
    assert nodes[("", "robot_sim")].kwargs["parameters"][1]["publish_robot_description"] is False
    conditions = {key: n.kwargs["condition"].args[0].args[0] for key, n in nodes.items() if "condition" in n.kwargs}
    assert conditions == {("", "robot_state_publisher"): "robot_state_publisher", ("ghost", "robot_state_publisher"):
                          "ghost", ("", "ghost_anchor"): "ghost", ("ghost_replay", "robot_state_publisher"): "ghost",
                          ("", "replay_anchor"): "ghost", ("", "robot_sim"): "sim", ("", "rviz2"): "rviz"}


def test_without_its_robot_state_publisher_the_simulated_robot_publishes_the_description(launch_module):
    actions = launch_module["generate_launch_description"]().args[0]
    opaque = [a for a in actions if type(a).__name__ == "OpaqueFunction"][0]
    result = opaque.kwargs["function"](_context(robot_state_publisher="false"))
    sim = [n for n in result if type(n).__name__ == "Node" and n.kwargs["name"] == "robot_sim"][0]
    assert sim.kwargs["parameters"][1]["publish_robot_description"] is True


@pytest.mark.parametrize("value, expected", [("true", True), ("false", False)])
def test_use_sim_time_reaches_every_node_of_the_graph(launch_module, value, expected):
    """Simulators publish /clock: one launch argument switches every node to it, none is left on wall time."""
    actions = launch_module["generate_launch_description"]().args[0]
    opaque = [a for a in actions if type(a).__name__ == "OpaqueFunction"][0]
    nodes = [n for n in opaque.kwargs["function"](_context(use_sim_time=value)) if type(n).__name__ == "Node"]
    assert nodes
    for node in nodes:
        dicts = [e for e in node.kwargs.get("parameters", []) if isinstance(e, dict)]
        assert any(d.get("use_sim_time") is expected for d in dicts), node.kwargs["name"]


def test_yaml_sets_only_declared_parameters_with_valid_values():
    config = yaml.safe_load(open(CONFIG, encoding="utf-8"))
    assert set(config) == {"estop_predictor", "robot_sim"}
    for node, section in config.items():
        params = section["ros__parameters"]
        for key, value in params.items():
            spec = SPECS[node].get(key)
            assert spec is not None, f"{node}.{key} is not declared"
            if isinstance(spec.default, float) and isinstance(value, int):
                pytest.fail(f"{node}.{key}: write {value}.0 (rclpy refuses an integer for a double parameter)")
            assert type(value) is type(spec.default) or (isinstance(spec.default, list) and isinstance(value, list))
            assert spec.check(value) is None, spec.check(value)


def test_rviz_config_shows_the_topics_the_nodes_publish():
    rviz = yaml.safe_load(open(RVIZ, encoding="utf-8"))
    displays = {d["Name"]: d for d in rviz["Visualization Manager"]["Displays"]}
    marker = [d for d in displays.values() if d["Class"] == "rviz_default_plugins/MarkerArray"][0]
    assert marker["Topic"]["Value"] == "/stop_markers"
    assert set(marker["Namespaces"]) == set(markers.NAMESPACES)
    robots = [d for d in displays.values() if d["Class"] == "rviz_default_plugins/RobotModel"]
    assert {(d["Description Topic"]["Value"], d["TF Prefix"]) for d in robots} == {
        ("/robot_description", ""), ("/ghost/robot_description", "ghost"),
        ("/ghost_replay/robot_description", "replay")}
    assert all(d["Description Topic"]["Durability Policy"] == "Transient Local" for d in robots)
