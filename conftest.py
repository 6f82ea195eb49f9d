"""Project-wide pytest set-up: DDS discovery stays on loopback, and each test run gets its own ROS domain.

This runs before any test module imports rclpy, so every node created by the tests inherits it.
"""

import os
import random

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.pop("ROS_STATIC_PEERS", None)
if "VTM_TEST_DOMAIN_ID" in os.environ:
    os.environ["ROS_DOMAIN_ID"] = os.environ["VTM_TEST_DOMAIN_ID"]
else:
    # Domain ids 0..101 are safe on Linux for any participant count; avoid 0 (the default many robots use).
    os.environ["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(1, 101))
os.environ.setdefault("MPLBACKEND", "Agg")
