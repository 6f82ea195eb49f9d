"""robot_sim's fixed-step braked plant agrees with the event-located core prediction and converges to it with dt.

The two are independent formulations of the same category-0 stop: the core locates every stick/slip event and
integrates between events with RK4; the plant steps with semi-implicit Euler and resolves events to its step.
"""

import os

import numpy as np
import pytest

from core_testdata import REPO
from vtm_dynamics.core.estop import StopSettings, predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.braked_plant import BrakedPlant, PlantError, demo_motion
from vtm_dynamics.core.robot.catalogue import PLANAR_3R, UR5
from vtm_dynamics.core.robot.model import RobotModel

# the brakes and the moving state of the node tests (test/nodes/node_harness.py), which run this plant in robot_sim
TEST_BRAKES = os.path.join(REPO, "test", "nodes", "data", "ur5_test_brakes.yaml")
UR5_Q = np.array([0.1, -1.2, 1.4, -1.0, -1.57, 0.2])
UR5_V = np.array([1.2, -0.8, 0.9, 0.8, -0.7, 1.2])


@pytest.fixture(scope="module")
def ur5():
    return RobotModel.from_urdf_file(UR5.urdf_path())


@pytest.fixture(scope="module")
def planar():
    return RobotModel.from_urdf_file(PLANAR_3R.urdf_path())


def _rest(robot, brakes, q, v, dt):
    plant = BrakedPlant(robot, brakes, dt=dt)
    plant.start(q, v)
    plant.advance(5.0)
    assert plant.at_rest
    return plant


PAWL = {"brakes": {"defaults": {"engage_delay": 0.02}, "joints": {
    "shoulder_pan_joint": {"sliding_torque": 60.0, "holding_torque": 90.0},
    "shoulder_lift_joint": {"sliding_torque": 110.0, "holding_torque": 150.0},
    "elbow_joint": {"sliding_torque": 45.0, "holding_torque": 70.0},
    "wrist_1_joint": {"sliding_torque": 6.0, "holding_torque": 9.0, "pawl_delay": 0.03},
    "wrist_2_joint": {"sliding_torque": 6.0, "holding_torque": 9.0, "pawl_delay": 0.03},
    "wrist_3_joint": {"sliding_torque": 4.0, "holding_torque": 6.0}}}}


@pytest.mark.parametrize("config", [TEST_BRAKES, PAWL], ids=["sliding-brakes", "with-pawls"])
def test_plant_rest_pose_converges_to_the_event_located_prediction(ur5, config):
    brakes = brakes_from_config(ur5, config)
    pred = predict_stop(ur5, brakes, UR5_Q, UR5_V, tcp_frame="tool0", settings=StopSettings(step=1e-3, t_max=5.0))
    assert pred.stopped
    errors = []
    for dt in (1e-3, 2e-4, 4e-5):
        plant = _rest(ur5, brakes, UR5_Q, UR5_V, dt)
        errors.append(np.max(np.abs(plant.q - pred.q_final)))
        assert abs(plant.rest_time - pred.stop_time) < 2 * dt + 1e-4
    assert errors[0] > errors[1] > errors[2], errors  # first order in dt
    assert errors[2] < 2e-4, errors
    path, straight = plant.tcp_travel("tool0")  # the plant's own TCP travel agrees with the prediction's
    assert path == pytest.approx(pred.tcp_path_length, rel=1e-2)
    assert straight == pytest.approx(pred.tcp_straight_distance, rel=1e-2)
    if config is PAWL:
        assert [e.kind for e in plant.events].count("pawl") == 1
        assert any(e.kind == "lock" for e in pred.events)


def test_a_joint_whose_needed_holding_torque_exceeds_capacity_slips(planar):
    q = np.array([0.6, 0.0, 0.0])  # static gravity torque at joint 1: far above 1000 N m
    weak = {"brakes": {"defaults": {"engage_delay": 0.0}, "joints": {
        "joint1": {"sliding_torque": 300.0, "holding_torque": 400.0},
        "joint2": {"sliding_torque": 3000.0, "holding_torque": 4000.0},
        "joint3": {"sliding_torque": 3000.0, "holding_torque": 4000.0}}}}
    plant = BrakedPlant(planar, brakes_from_config(planar, weak), dt=1e-4)
    plant.start(q, np.zeros(3))
    plant.advance(0.05)
    assert [e.kind for e in plant.events][:2] == ["engage", "slip"] and plant.events[1].joints == ("joint1",)
    assert plant.q[0] < q[0] - 1e-3, "joint 1 falls towards the hanging position"
    strong = {"brakes": {"joints": {n: {"sliding_torque": 6000.0, "holding_torque": 8000.0}
                                    for n in ("joint1", "joint2", "joint3")}}}
    plant = BrakedPlant(planar, brakes_from_config(planar, strong), dt=1e-4)
    plant.start(q, np.zeros(3))
    plant.advance(0.05)
    assert plant.at_rest and np.array_equal(plant.q, q)


