"""E-stop prediction: energy and momentum invariants, stick/slip decisions, abrupt locks, accuracy against a fine
reference, the published UR5 stopping figures, MuJoCo as an independent peer, and input errors."""

import math
import os

import numpy as np
import pinocchio as pin
import pytest

from core_testdata import REPO, UR5
from mujoco_stop import mujoco_full_stop, mujoco_model_from_urdf, mujoco_sliding_phase
from vtm_dynamics.core.switching import transitions as switching
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.calibration import single_joint_stop
from vtm_dynamics.core.estop.calibration import TestMotion as StopTestMotion
from vtm_dynamics.core.robot import catalogue
from vtm_dynamics.core.robot.constraints import JointLock
from vtm_dynamics.core.estop import (
    CategoryOne, LockEvent, StopInputError, StopSettings, energy_series, predict_stop,
)
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
from vtm_dynamics.core.estop.payload import with_payload

# engine invariants and peers with a Coulomb + viscous brake set (the extended terms: test_brake_terms.py)
UR5_BRAKES = os.path.join(REPO, "test", "core", "estop", "data", "ur5_coulomb_viscous_brakes.yaml")
PLANAR_BRAKES = os.path.join(REPO, "config", "planar_3r_brakes.yaml")
Q_MOVING = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
V_MOVING = np.array([2.0, -2.5, 2.8, 1.5, -2.0, 3.0])


@pytest.fixture(scope="module")
def ur5_brakes(ur5):
    return brakes_from_config(ur5, UR5_BRAKES)


@pytest.fixture(scope="module")
def ur5_stop(ur5, ur5_brakes):
    return predict_stop(ur5, ur5_brakes, Q_MOVING, V_MOVING, tcp_frame="tool0")


def kkt_accelerations(robot, q, v, locked, tau):
    """Independent constrained dynamics: [[M, J^T], [J, 0]] (a, -lambda) = (tau - h, 0) with unit rows J."""
    M = robot.mass_matrix(q)
    h = robot.bias_forces(q, v)
    L = np.flatnonzero(locked)
    J = np.eye(robot.nv)[L]
    K = np.block([[M, J.T], [J, np.zeros((len(L), len(L)))]])
    sol = np.linalg.solve(K, np.concatenate([tau - h, np.zeros(len(L))]))
    return sol[: robot.nv], -sol[robot.nv:]


# ------------------------------------------------------------------------------------------------ energy
def test_energy_drops_by_exactly_the_brake_work_and_never_rises(ur5, ur5_stop):
    T, V = energy_series(ur5, ur5_stop)
    E = T + V
    W = ur5_stop.brake_work
    # E(t) - E(0) = W(t) at every sample (no abrupt locks here): at the default 5 ms step within 5e-5 J of the
    # 64 J the robot starts with (the viscous parts make the first braking milliseconds stiff) ...
    assert np.max(np.abs(E - E[0] - W)) < 5e-5
    # ... and converging with the step (5th order): 2.5 ms gives < 1e-6 J
    fine = predict_stop(ur5, brakes_from_config(ur5, UR5_BRAKES), Q_MOVING, V_MOVING, settings=StopSettings(step=0.0025))
    Tf, Vf = energy_series(ur5, fine)
    assert np.max(np.abs(Tf + Vf - (Tf + Vf)[0] - fine.brake_work)) < 1e-6
    assert np.all(np.diff(W) <= 1e-12)  # brake work only dissipates
    assert np.all(np.diff(E) <= 5e-5)
    before = ur5_stop.t < 0.01  # drives off, brakes not yet engaged: energy conserved
    assert np.ptp(E[before]) < 1e-8
    assert ur5_stop.brake_energy == pytest.approx(E[0] - E[-1], abs=5e-5)
    assert ur5_stop.impulse_energy == 0.0


def test_every_joint_comes_to_rest_and_stays_exactly_at_its_lock_angle(ur5_stop):
    assert ur5_stop.stopped
    for i, ts in enumerate(ur5_stop.joint_stop_times):
        after = ur5_stop.t >= ts
        assert np.all(ur5_stop.q[after, i] == ur5_stop.q[after][0, i])
        assert np.all(ur5_stop.v[after, i] == 0.0)
    assert ur5_stop.stop_time == pytest.approx(np.max(ur5_stop.joint_stop_times))
    np.testing.assert_allclose(ur5_stop.stopping_angles, ur5_stop.q_final - Q_MOVING, atol=1e-15)


