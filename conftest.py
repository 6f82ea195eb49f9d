"""Project-wide pytest set-up: DDS stays on this machine, and each test run gets its own ROS domain.

This runs before any test module creates a ROS context, so every node created by the tests, and every subprocess
started with ``test.ros_helpers.ros_subprocess_env()`` (which copies this environment), inherits:
- ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and no static peers;
- the shipped loopback Fast DDS profile (``FASTDDS_DEFAULT_PROFILES_FILE``), whatever the user's shell has, so no
  test opens a socket on a LAN address;
- a private ``ROS_DOMAIN_ID`` (1..101) that no other process on this machine uses, reserved for the whole run, so
  test runs of several people on one machine never hear each other. ``VTM_TEST_DOMAIN_ID`` forces one.
"""

import os

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
