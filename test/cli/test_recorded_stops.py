"""The verdict line of a replay or a calibration check (module recorded_stops)."""

import math

from vtm_dynamics.cli.recorded_stops import shortfall_line
from vtm_dynamics.core.estop.stop_comparison import Shortfall


def test_a_stop_the_engine_could_not_predict_is_reported_with_the_engines_reason_not_as_not_at_rest():
    short = [Shortfall("bag#2", "time", -0.08), Shortfall("bag#1", "time", math.nan, "q0: elbow_joint is 3.64 rad")]
    line = shortfall_line(short, 0.05)
    assert line.startswith("non-conservative: 2 stop figure(s)")
    assert "worst bag#1 stop time not predicted: q0: elbow_joint is 3.64 rad" in line


def test_a_prediction_that_never_comes_to_rest_is_still_reported_as_not_at_rest():
    line = shortfall_line([Shortfall("bag#1", "time", math.nan)], 0.05)
    assert line.endswith("(worst bag#1 stop time not at rest)")
