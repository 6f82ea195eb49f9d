"""Paths of the models the core tests use (imported by the test modules and conftest of test/core)."""

import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLANAR_3R = os.path.join(REPO, "urdf", "planar_3r.urdf")
UR5 = "ur_description/urdf/ur5_robot.urdf"
