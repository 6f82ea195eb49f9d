"""Isolation by default: loopback-only DDS sockets, discovery on this machine, a private domain per demo.

The socket test reads what a real node process opened (``/proc/<pid>/fd`` -> socket inodes -> ``/proc/net/udp*``),
so it checks the binding the kernel sees, not a configuration value.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time

import pytest

from test.ros_helpers import REPO_ROOT, inet_sockets, is_loopback, python_executable, ros_subprocess_env

PROFILE_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"


def _stop(proc: subprocess.Popen) -> None:
    """End a process this test started (by its PID only)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


# ------------------------------------------------------------------------------------ the loopback profile
def test_loopback_addresses_are_told_apart_from_wildcard_and_lan_addresses():
    assert is_loopback("127.0.0.1") and is_loopback("127.3.4.5") and is_loopback("::1")
    assert is_loopback("::ffff:127.0.0.1")
    for address in ("0.0.0.0", "::", "192.168.1.20", "10.0.0.1", "fe80::1"):
        assert not is_loopback(address), address


def test_a_node_binds_every_dds_socket_to_loopback_and_still_talks_to_another_process():
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    env = ros_subprocess_env()
    env.pop(PROFILE_VARIABLE, None)  # the node's own main must choose the loopback profile
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = ""  # empty means unset (LOCALHOST), never SUBNET
    proc = subprocess.Popen([python_executable(), "-m", "vtm_dynamics.nodes.robot_sim"], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    context = rclpy.Context()
    rclpy.init(context=context)
    received: list[JointState] = []
    try:
        node = rclpy.create_node("isolation_probe", context=context)
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
        node.create_subscription(JointState, "joint_states", received.append, qos)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and len(received) < 5 and proc.poll() is None:
            executor.spin_once(timeout_sec=0.1)
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert len(received) >= 5, "no joint_states from the node process: pub/sub across processes is broken"
        sockets = inet_sockets(proc.pid)
        assert any(proto.startswith("udp") for proto, _, _ in sockets), sockets  # the check sees DDS sockets
        exposed = [s for s in sockets if not is_loopback(s[1])]
        assert exposed == [], f"sockets not bound to loopback: {exposed}"
        executor.shutdown()
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
        _stop(proc)


def test_participants_created_by_the_tests_themselves_bind_loopback_only():
    """Test modules call rclpy.init directly; conftest makes that init loopback-only as well."""
    import rclpy

    before = set(inet_sockets(os.getpid()))
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node("isolation_self_probe", context=context)
        opened = set(inet_sockets(os.getpid())) - before
        assert any(proto.startswith("udp") for proto, _, _ in opened), opened
        exposed = sorted(s for s in opened if not is_loopback(s[1]))
        assert exposed == [], f"sockets not bound to loopback: {exposed}"
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"  # what subprocesses inherit is unchanged


def test_isolation_defaults_point_fast_dds_at_the_shipped_loopback_profile():
    from vtm_dynamics.nodes.fastdds_profile import fastdds_profile_path
    from vtm_dynamics.nodes.graph import apply_isolation_defaults

    env: dict[str, str] = {}
    assert apply_isolation_defaults(env) == []
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert env[PROFILE_VARIABLE] == fastdds_profile_path()
    text = open(env[PROFILE_VARIABLE], encoding="utf-8").read()
    assert 'name="127.0.0.1"' in text and "<type>SHM</type>" in text
    assert "<useBuiltinTransports>false</useBuiltinTransports>" in text


def test_a_profile_chosen_by_the_user_is_kept_and_lan_discovery_gets_no_loopback_profile(tmp_path):
    from vtm_dynamics.nodes.graph import apply_isolation_defaults

    own = str(tmp_path / "mine.xml")
    env = {PROFILE_VARIABLE: own}
    apply_isolation_defaults(env)
    assert env[PROFILE_VARIABLE] == own
    env = {PROFILE_VARIABLE: ""}  # empty counts as unset (Fast DDS would report a missing file)
    apply_isolation_defaults(env)
    assert env[PROFILE_VARIABLE].endswith("fastdds_localhost.xml")
    env = {"ROS_STATIC_PEERS": "10.0.0.7"}  # the user wants another host: a loopback-only transport would block it
    apply_isolation_defaults(env)
    assert PROFILE_VARIABLE not in env
    env = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}
    warnings = apply_isolation_defaults(env)
    assert PROFILE_VARIABLE not in env  # a loopback-only transport would contradict LAN discovery
    assert any("not limited to this machine" in w for w in warnings)
    env = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "somewhere"}
    warnings = apply_isolation_defaults(env)
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST" and PROFILE_VARIABLE in env and len(warnings) == 1


