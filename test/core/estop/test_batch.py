"""A batch of stops (states x payloads x brake factors) gives exactly the predictions of one call per case, shares
its set-up, and names the case that fails."""

import dataclasses
import os

import numpy as np
import pytest

from core_testdata import REPO
from vtm_dynamics.core.estop import StopInputError, StopSettings, predict_stop
from vtm_dynamics.core.estop.batch import BatchStopError, StopBatch, predict_stops
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.payload import with_payload

UR5_BRAKES = os.path.join(REPO, "config", "ur5_brakes.yaml")


@pytest.fixture(scope="module")
def brakes(ur5):
    return brakes_from_config(ur5, UR5_BRAKES)


def cases():
    rng = np.random.default_rng(7)
    q = rng.uniform(-1.0, 1.0, (6, 6))
    v = rng.uniform(-1.5, 1.5, (6, 6))
    payloads = [0.0, 2.5, 5.0, 0.0, 2.5, 5.0]
    torque = [1.0, 0.9, 1.1, 0.95, 1.0, 0.9]
    delay = [1.0, 1.5, 1.0, 1.2, 1.5, 1.0]
    return q, v, payloads, torque, delay


def same(a, b):
    """Every field equal, arrays bit for bit (nan where nan), events included."""
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "events":
            assert len(x) == len(y)
            for ex, ey in zip(x, y):
                same(ex, ey)
        elif dataclasses.is_dataclass(x) and dataclasses.is_dataclass(y):  # e.g. a category-1 stop's ramp record
            same(x, y)
        elif isinstance(x, np.ndarray):
            assert x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), f.name
        else:
            assert (x is None) == (y is None) and (x is None or x == y or (x != x and y != y)), f.name


def test_a_batch_is_bit_identical_to_one_call_per_case(ur5, brakes):
    q, v, payloads, torque, delay = cases()
    got = predict_stops(ur5, brakes, q, v, payloads=payloads, torque_factors=torque, delay_factors=delay,
                        payload_frame="tool0", tcp_frame="tool0", generated=False)  # Pinocchio's M and h as single calls
    models = {}
    for k in range(len(q)):
        m = payloads[k]
        models.setdefault(m, ur5 if m == 0 else with_payload(ur5, m, "tool0"))
        one = predict_stop(models[m], brakes.scaled(torque[k], delay[k]), q[k], v[k], tcp_frame="tool0")
        same(got[k], one)
        assert got[k].n_evaluations == one.n_evaluations


def test_a_batch_of_category_one_stops_with_locks_matches_single_calls(ur5, brakes):
    from vtm_dynamics.core.estop import CategoryOne, LockEvent

    q, v, *_ = cases()
    options = dict(category=1, category_one=CategoryOne(deceleration=8.0, max_duration=0.05),
                   lock_events=[LockEvent(0.07, "elbow_joint")])
    got = predict_stops(ur5, brakes, q[:3], v[:3], generated=False, **options)
    for k in range(3):
        same(got[k], predict_stop(ur5, brakes, q[k], v[k], **options))


def test_the_set_up_is_shared_between_calls(ur5, brakes):
    q, v, payloads, torque, delay = cases()
    batch = StopBatch(ur5, brakes, "tool0")
    first = predict_stops(ur5, brakes, q[:2], v[:2], payloads=[2.5, 2.5], batch=batch)
    assert set(batch.models) == {2.5} and len(batch._engines) == 1
    again = predict_stops(ur5, brakes, q[:2], v[:2], payloads=[2.5, 2.5], batch=batch)
    for a, b in zip(first, again):
        same(a, b)


def test_the_failing_case_is_named(ur5, brakes):
    q, v, *_ = cases()
    v = v.copy()
    v[2, 1] = 1e3  # beyond the velocity limit
    with pytest.raises(BatchStopError) as err:
        predict_stops(ur5, brakes, q[:4], v[:4])
    assert err.value.index == 2 and str(err.value).startswith("case 2: v[shoulder_lift_joint]:")


@pytest.mark.parametrize("kwargs, field", [
    (dict(payloads=[1.0, 2.0]), "payloads"),
    (dict(torque_factors=[1.0]), "torque_factors"),
    (dict(payloads=[1.0, 1.0, 1.0]), "payload_frame"),
])
def test_bad_batch_inputs_give_one_line_naming_the_field(ur5, brakes, kwargs, field):
    q, v, *_ = cases()
    with pytest.raises(StopInputError) as err:
        predict_stops(ur5, brakes, q[:3], v[:3], settings=StopSettings(t_max=0.05), **kwargs)
    assert field in str(err.value) and "\n" not in str(err.value)
