"""A default that the core, the nodes and the command lines share has one value: the core's.

(The category-1 deceleration and the robot facts get their one home with the robot catalogue; this file holds the
defaults that disagreed.)
"""

from __future__ import annotations

import os

import yaml

from test.ros_helpers import REPO_ROOT
from vtm_dynamics.core.estop import StopSettings


def test_the_prediction_step_is_the_cores_everywhere():
    """The node predicted with 0.004 s where the core and vtm-predict use 0.005 s."""
    from vtm_dynamics.nodes.estop_predictor import PARAMETERS as PREDICTOR_PARAMETERS

    spec = next(s for s in PREDICTOR_PARAMETERS if s.name == "integration_step")
    assert spec.default == StopSettings.step == StopSettings().step
    with open(os.path.join(REPO_ROOT, "config", "estop_predict.yaml"), encoding="utf-8") as fh:
        shipped = yaml.safe_load(fh)["estop_predictor"]["ros__parameters"]
    assert shipped.get("integration_step", StopSettings.step) == StopSettings.step