def test_stick_events_hold_within_capacity_and_rest_loads_match_rnea(ur5, ur5_brakes, ur5_stop):
    for ev in ur5_stop.events:
        held = ~np.isnan(ev.holding_torques)
        assert np.all(np.abs(ev.holding_torques[held]) <= ur5_brakes.holding_torque[held] * (1 + 1e-12))
    # at rest the brakes hold the gravity load; RNEA gives the joint torques and the transmitted wrenches
    tau = pin.rnea(ur5.model, ur5.data, ur5_stop.q_final, np.zeros(6), np.zeros(6))
    np.testing.assert_allclose(ur5_stop.holding_torques, tau, atol=1e-9)
    np.testing.assert_allclose(ur5_stop.tau_brake[-1], tau, atol=1e-9)
    f = np.array([ur5.data.f[i].vector for i in range(1, ur5.model.njoints)])
    np.testing.assert_allclose(ur5_stop.rest_wrenches, f, atol=1e-9)
    # the axial moment each revolute joint transmits is its joint torque
    for i, j in enumerate(ur5.joints):
        axis = ur5.model.joints[j.joint_id].shortname()[-1]
        k = "XYZ".index(axis)
        assert ur5_stop.rest_wrenches[i][3 + k] == pytest.approx(tau[i], abs=1e-9)


def test_tcp_distances(ur5, ur5_stop):
    p0 = ur5.frame_placement(Q_MOVING, "tool0").translation
    p1 = ur5.frame_placement(ur5_stop.q_final, "tool0").translation
    assert ur5_stop.tcp_straight_distance == pytest.approx(np.linalg.norm(p1 - p0), abs=1e-12)
    assert ur5_stop.tcp_straight_distance <= ur5_stop.tcp_path_length
    assert ur5_stop.tcp_path_length < 1.5 * ur5_stop.tcp_straight_distance + 1e-3


# ------------------------------------------------------------------------------------------------ stick / slip
def planar_brakes(robot, **joints):
    return brakes_from_config(robot, {"brakes": {"joints": joints}})


def test_joint_whose_needed_holding_torque_exceeds_its_capacity_does_not_lock(planar_3r):
    q0, v0 = np.array([np.pi / 2, 0.0, 0.0]), np.zeros(3)  # stretched horizontally, at rest
    strong = {"sliding_torque": 9000.0, "holding_torque": 9000.0}
    held = predict_stop(planar_3r, planar_brakes(planar_3r, joint1=strong, joint2=strong, joint3=strong), q0, v0)
    assert held.stopped and held.stop_time == 0.0
    np.testing.assert_array_equal(held.q_final, q0)
    need = planar_3r.gravity_torques(q0)[0]  # 108 * 9.81 * (0.5 + 1.5 + 2.5) = 4767.7 N m
    assert need == pytest.approx(4767.66, abs=0.01)
    weak = {"sliding_torque": 3000.0, "holding_torque": 4000.0}
    slid = predict_stop(planar_3r, planar_brakes(planar_3r, joint1=weak, joint2=strong, joint3=strong), q0, v0)
    first = slid.events[0]
    assert first.time == 0.0 and "joint1" not in [n for n, lk in zip(slid.joint_names, slid.locked[1]) if lk]
    assert not slid.locked[1][0]
    # whenever joint 1 is held, the torque it needs is within its capacity
    held1 = slid.locked[:, 0]
    assert np.all(np.abs(slid.tau_brake[held1, 0]) <= 4000.0 * (1 + 1e-12))
    assert slid.stopped and slid.q_final[0] < q0[0] - 0.1  # it slid down before it could stick
    assert abs(planar_3r.gravity_torques(slid.q_final)[0]) <= 4000.0


