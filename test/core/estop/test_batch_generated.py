"""A batch whose M and h come from generated code gives the stops of the Pinocchio path (stop time, rest angles, TCP
distances within 1e-10) for payloads on any body and brake factors, and uses Pinocchio, saying why, for a model the
generator does not cover. Its event loop runs as one compiled call and gives, bit for bit, what the Python loop
gives on the same generated M and h."""

import dataclasses
import math
import os

import numpy as np
import pytest

from core_testdata import REPO
from joint_type_models import ur5_text, with_continuous
from vtm_dynamics.core.estop.batch import BatchStopError, StopBatch, predict_stops
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.payload import with_payload
from vtm_dynamics.core.estop import generated_dynamics as gd
from vtm_dynamics.core.estop.compiled_engine import LOOP_SWITCH
from vtm_dynamics.core.estop.inputs import LockEvent, StopSettings
from vtm_dynamics.core.robot.model import RobotModel

UR5_BRAKES = os.path.join(REPO, "config", "ur5_brakes.yaml")


@pytest.fixture(scope="module", autouse=True)
def generation_on():
    """The run's cache (conftest: beside the run's temporary folders, shared with the map's tests, so the UR5's code
    is generated once per run), with generation switched on whatever the shell says."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(gd.ENV_SWITCH, raising=False)
        yield


@pytest.fixture(scope="module")
def brakes(ur5):
    return brakes_from_config(ur5, UR5_BRAKES)


def assert_same_stops(a, b):
    for x, y in zip(a, b, strict=True):
        assert abs(x.stop_time - y.stop_time) <= 1e-10
        assert np.abs(x.q_final - y.q_final).max() <= 1e-10
        assert np.nanmax(np.abs(x.joint_stop_times - y.joint_stop_times)) <= 1e-10
        assert abs(x.tcp_straight_distance - y.tcp_straight_distance) <= 1e-10
        assert abs(x.tcp_path_length - y.tcp_path_length) <= 1e-10


def test_generated_batches_give_the_pinocchio_paths_stops(ur5, brakes):
    rng = np.random.default_rng(2028)
    n = 24
    q = rng.uniform(-1.2, 1.2, (n, 6))
    v = rng.uniform(-1.5, 1.5, (n, 6))
    payloads = np.resize([0.0, 2.5, 5.0, 3.0], n)  # 3 kg: a body with its own inertia on the forearm (below)
    torque = rng.uniform(0.85, 1.15, n)
    delay = rng.uniform(1.0, 1.5, n)
    models = {3.0: with_payload(ur5, 3.0, "forearm_link", (0.05, -0.02, 0.1), np.diag([0.02, 0.03, 0.01]))}
    fast = StopBatch(ur5, brakes, "tool0", models=models, generated=True)
    plain = StopBatch(ur5, brakes, "tool0", models=models, generated=False)
    options = dict(payloads=payloads, torque_factors=torque, delay_factors=delay, payload_frame="tool0",
                   tcp_frame="tool0")
    got = predict_stops(ur5, brakes, q, v, batch=fast, **options)
    for m in (0.0, 2.5, 3.0, 5.0):
        assert fast.generated_reason(m) is None  # the generated path was taken for every model
    assert_same_stops(got, predict_stops(ur5, brakes, q, v, batch=plain, **options))


def test_a_model_the_generator_does_not_cover_uses_pinocchio_and_says_why():
    robot = RobotModel.from_urdf(with_continuous(ur5_text(), "wrist_3_joint"))
    brakes = brakes_from_config(robot, UR5_BRAKES)
    rng = np.random.default_rng(5)
    q, v = rng.uniform(-1.0, 1.0, (3, 6)), rng.uniform(-1.0, 1.0, (3, 6))
    q_config = [robot.configuration_from_angles(x) for x in q]
    batch = StopBatch(robot, brakes, generated=True)
    got = predict_stops(robot, brakes, q_config, v, batch=batch)
    assert "continuous" in batch.generated_reason()
    plain = predict_stops(robot, brakes, q_config, v, generated=False)
    for a, b in zip(got, plain):
        assert a.stop_time == b.stop_time and np.array_equal(a.q_final, b.q_final)


def same_values(a, b, path="prediction"):
    """Every field of two results equal, arrays bit for bit (nan where nan); the first difference named."""
    if isinstance(a, np.ndarray):
        assert a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), path
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            same_values(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for k, (x, y) in enumerate(zip(a, b)):
            same_values(x, y, f"{path}[{k}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), path
    else:
        assert a == b, path


def stops_with_loop(monkeypatch, loop_off: bool, robot, brakes, q, v, **options):
    """The stops of a generated-M-and-h batch whose engines run the compiled loop, or the Python loop."""
    if loop_off:
        monkeypatch.setenv(LOOP_SWITCH, "off")
    else:
        monkeypatch.delenv(LOOP_SWITCH, raising=False)
    batch = StopBatch(robot, brakes, "tool0", generated=True)
    out = predict_stops(robot, brakes, q, v, batch=batch, **options)
    assert batch.generated_reason(5.0) is None
    return out


def test_the_compiled_loop_gives_the_python_loops_stops_bit_for_bit(ur5, brakes, monkeypatch):
    # weak brakes engaging one after another under a 5 kg payload: joints stick, slip and are released again, some
    # at one instant (each is checked to occur); joints at rest when the brakes engage; category 0 and 1 stops,
    # brake factors and payloads; every field of every stop compared
    staggered = dataclasses.replace(brakes, engage_delay=np.array([0.004, 0.03, 0.012, 0.02, 0.008, 0.016]))
    rng = np.random.default_rng(2029)
    n = 24
    q = rng.uniform(-1.5, 1.5, (n, 6))
    v = rng.uniform(-2.0, 2.0, (n, 6)) * (rng.uniform(size=(n, 6)) > 0.3)
    options = dict(payloads=np.resize([5.0, 5.0, 5.0, 0.0], n), torque_factors=np.resize([0.3, 0.3, 0.5, 1.0], n),
                   delay_factors=rng.uniform(1.0, 1.5, n), payload_frame="tool0", tcp_frame="tool0")
    kinds, mixed = set(), 0
    for category in (0, 1):
        compiled = stops_with_loop(monkeypatch, False, ur5, staggered, q, v, category=category, **options)
        python = stops_with_loop(monkeypatch, True, ur5, staggered, q, v, category=category, **options)
        same_values(compiled, python)
        kinds |= {e.kind for p in compiled for e in p.events}
        instants = [[e.kind for e in p.events if e.time == t] for p in compiled for t in {e.time for e in p.events}]
        mixed += sum(len(set(at) - {"engage"}) > 1 for at in instants)
    assert {"engage", "stick", "slip", "release"} <= kinds and mixed > 0


def test_the_compiled_loop_refuses_a_chattering_stop_as_the_python_loop_does(ur5, brakes, monkeypatch):
    q, v = np.array([[0.3, -1.2, 1.5, -0.8, 0.5, 0.2]]), np.array([[1.0, -1.5, 1.8, 1.5, -1.0, 2.0]])
    messages = []
    for loop_off in (False, True):
        with pytest.raises(BatchStopError) as err:
            stops_with_loop(monkeypatch, loop_off, ur5, brakes, q, v, settings=StopSettings(max_events=3))
        messages.append(err.value.reason)
    assert messages[0] == messages[1] and "more than 3 events" in messages[0]


def test_a_stop_with_an_abrupt_lock_runs_the_python_loop_on_generated_m_and_h(ur5, brakes):
    rng = np.random.default_rng(2030)
    q, v = rng.uniform(-1.2, 1.2, (4, 6)), rng.uniform(-1.5, 1.5, (4, 6))
    lock = [LockEvent(time=0.012, joints=("elbow_joint",), holding_torque=500.0)]
    fast = predict_stops(ur5, brakes, q, v, lock_events=lock, tcp_frame="tool0",
                         batch=StopBatch(ur5, brakes, generated=True))
    assert all(any(e.kind == "lock" for e in p.events) for p in fast)
    assert_same_stops(fast, predict_stops(ur5, brakes, q, v, lock_events=lock, tcp_frame="tool0"))