def test_rcl_sees_system_default_discovery_only_while_the_loopback_profile_is_in_charge():
    """rmw_fastrtps adds its own all-interface UDP transport for LOCALHOST; the profile does LOCALHOST itself."""
    from vtm_dynamics.nodes.fastdds_profile import fastdds_profile_path, rcl_init_environment

    env = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", PROFILE_VARIABLE: fastdds_profile_path()}
    with rcl_init_environment(env):
        assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SYSTEM_DEFAULT"
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    with pytest.raises(RuntimeError):
        with rcl_init_environment(env):
            raise RuntimeError("rclpy.init failed")
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    for other in ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", PROFILE_VARIABLE: "/somewhere/mine.xml"},
                  {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET", PROFILE_VARIABLE: fastdds_profile_path()},
                  {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", PROFILE_VARIABLE: fastdds_profile_path(),
                   "ROS_STATIC_PEERS": "10.0.0.7"}):
        before = dict(other)
        with rcl_init_environment(other):
            assert other == before


def test_the_profile_is_installed_with_the_package():
    setup_py = open(os.path.join(REPO_ROOT, "setup.py"), encoding="utf-8").read()
    assert 'glob("config/*.xml")' in setup_py


# ------------------------------------------------------------------------------------------ private domains
def test_a_user_set_domain_is_kept_and_a_malformed_one_is_rejected_naming_the_variable():
    from vtm_dynamics.nodes.private_domain import choose_domain

    env = {"ROS_DOMAIN_ID": " 42 "}
    choice = choose_domain(env)
    assert (choice.domain_id, choice.source, env["ROS_DOMAIN_ID"]) == (42, "environment", "42")
    for bad in ("abc", "-1", "233", "4.5"):
        with pytest.raises(ValueError, match="ROS_DOMAIN_ID: must be an integer 0..232"):
            choose_domain({"ROS_DOMAIN_ID": bad})


def test_unset_or_empty_domain_gets_a_private_one_and_two_choosers_never_share_it(tmp_path):
    from vtm_dynamics.nodes.private_domain import choose_domain

    picked = []
    for k in range(6):
        env = {} if k % 2 else {"ROS_DOMAIN_ID": ""}
        # the same random sequence for every chooser: without the reservation they would all pick the same id
        choice = choose_domain(env, rng=random.Random(7), lock_dir=str(tmp_path))
        assert choice.source == "random" and 1 <= choice.domain_id <= 101
        assert env["ROS_DOMAIN_ID"] == str(choice.domain_id)
        picked.append(choice.domain_id)
    assert len(set(picked)) == len(picked), picked


