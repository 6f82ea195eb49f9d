"""Where a recorded stop comes to rest (recordings/rest.py): the same sample as the rule read literally, on random
recordings with repeated stamps, noise and gaps; a rest window the samples do not cover shows no rest (a gap in
the joint states while the arm still moves); and the work grows linearly with a stop that never settles (counted in
array elements the computation touches, so the check does not depend on the machine's speed). Before, 80,000
samples of a stop that never settled took 35 s (quadratic)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from vtm_dynamics.recordings.bag_files import JointSeries, Recording, RecordingError, TriggerSeries
from vtm_dynamics.recordings.rest import REST_MAX_GAP_FRACTION, first_rest
from vtm_dynamics.recordings.stops import find_stops
from vtm_dynamics.recordings.trigger import TriggerRule


def literal_rest(t, q, first, stop, hold, tol):
    """The rule of recordings/stops.py, read literally (one candidate at a time, whole-window comparison)."""
    for a in range(first, stop):
        if t[-1] < t[a] + hold:
            return None
        window = (t >= t[a]) & (t <= t[a] + hold)
        seen = np.flatnonzero((t >= t[a]) & (t <= t[a] + hold))
        end = int(np.flatnonzero(t >= t[a] + hold)[0])  # the first sample at or after the window's end
        covered = np.all(np.diff(t[seen[0]:end + 1]) <= REST_MAX_GAP_FRACTION * hold)
        if covered and np.all(np.abs(q[window] - q[a]) <= tol):
            return a
    return None


@pytest.mark.parametrize("seed", range(12))
def test_the_rest_sample_is_the_one_the_literal_rule_finds(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    t = np.sort(np.round(rng.uniform(0, 2.0, n), 2))  # repeated stamps included
    decay = np.exp(-rng.uniform(1, 8) * t)[:, None]
    q = decay * rng.normal(0, 0.05, (1, 3)) + rng.normal(0, rng.choice([1e-5, 3e-4, 2e-3]), (n, 3))
    first, stop = int(rng.integers(0, n)), int(rng.integers(0, n + 1))
    hold, tol = float(rng.uniform(0.05, 0.4)), float(rng.choice([1e-4, 1e-3, 5e-3]))
    assert first_rest(t, q, first, stop, hold, tol) == literal_rest(t, q, first, stop, hold, tol)


def _moving_until_a_gap() -> Recording:
    """Two stops 1 s apart with the joint states paused in between (a recording paused while the arm is moved on):
    in the first the arm still moves at 0.1 rad/s when the samples stop, the second comes to rest."""
    t1 = 1.0 + 0.002 * np.arange(500)  # 1.0-2.0 s: moving to the end
    t2 = 2.6 + 0.002 * np.arange(500)  # 2.6-3.6 s: at rest from 2.8 s
    q1 = np.column_stack([0.1 * t1, 0.0 * t1])
    q2 = np.column_stack([0.5 + 0.1 * np.minimum(t2, 2.8), 0.0 * t2])
    t, q = np.concatenate([t1, t2]), np.vstack([q1, q2])
    v = np.gradient(q, t, axis=0)
    trigger = TriggerSeries(np.array([0.9, 1.1, 2.5, 2.7]), np.array([False, True, False, True]))
    return Recording("paused", "mcap", JointSeries(("joint1", "joint2"), t, q, v), trigger, TriggerRule(), ())


def test_a_gap_in_the_joint_states_is_no_rest():
    """Before, the last sample ahead of the pause was a complete rest window of one sample: the first stop 'ended'
    while the arm moved at 0.1 rad/s, and the fit went on with it."""
    rec = _moving_until_a_gap()
    assert first_rest(rec.joints.t, rec.joints.q, 60, 500, 0.2, 1e-3) is None
    with pytest.raises(RecordingError, match=r"stop 1 .*no rest before a gap of 0\.60.*still moving before it: joint1"):
        find_stops(rec, _TwoJoints())


def test_a_few_lost_samples_do_not_hide_a_rest():
    """A driver that drops messages (a few missing samples, far below a quarter of the rest window) still shows
    the rest where it begins."""
    t = 1.0 + 0.002 * np.arange(400)
    keep = np.ones(t.size, dtype=bool)
    keep[[120, 121, 122, 200, 260, 261]] = False
    t = t[keep]
    q = np.column_stack([0.1 * np.minimum(t, 1.2), 0.0 * t])
    rest = first_rest(t, q, 0, t.size, 0.2, 1e-3)
    assert rest is not None and abs(t[rest] - 1.19) < 0.012


class Counted(np.ndarray):
    """An array that adds up the elements every numpy operation on it touches (a measure of work)."""

    touched = 0

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        Counted.touched += sum(np.size(x) for x in inputs if isinstance(x, np.ndarray))
        plain = [np.asarray(x) if isinstance(x, Counted) else x for x in inputs]
        return getattr(ufunc, method)(*plain, **kwargs)


def _never_settling(n: int) -> Recording:
    t = 1.0 + 0.002 * np.arange(n)
    q = np.column_stack([0.5 * np.sin(t), 0.3 * t])  # moving to the end of the recording
    trigger = TriggerSeries(np.array([1.01]), np.array([True]))
    joints = JointSeries(("joint1", "joint2"), t.view(Counted), q, np.column_stack([0.5 * np.cos(t), 0.3 + 0 * t]))
    return Recording("never", "mcap", joints, trigger, TriggerRule(), ())


def _work(n: int) -> int:
    Counted.touched = 0
    rec = _never_settling(n)
    with pytest.raises(RecordingError, match="cut off by the end of the recording"):
        find_stops(rec, _TwoJoints())
    return Counted.touched


class _TwoJoints:
    """The parts of a robot model find_stops reads: joint names, coordinate counts, joint kinds (for the units of
    the rest thresholds) and limits (two revolute joints without position or velocity limits)."""

    name, nq, nv = "two", 2, 2
    joint_names = ("joint1", "joint2")
    joints = tuple(SimpleNamespace(name=n, nq=1, nv=1, idx_q=i, idx_v=i, prismatic=False)
                   for i, n in enumerate(("joint1", "joint2")))
    model = SimpleNamespace(lowerPositionLimit=np.full(2, -np.inf), upperPositionLimit=np.full(2, np.inf),
                            velocityLimit=np.full(2, np.inf))


def test_a_stop_that_never_settles_costs_linear_work():
    small, large = _work(5_000), _work(20_000)
    assert large < 6 * small, (small, large)  # 4 x the samples: about 4 x the work (quadratic: 16 x)
    assert large < 100 * 20_000