def test_joint_decision_at_rest_is_consistent_with_independent_constrained_dynamics(planar_3r):
    q0, v0 = np.array([np.pi / 6, np.pi / 6, np.pi / 6]), np.zeros(3)
    loads = np.abs(planar_3r.gravity_torques(q0))
    # joint 2 cannot hold its static load, joints 1 and 3 can; all three are decided at t = 0 together
    brakes = planar_brakes(
        planar_3r,
        joint1={"sliding_torque": 1.1 * loads[0], "holding_torque": 1.2 * loads[0]},
        joint2={"sliding_torque": 0.5 * loads[1], "holding_torque": 0.6 * loads[1]},
        joint3={"sliding_torque": 2.0 * loads[2], "holding_torque": 3.0 * loads[2]},
    )
    p = predict_stop(planar_3r, brakes, q0, v0, settings=StopSettings(t_max=2.0))
    locked = p.locked[1]
    slipping = ~locked
    assert slipping[1]
    d = np.sign(-planar_3r.gravity_torques(q0))  # direction the unheld joints yield
    tau = np.where(slipping, -d * brakes.sliding_torque, 0.0)
    a, lam = kkt_accelerations(planar_3r, q0, v0, locked, tau)
    assert np.all(np.abs(lam) <= brakes.holding_torque[locked] * (1 + 1e-12))
    assert np.all(d[slipping] * a[slipping] > 0)
    np.testing.assert_allclose(p.tau_brake[1][locked], lam, rtol=1e-9)


def test_held_joint_releases_when_its_needed_torque_reaches_capacity(planar_3r):
    q0, v0 = np.array([np.pi / 2, 0.3, 0.2]), np.zeros(3)
    brakes = planar_brakes(planar_3r, joint2={"sliding_torque": 500.0, "holding_torque": 600.0},
                           joint3={"sliding_torque": 1e5, "holding_torque": 1e5})
    p = predict_stop(planar_3r, brakes, q0, v0, settings=StopSettings(t_max=1.0))
    rel = [e for e in p.events if e.kind == "release"]
    assert rel and rel[0].joints == ("joint2",)
    e = rel[0]
    _, lam = kkt_accelerations(planar_3r, e.q, e.v_minus, np.array([False, True, True]), np.zeros(3))
    assert abs(lam[0]) == pytest.approx(600.0, rel=1e-6)  # released exactly at capacity
    k = int(np.searchsorted(p.t, e.time, side="right"))
    assert not p.locked[k][1] and p.locked[k][2]


# ------------------------------------------------------------------------------------------------ abrupt locks
def test_abrupt_lock_conserves_the_momentum_of_the_free_joints(ur5, ur5_brakes):
    lock = LockEvent(0.005, "shoulder_lift_joint")
    p = predict_stop(ur5, ur5_brakes, Q_MOVING, V_MOVING, lock_events=[lock])
    ev = [e for e in p.events if e.kind == "lock"][0]
    assert ev.time == 0.005 and ev.joints == ("shoulder_lift_joint",)
    M = ur5.mass_matrix(ev.q)
    free = np.ones(6, dtype=bool)
    free[1] = False
    np.testing.assert_allclose((M @ ev.v_plus)[free], (M @ ev.v_minus)[free], rtol=1e-9, atol=1e-12)
    assert ev.v_plus[1] == 0.0
    assert ev.energy_loss == pytest.approx(0.5 * ev.v_minus @ M @ ev.v_minus - 0.5 * ev.v_plus @ M @ ev.v_plus)
    assert ev.energy_loss > 0
    np.testing.assert_allclose(ev.impulses, -(M @ ev.dv)[[1]], rtol=1e-12)
    assert p.impulse_energy == pytest.approx(ev.energy_loss)
    T, V = energy_series(ur5, p)
    E = T + V
    # energy balance through the jump: E(t) - E(0) = brake work - jump losses
    assert np.max(np.abs(E - E[0] - p.brake_work + p.impulse_loss)) < 5e-5
    k = int(np.flatnonzero(p.t == 0.005)[-1])
    assert p.impulse_loss[k] == pytest.approx(ev.energy_loss) and p.impulse_loss[k - 2] == 0.0
    # the locked joint never moves again
    after = p.t >= 0.005
    assert np.all(p.q[after, 1] == ev.q[1])


