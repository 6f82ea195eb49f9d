"""Project-wide pytest set-up: DDS stays on this machine, and each test run gets its own ROS domain.

This runs before any test module creates a ROS context, so every node created by the tests, and every subprocess
started with ``test.ros_helpers.ros_subprocess_env()`` (which copies this environment), inherits:
- ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and no static peers;
- the shipped loopback Fast DDS profile (``FASTDDS_DEFAULT_PROFILES_FILE``), whatever the user's shell has, so no
  test opens a socket on a LAN address;
- a private ``ROS_DOMAIN_ID`` (1..101) that no other process on this machine uses, reserved for the whole run, so
  test runs of several people on one machine never hear each other. ``VTM_TEST_DOMAIN_ID`` forces one;
- a cache of packed view files (``VTM_VIEW_CACHE``) in the run's temporary folder, not in the user's home, and one
  of generated dynamics (``VTM_GENERATED_CACHE``) beside it.

Test modules call ``rclpy.init`` directly; it is wrapped here in ``fastdds_profile.rcl_init_environment``, as the
node executables do, so that rmw_fastrtps does not add its all-interface UDP transport to the test's own
participants (see that module).
"""

import functools
import os

import pytest
import rclpy

from vtm_dynamics.nodes.fastdds_profile import rcl_init_environment
from vtm_dynamics.nodes.graph import apply_isolation_defaults
from vtm_dynamics.nodes.private_domain import choose_domain

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.pop("ROS_STATIC_PEERS", None)
os.environ.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
apply_isolation_defaults(os.environ)
os.environ.pop("ROS_DOMAIN_ID", None)
if os.environ.get("VTM_TEST_DOMAIN_ID", "").strip():
    os.environ["ROS_DOMAIN_ID"] = os.environ["VTM_TEST_DOMAIN_ID"]
choose_domain(os.environ)  # keeps a forced id (validated), else picks and reserves a free private one
os.environ.setdefault("MPLBACKEND", "Agg")


def _loopback_init(init):
    @functools.wraps(init)
    def call(*args, **kwargs):
        with rcl_init_environment():
            return init(*args, **kwargs)

    return call


rclpy.init = _loopback_init(rclpy.init)


@pytest.fixture(scope="session", autouse=True)
def private_view_cache(tmp_path_factory):
    """The cache of packed view files (``views/packed_files``) of this test run: a folder of its own, never the
    user's cache directory (subprocesses inherit it)."""
    folder = tmp_path_factory.mktemp("view-cache")
    os.environ["VTM_VIEW_CACHE"] = str(folder)
    return folder


@pytest.fixture(scope="session", autouse=True)
def private_generated_cache(tmp_path_factory):
    """The cache of generated M and h (``core/estop/generated_dynamics``) of the test runs: beside the run's
    temporary folders (shared by the xdist workers, whose writes are atomic renames), never the user's cache."""
    folder = tmp_path_factory.getbasetemp().parent / "generated-cache"
    folder.mkdir(exist_ok=True)
    os.environ["VTM_GENERATED_CACHE"] = str(folder)
    return folder


def pytest_report_header(config):
    """The floating-point kernels of this run (OpenBLAS core type, numpy SIMD): a figure that fails on one machine
    and not on another is read against this line (``tools/rerun_with_other_kernels.sh`` reruns the sensitive
    tests under others)."""
    from test.numeric_kernels import summary

    return summary()