def test_demo_motion_velocity_is_the_derivative_of_its_position():
    m = demo_motion(3, [0.1, 0.2, 0.3], [0.5, 0.4, 0.3], 0.7, [0.0, 1.0, 2.0])
    t, h = 0.37, 1e-6
    q0, v0, a0 = m.state(t)
    assert np.allclose((m.state(t + h)[0] - m.state(t - h)[0]) / (2 * h), v0, atol=1e-7)
    assert np.allclose((m.state(t + h)[1] - m.state(t - h)[1]) / (2 * h), a0, atol=1e-6)
    with pytest.raises(PlantError, match="motion_amplitude: expected 3 finite numbers"):
        demo_motion(3, [], [1.0, float("nan"), 1.0], 1.0, [])


# ------------------------------------------------------------------ a continuous joint
def _own_reference(model, brakes: dict, theta0, v0, t_end=2.0):
    """A category-0 stop written here from docs/estop.md's brake model, independent of the plant and the engine:
    SciPy DOP853 on one ANGLE per joint; Pinocchio gets (cos, sin) for continuous joints (built here). Each brake:
    nothing before engage_delay, then -(sign(v) sliding + viscous v); a joint whose velocity reaches zero after
    that is held (a_i = 0) and stays held. Returns the rest angles and the largest |holding torque| / capacity."""
    import pinocchio as pin
    from scipy.integrate import solve_ivp

    data, nv = model.createData(), model.nv
    joints = [model.joints[j] for j in range(1, model.njoints)]
    names = [model.names[j] for j in range(1, model.njoints)]
    delay = np.array([brakes[n].get("engage_delay", 0.02) for n in names])
    slide = np.array([brakes[n]["sliding_torque"] for n in names])
    hold = np.array([brakes[n]["holding_torque"] for n in names])
    visc = np.array([brakes[n].get("viscous", 0.0) for n in names])

    def config(theta):
        q = np.zeros(model.nq)
        for jm, x in zip(joints, theta):
            if jm.nq == 2:
                q[jm.idx_q], q[jm.idx_q + 1] = np.cos(x), np.sin(x)
            else:
                q[jm.idx_q] = x
        return q

    def accel(t, theta, v, held, sign):
        q = config(theta)
        M = pin.crba(model, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        h = pin.nonLinearEffects(model, data, q, v)
        tau = np.where((t >= delay) & ~held, -(sign * slide + visc * v), 0.0)
        free = ~held
        a = np.zeros(nv)
        a[free] = np.linalg.solve(M[np.ix_(free, free)], (tau - h)[free])
        return a, np.abs(M[held] @ a + h[held])

    t, theta, v = 0.0, np.array(theta0, float), np.array(v0, float)
    held, sign, ratio = np.zeros(nv, bool), np.sign(v0), 0.0
    while not held.all() and t < t_end:
        t_next = min([d for d in delay if d > t + 1e-12] + [t_end])
        watched = [i for i in range(nv) if not held[i] and t >= delay[i]]

        def event(i):
            def g(tt, y):
                return y[nv + i]
            g.terminal, g.direction = True, -sign[i]
            return g

        sol = solve_ivp(lambda tt, y: np.concatenate([y[nv:], accel(tt, y[:nv], y[nv:], held, sign)[0]]),
                        (t, t_next), np.concatenate([theta, v]), method="DOP853", rtol=1e-11, atol=1e-12,
                        events=[event(i) for i in watched], max_step=1e-3)
        t, theta, v = float(sol.t[-1]), sol.y[:nv, -1].copy(), sol.y[nv:, -1].copy()
        for k, i in enumerate(watched):
            if sol.t_events[k].size:
                v[i], held[i] = 0.0, True
        if held.any():
            ratio = max(ratio, float(np.max(accel(t, theta, v, held, sign)[1] / hold[held])))
    return theta, ratio


def test_a_continuous_wrist_is_braked_through_plus_pi_and_agrees_with_an_independent_integration():
    """The UR5 with wrist 3 declared continuous, at 3.1 rad turning at +3 rad/s: it comes to rest past +pi, given
    unwrapped (robot_sim publishes these positions). Before, the plant refused such a model, and robot_sim in
    vtm-estop-demo logged that error 500 times a second, re-fired the E-stop on every tick and never came to rest."""
    import yaml

    from test.core.joint_type_models import ur5_text, with_continuous

    robot = RobotModel.from_urdf(with_continuous(ur5_text(), "wrist_3_joint"))
    assert robot.nq == 7 and robot.nv == 6
    with open(TEST_BRAKES, encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    q0 = np.array([0.1, -1.2, 1.4, -1.0, -1.57, 3.1])
    v0 = np.array([1.2, -0.8, 0.9, 0.8, -0.7, 3.0])
    plant = _rest(robot, brakes_from_config(robot, config), q0, v0, dt=1e-4)
    joints = {n: {**config["brakes"]["defaults"], **b} for n, b in config["brakes"]["joints"].items()}
    expected, ratio = _own_reference(robot.model, joints, q0, v0)
    assert ratio < 1.0  # every brake holds where its joint came to rest: the reference's stick rule applies
    assert plant.q.shape == (6,) and plant.q[5] > np.pi + 0.03  # 3.18 rad, not wrapped to -3.10
    # the plant resolves rest to its step: about v dt / 2 = 1.5e-4 rad
    np.testing.assert_allclose(plant.q, expected, atol=1e-3)
