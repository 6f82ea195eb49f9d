"""The launch check of docs/ros.md is a script (tools/check_launch.sh); what CI can check of it without the network
or four minutes of builds: it refuses to run without being told where the sources come from, the versions it pins
are the ones the guide names, and the guide's argument table is the launch file's, counted right."""

from __future__ import annotations

import ast
import os
import re
import subprocess

from test.ros_helpers import REPO_ROOT

SCRIPT = os.path.join(REPO_ROOT, "tools", "check_launch.sh")
WORDS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split()


def _ros_md() -> str:
    with open(os.path.join(REPO_ROOT, "docs", "ros.md"), encoding="utf-8") as fh:
        return fh.read()


def test_the_script_fetches_only_when_asked():
    out = subprocess.run(["bash", SCRIPT], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip() == "check_launch: error: give --fetch (clone from github.com/ros2) or --sources DIR"
    usage = subprocess.run(["bash", SCRIPT, "--help"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 0 and "--fetch" in usage.stdout and "--sources DIR" in usage.stdout


def test_the_pinned_source_versions_are_the_guides():
    with open(SCRIPT, encoding="utf-8") as fh:
        tags = dict(re.findall(r"^([A-Z0-9_]+)_TAG=(\S+)$", fh.read(), flags=re.M))
    doc = " ".join(_ros_md().split())
    for repo, key in (("launch", "LAUNCH"), ("launch_ros", "LAUNCH_ROS"), ("ros2cli", "ROS2CLI"),
                      ("rcl_interfaces", "RCL_INTERFACES"), ("rosidl_runtime_py", "ROSIDL_RUNTIME_PY")):
        assert f"ros2/{repo} {tags[key]}" in doc, repo
    for package in ("rosidl_runtime_py", "ros2param", "wheel", "composition_interfaces", "LD_LIBRARY_PATH",
                    "AMENT_PREFIX_PATH", "PATH"):
        assert package in doc, package


def test_the_argument_table_is_the_launch_files_and_counted_right():
    with open(os.path.join(REPO_ROOT, "launch", "estop_predict.launch.py"), encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    declared = [n.args[0].value for n in ast.walk(tree)
                if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "DeclareLaunchArgument"]
    robot = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") ==
                 "DeclareLaunchArgument" and n.args[0].value == "robot")
    choices = [e.value for e in next(k.value for k in robot.keywords if k.arg == "choices").elts]
    doc = _ros_md()
    table = doc.split("| launch argument | default | meaning |")[1].split("\n\n")[0]
    assert re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.M) == declared
    robot_row = next(line for line in table.splitlines() if line.startswith("| `robot`"))
    assert all(f"`{c}`" in robot_row for c in choices), robot_row  # ur3 was missing
    counts = re.findall(r"`--show-args` lists the (\w+) arguments", doc)
    assert counts and all(c == WORDS[len(declared)] for c in counts), counts  # it said "ten"
    assert "urdf_path: cannot read /nonexistent.urdf" not in doc  # a stale error text
