"""vtm_dynamics.core is physics only: no module under it may import rclpy or any ROS package."""

import ast
import pathlib

import vtm_dynamics.core

CORE = pathlib.Path(vtm_dynamics.core.__file__).parent
ROS_ROOTS = {
    "rclpy", "rcl_interfaces", "rosidl_runtime_py", "rosidl_parser", "launch", "launch_ros", "ament_index_python",
    "std_msgs", "sensor_msgs", "geometry_msgs", "trajectory_msgs", "visualization_msgs", "diagnostic_msgs",
    "builtin_interfaces", "vtm_msgs", "tf2_ros", "rosbag2_py", "message_filters",
}


def _imported_roots(path: pathlib.Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
            "import_module", "__import__"
        ):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                roots.add(node.args[0].value.split(".")[0])
    return roots


def test_core_modules_import_no_ros_package():
    files = sorted(CORE.rglob("*.py"))
    assert len(files) >= 7  # the scan really sees the core modules
    offenders = {}
    for f in files:
        bad = {r for r in _imported_roots(f) if r in ROS_ROOTS or r.startswith(("ros", "rcl", "rmw"))}
        if bad:
            offenders[str(f.relative_to(CORE))] = sorted(bad)
    assert offenders == {}


def test_the_scan_detects_a_ros_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy\nfrom rclpy.node import Node\nimportlib.import_module('std_msgs.msg')\n")
    assert {"rclpy", "std_msgs"} <= _imported_roots(bad)