@pytest.mark.parametrize("method", ["kkt", "redundant", "minimal"])
def test_closed_form_jump_agrees_with_the_core_switching_solvers(ur5, ur5_brakes, method):
    locks = [LockEvent(0.004, "elbow_joint"), LockEvent(0.007, ["shoulder_pan_joint", "wrist_1_joint"])]
    ref = predict_stop(ur5, ur5_brakes, Q_MOVING, V_MOVING, lock_events=locks)
    other = predict_stop(ur5, ur5_brakes, Q_MOVING, V_MOVING, lock_events=locks,
                         settings=StopSettings(jump_method=method))
    ja = [e for e in ref.events if e.kind == "lock"]
    jb = [e for e in other.events if e.kind == "lock"]
    assert len(ja) == 2
    for a, b in zip(ja, jb):
        np.testing.assert_allclose(a.v_plus, b.v_plus, atol=1e-10)
    # and with the public activation API on the first event's state
    e = ja[0]
    res, _ = switching.solve_activation(ur5, e.q, e.v_minus, None, JointLock("elbow_joint"), method=method)
    np.testing.assert_allclose(res.v_plus, e.v_plus, atol=1e-10)


def test_paper_sec6_lock_sequence_keeps_free_momenta_and_exact_lock_angles(planar_3r):
    """Müller 2026, Sec. 6: 3R pendulum from rest at the paper's pose (bench/scenarios.py), joint 2 locked at 0.8 s,
    joint 3 at 1.3 s (no brakes)."""
    from scenarios import Q0_3R

    brakes = planar_brakes(planar_3r, joint1={"sliding_torque": 0.0})
    q0 = Q0_3R
    p = predict_stop(planar_3r, brakes, q0, np.zeros(3), lock_events=[LockEvent(0.8, "joint2"), LockEvent(1.3, "joint3")],
                     settings=StopSettings(t_max=2.0, step=0.005))
    locks = [e for e in p.events if e.kind == "lock"]
    assert [e.time for e in locks] == pytest.approx([0.8, 1.3], abs=1e-12)
    for e, Lk in zip(locks, ([1], [1, 2])):
        M = planar_3r.mass_matrix(e.q)
        F = [i for i in range(3) if i not in Lk]
        np.testing.assert_allclose((M @ e.v_plus)[F], (M @ e.v_minus)[F], rtol=1e-9)
    T, V = energy_series(planar_3r, p)
    E = T + V
    seg = p.t < 0.8
    # no brakes: energy conserved between events up to the integration error (step 5 ms, bars falling from 90 deg)
    assert np.ptp(E[seg]) < 1e-8 * np.max(T[seg])
    assert not p.stopped  # joint 1 has no brake: the pendulum keeps swinging
    after = p.t >= 0.8
    assert np.all(p.q[after, 1] == locks[0].q[1])


def test_pawl_locks_abruptly_at_its_delay(planar_3r):
    brakes = brakes_from_config(planar_3r, {"brakes": {"joints": {
        "joint1": {"sliding_torque": 6000.0, "holding_torque": 8000.0},
        "joint2": {"sliding_torque": 100.0, "pawl_delay": 0.05},
        "joint3": {"sliding_torque": 1200.0, "holding_torque": 1600.0}}}})
    p = predict_stop(planar_3r, brakes, np.array([0.2, 0.1, 0.0]), np.array([0.5, 1.0, -0.5]))
    lock = [e for e in p.events if e.kind == "lock"]
    assert lock and lock[0].time == pytest.approx(0.05) and lock[0].joints == ("joint2",)
    assert lock[0].energy_loss > 0 and lock[0].impulse_wrenches is not None


# ------------------------------------------------------------------------------------------------ accuracy
def test_default_integration_is_within_1e6_of_a_fine_reference(ur5, ur5_brakes, ur5_stop):
    fine = predict_stop(ur5, ur5_brakes, Q_MOVING, V_MOVING, settings=StopSettings(method="rk4", step=1e-4))
    assert [e.kind for e in fine.events] == [e.kind for e in ur5_stop.events]
    t_err = max(abs(a.time - b.time) for a, b in zip(fine.events, ur5_stop.events))
    assert t_err <= 1e-6
    assert np.max(np.abs(fine.q_final - ur5_stop.q_final)) <= 1e-6
    assert np.max(np.abs(fine.joint_stop_times - ur5_stop.joint_stop_times)) <= 1e-6


# ------------------------------------------------------------------------------------------------ published data
@pytest.fixture(scope="module")
def ur5_payload():
    return with_payload(RobotModel.from_urdf_file(example_robot_urdf(UR5)), 5.0, "tool0")


