"""What estop_predictor records about each E-stop prediction it publishes (stop_outputs), without ROS traffic."""

import pytest

from vtm_dynamics.nodes.stop_outputs import published_timing
from vtm_dynamics.nodes.stop_session import StopSession


def test_a_revisions_timing_is_stated_from_the_stops_trigger_and_from_its_own_request():
    """Trigger at 500.0 s (monotonic), revision requested at 500.7 s and published at 500.76 s: 0.76 s after the
    trigger, 0.06 s after its request."""
    s = StopSession()
    s.trigger(instant=100.0, stamped=False, received=100.0, wall=500.0, source="test")
    s.record(s.take_job(), True, None, None)
    s.trigger(instant=99.99, stamped=True, received=100.0, wall=500.7, source="test")  # gives the stop its stamp
    revision = s.take_job()
    timing = published_timing(revision, 500.76)
    assert timing.scenario == "estop-1-rev1"
    assert timing.since_trigger == pytest.approx(0.76, abs=1e-9)
    assert timing.since_request == pytest.approx(0.06, abs=1e-9)
