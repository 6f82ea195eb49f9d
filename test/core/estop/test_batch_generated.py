"""A batch whose M and h come from generated code gives the stops of the Pinocchio path (stop time, rest angles, TCP
distances within 1e-10) for payloads on any body and brake factors, and uses Pinocchio, saying why, for a model the
generator does not cover."""

import os

import numpy as np
import pytest

from core_testdata import REPO
from joint_type_models import ur5_text, with_continuous
from vtm_dynamics.core.estop.batch import StopBatch, predict_stops
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.payload import with_payload
from vtm_dynamics.core.estop import generated_dynamics as gd
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