@pytest.mark.parametrize("figure", catalogue.UR5.published_stops, ids=lambda f: f.joint)
def test_ur5_published_category0_figures_are_reproduced(ur5_payload, figure):
    """Universal Robots CB3 manual, Appendix A (cat. 0, 100 % speed/extension, 5 kg), under the 1-DOF calibration's
    test motion: the joint alone at pi rad/s from the stretched pose, the others held (the Coulomb + viscous set;
    the true category-0 defaults with every joint braked: test_default_brakes.py)."""
    robot = ur5_payload
    brakes = brakes_from_config(robot, UR5_BRAKES)
    i = robot.joint(figure.joint).idx_v
    v = np.zeros(6)
    v[i] = np.pi
    others = [n for n in robot.joint_names if n != figure.joint]
    p = predict_stop(robot, brakes, np.zeros(6), v, lock_events=[LockEvent(0.0, others)])
    assert p.stopped
    assert abs(p.stopping_angles[i]) == pytest.approx(figure.angle, abs=2e-3)
    assert p.joint_stop_times[i] == pytest.approx(figure.time, abs=1e-3)
    # the independent 1-DOF model (scipy, the calibration's model) with the same brake gives the same stop
    ang, tim = single_joint_stop(robot, figure.joint, StopTestMotion((0.0,) * 6, np.pi, 0.010),
                                 brakes.sliding_torque[i], brakes.viscous[i])
    assert abs(p.stopping_angles[i]) == pytest.approx(ang, abs=1e-6)
    assert p.joint_stop_times[i] == pytest.approx(tim, abs=1e-6)


# ------------------------------------------------------------------------------------------------ MuJoCo
@pytest.fixture(scope="module")
def ur5_mujoco():
    return mujoco_model_from_urdf(example_robot_urdf(UR5))


def test_sliding_phase_matches_mujoco(ur5, ur5_brakes, ur5_stop, ur5_mujoco):
    first_stick = min(e.time for e in ur5_stop.events if e.kind == "stick")
    ts, qm, vm = mujoco_sliding_phase(ur5_mujoco, ur5_brakes, Q_MOVING, V_MOVING, t_end=first_stick, dt=1e-4)
    ours = ur5_stop.t <= first_stick - 1e-4
    k = np.rint(ur5_stop.t[ours] / 1e-4).astype(int)
    on_grid = np.abs(ur5_stop.t[ours] - k * 1e-4) < 1e-12
    assert on_grid.sum() >= 3
    dq = np.abs(ur5_stop.q[ours][on_grid] - qm[k[on_grid]])
    dv = np.abs(ur5_stop.v[ours][on_grid] - vm[k[on_grid]])
    assert dq.max() < 1e-6 and dv.max() < 1e-5


def test_whole_stop_against_mujoco_frictionloss(ur5, ur5_brakes, ur5_mujoco):
    """MuJoCo's dry friction (``frictionloss``) holds up to the sliding torque: with holding = sliding our brakes
    describe the same law. MuJoCo's friction constraint stays slightly soft, so the rest poses agree to 1e-3 rad
    and the joints' stop times to 1 ms (its step is 0.2 ms)."""
    cfg = ur5_brakes.as_config()
    for entry in cfg["brakes"]["joints"].values():
        entry["holding_torque"] = entry["sliding_torque"]
    brakes = brakes_from_config(ur5, cfg)
    p = predict_stop(ur5, brakes, Q_MOVING, V_MOVING)
    ts, qm, vm = mujoco_full_stop(ur5_mujoco, brakes, Q_MOVING, V_MOVING, t_end=p.stop_time + 0.2)
    assert np.abs(qm[-1] - p.q_final).max() < 1e-3
    mj_stop = np.array([ts[np.flatnonzero(np.abs(vm[:, i]) > 1e-3)[-1]] for i in range(6)])
    assert np.abs(mj_stop - p.joint_stop_times).max() < 1e-3


