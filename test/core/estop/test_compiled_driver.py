"""The compiled event loop's inputs and outputs that do not need a robot: the brakes' time events in the order the
Python loop processes them, and the engine's error messages for each of the loop's failures."""

import math

import numpy as np
import pytest

from vtm_dynamics.core.estop import compiled_driver as cd


def sorted_as_the_python_loop_sorts(engage, rise):
    """An independent formulation: one tuple per event, engagement then its rise end joint after joint, sorted by
    (time, code) with Python's stable sort."""
    events = []
    for i, t in enumerate(engage):
        if math.isfinite(t):
            events.append((t, cd.ENGAGE_EVENT, i))
            if rise[i] > 0.0:
                events.append((t + rise[i], cd.RISE_END_EVENT, i))
    events.sort(key=lambda e: (e[0], e[1]))
    return events


@pytest.mark.parametrize("seed", range(20))
def test_time_events_come_in_time_order_with_ties_in_joint_order(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 8))
    # few distinct values, so that engagements, rise ends and both tie; some brakes never engage, some have no rise
    engage = rng.choice([0.0, 0.005, 0.01, math.inf], n)
    rise = rng.choice([0.0, 0.005, 0.01], n)
    times, codes, joints = cd.time_events(engage, rise)
    got = list(zip(times.tolist(), codes.tolist(), joints.tolist()))
    assert got == sorted_as_the_python_loop_sorts(engage, rise)


def test_each_failure_of_the_loop_has_the_engines_message():
    assert cd.failure(cd.UNDERFLOW, 0.0123) == "step size underflow at t=0.0123 s"
    assert "more than 7 events" in cd.failure(cd.TOO_MANY_EVENTS, max_events=7)
    assert "no progress at t=0.5 s" in cd.failure(cd.NO_PROGRESS, 0.5)
    assert "not positive definite" in cd.failure(cd.NOT_POSITIVE_DEFINITE)
    assert "no consistent split" in cd.failure(cd.NO_SPLIT)
    with pytest.raises(KeyError):
        cd.failure(cd.DONE)