def test_importing_the_demo_changes_no_environment_variable():
    code = ("import os; before = dict(os.environ); import vtm_dynamics.cli.estop_demo; "
            "print(sorted(k for k in set(os.environ) | set(before) if os.environ.get(k) != before.get(k)))")
    env = ros_subprocess_env()
    env.pop("ROS_AUTOMATIC_DISCOVERY_RANGE")
    env.pop("MPLBACKEND", None)
    out = subprocess.run([python_executable(), "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_demo_environment_handles_empty_and_unknown_discovery_ranges_and_picks_a_domain(tmp_path):
    from vtm_dynamics.cli.estop_demo import prepare_environment

    for value, n_warnings in (("", 0), ("   ", 0), ("EVERYWHERE", 1)):
        env = {"ROS_AUTOMATIC_DISCOVERY_RANGE": value}
        lines, status = prepare_environment(env)
        assert status == 0
        assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
        assert 1 <= int(env["ROS_DOMAIN_ID"]) <= 101  # a private domain, never the default 0
        assert sum("warning" in line for line in lines) == n_warnings, lines
        assert any(f"ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']}" in line for line in lines), lines
    env = {"ROS_DOMAIN_ID": "17"}
    lines, status = prepare_environment(env)
    assert status == 0 and env["ROS_DOMAIN_ID"] == "17"
    lines, status = prepare_environment({"ROS_DOMAIN_ID": "seventeen"})
    assert status == 2 and any("ROS_DOMAIN_ID: must be an integer" in line for line in lines)


def test_two_demos_side_by_side_each_in_its_own_domain_both_succeed(tmp_path):
    """Both processes start at once with no ROS_DOMAIN_ID (as two users typing `make demo`), on different robots so
    that any cross-talk (the other demo's description, states or E-stop) spoils the comparison; one of them also
    has an empty discovery range. Each must pick its own domain and compare a correct prediction."""
    robots = ("ur5", "planar_3r")
    results: dict[int, subprocess.CompletedProcess] = {}

    def run(k: int) -> None:
        env = ros_subprocess_env()
        env.pop("ROS_DOMAIN_ID", None)
        env.pop(PROFILE_VARIABLE, None)
        if k == 1:
            env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = ""
        results[k] = subprocess.run(
            [python_executable(), "-m", "vtm_dynamics.cli.estop_demo", "--output-dir", str(tmp_path / f"d{k}"),
             "--timeout", "120", "--no-plots", "--robot", robots[k]],
            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=240)

    threads = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    domains = []
    for k in (0, 1):
        proc = results[k]
        assert proc.returncode == 0, proc.stdout + proc.stderr
        lines = [line for line in proc.stdout.splitlines() if "ROS_DOMAIN_ID=" in line]
        assert len(lines) == 1 and "picked at random" in lines[0], proc.stdout
        domains.append(int(lines[0].split("ROS_DOMAIN_ID=")[1].split()[0]))
        assert "discovery LOCALHOST" in proc.stdout, proc.stdout
        summary = json.loads((tmp_path / f"d{k}" / "summary.json").read_text())
        assert summary["robot"] == robots[k] and summary["within_tolerance"], summary
        assert summary["max_rest_angle_error_rad"] < 2e-3
        assert abs(summary["predicted"]["stop_time_s"] - summary["simulated"]["stop_time_s"]) < 2e-3
    assert domains[0] != domains[1] and 0 not in domains, domains


@pytest.mark.parametrize("value, expected", [(None, "LOCALHOST"), ("", "LOCALHOST"), ("  ", "LOCALHOST"),
                                             ("SUBNET", "SUBNET")])
def test_make_passes_localhost_discovery_to_its_commands_when_the_range_is_unset_or_empty(value, expected):
    import shutil

    make = shutil.which("make")
    assert make, "make is needed for the project's entry points"
    env = ros_subprocess_env()
    env.pop("ROS_AUTOMATIC_DISCOVERY_RANGE")
    if value is not None:
        env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = value
    show = 'vtm-show-range: ; @echo "range=[$$ROS_AUTOMATIC_DISCOVERY_RANGE]"'
    out = subprocess.run([make, "-s", "--no-print-directory", "-C", REPO_ROOT, "--eval", show, "vtm-show-range"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"range=[{expected}]"


def test_a_copy_of_the_loopback_profile_from_another_install_is_recognised_as_the_loopback_profile(tmp_path):
    """A process started from another install or checkout of the suite passes FASTDDS_DEFAULT_PROFILES_FILE with
    that install's path to the same profile to its children. Before, only this install's path counted, so rcl saw
    LOCALHOST and rmw added its all-interface UDP transport: a node started so bound 0.0.0.0 and the LAN address."""
    import shutil

    from vtm_dynamics.nodes.fastdds_profile import fastdds_profile_path, rcl_init_environment

    copy = tmp_path / "other_install" / "fastdds_localhost.xml"
    copy.parent.mkdir()
    shutil.copyfile(fastdds_profile_path(), copy)
    env = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", PROFILE_VARIABLE: str(copy)}
    with rcl_init_environment(env):
        assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SYSTEM_DEFAULT"
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    changed = tmp_path / "mine.xml"  # a profile of the user's own (any other content) is used as is
    changed.write_text(copy.read_text(encoding="utf-8").replace("127.0.0.1", "192.168.1.20"), encoding="utf-8")
    for other in (str(changed), str(tmp_path / "missing.xml")):
        env = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", PROFILE_VARIABLE: other}
        with rcl_init_environment(env):
            assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