# ------------------------------------------------------------------------------------------------ category 1
def test_category1_ramp_is_a_straight_joint_line_with_analytic_stopping_angles(ur5, ur5_brakes):
    p = predict_stop(ur5, ur5_brakes, Q_MOVING, V_MOVING, category=1, category_one=CategoryOne(deceleration=10.0))
    T = np.max(np.abs(V_MOVING)) / 10.0
    assert p.power_off_time == pytest.approx(T)
    np.testing.assert_allclose(p.stopping_angles, V_MOVING * T / 2, atol=1e-12)
    assert p.stopped and p.stop_time == pytest.approx(T)
    k = 3
    tau = pin.rnea(ur5.model, ur5.data, p.q[k], p.v[k], -V_MOVING / T)
    np.testing.assert_allclose(p.tau_drive[k], tau, atol=1e-9)


def test_category1_cut_short_continues_as_a_braked_stop(ur5, ur5_brakes):
    p = predict_stop(ur5, ur5_brakes, Q_MOVING, V_MOVING, category=1,
                     category_one=CategoryOne(deceleration=10.0, max_duration=0.1))
    assert p.power_off_time == pytest.approx(0.1)
    eng = [e for e in p.events if e.kind == "engage"][0]
    assert eng.time == pytest.approx(0.11)  # brakes engage their delay after power-off
    assert p.stopped and p.stop_time > 0.11


# ------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "q, v, field",
    [
        (np.array([0, float("nan"), 0, 0, 0, 0]), V_MOVING, "q[1]"),
        (Q_MOVING, np.array([0, 0, 0, float("inf"), 0, 0]), "v[3]"),
        (np.array([0, 0, 4.0, 0, 0, 0]), V_MOVING, "q[elbow_joint]"),
        (Q_MOVING, np.array([0, 0, 0, 0, 9.0, 0]), "v[wrist_2_joint]"),
        (Q_MOVING[:5], V_MOVING, "q"),
    ],
)
def test_bad_state_gives_one_line_naming_the_field(ur5, ur5_brakes, q, v, field):
    with pytest.raises(StopInputError) as err:
        predict_stop(ur5, ur5_brakes, q, v)
    assert str(err.value).startswith(field + ":") and "\n" not in str(err.value)


@pytest.mark.parametrize("engine", ["compiled", "python"])
def test_a_link_without_mass_at_the_end_of_the_chain_is_refused_in_one_line(engine):
    """The planar 3R with its third bar given zero mass and inertia: joint 3 moves nothing, M(q) is singular
    (its eigenvalues at q = 0 are 0, 7.3 and 318 kg m^2). The prediction is refused naming joint3, before any
    step; the compiled engine used to stop with a RuntimeError trace and the Python engine with NaN angles."""
    with open(os.path.join(REPO, "urdf", "planar_3r.urdf"), encoding="utf-8") as fh:
        text = fh.read()
    start = text.index('<link name="link3">')
    end = text.index("</link>", start)
    text = (text[:start] + '<link name="link3"><inertial><mass value="0"/><inertia ixx="0" ixy="0" ixz="0" iyy="0" '
            'iyz="0" izz="0"/></inertial>' + text[end:])
    robot = RobotModel.from_urdf(text, gravity=(0.0, 0.0, -9.81))
    assert np.min(np.linalg.eigvalsh(robot.mass_matrix(np.zeros(3)))) < 1e-9  # the premise: M is singular
    brake = {"sliding_torque": 50.0, "holding_torque": 60.0, "engage_delay": 0.05}
    brakes = brakes_from_config(robot, {"brakes": {"joints": {n: brake for n in robot.joint_names}}})
    with pytest.raises(StopInputError, match=r"^urdf: .*'joint3'") as err:
        predict_stop(robot, brakes, np.array([1.0, 0.3, -0.2]), np.array([1.0, -2.0, 1.5]),
                     settings=StopSettings(engine=engine))
    assert "\n" not in str(err.value)


def test_other_bad_inputs(ur5, ur5_brakes, planar_3r):
    with pytest.raises(StopInputError, match=r"^category:"):
        predict_stop(ur5, ur5_brakes, Q_MOVING, V_MOVING, category=2)
    with pytest.raises(StopInputError, match=r"^lock_events.joints:"):
        predict_stop(ur5, ur5_brakes, Q_MOVING, V_MOVING, lock_events=[LockEvent(0.1, "nope")])
    with pytest.raises(StopInputError, match=r"^brakes:"):
        predict_stop(planar_3r, ur5_brakes, np.zeros(3), np.zeros(3))
