"""The extended brake and drive model: Stribeck friction, brake torque rise, reflected rotor inertia (armature).

Checked against an independent 1-DOF formulation (scipy's solve_ivp with its own event location), against the
independent fixed-step plant (``braked_plant``) on the 6-DOF UR5, by the energy balance with the rotors' energy,
and: configurations without the new fields give the predictions of the starting code (figures recorded from it
before the extension, compared within the spread of a rounding-level change).
"""

import math
import os

import numpy as np
import pytest
import scipy.integrate

from core_testdata import REPO
from vtm_dynamics.core.estop import LockEvent, StopSettings, energy_series, predict_stop
from vtm_dynamics.core.estop.braked_plant import BrakedPlant
from vtm_dynamics.core.estop.brakes import BrakeConfigError, brakes_from_config
from vtm_dynamics.core.robot.model import RobotModel

UR5_BRAKES = os.path.join(REPO, "config", "ur5_brakes.yaml")
Q_MOVING = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
V_MOVING = np.array([2.0, -2.5, 2.8, 1.5, -2.0, 3.0])

# A pendulum about a horizontal axis (gravity -z, axis y), point-like bob: m = 2 kg at l = 0.5 m, plus a small
# rotational inertia. I_link = m l^2 + Iyy = 0.5 + 0.01 kg m^2; gravity torque about the axis g(q) = m g l sin(q)
# with q measured from hanging straight down... here the link points along +x at q = 0, so g(q) = m g l cos(q).
PENDULUM = """<robot name="pendulum">
  <link name="base"/>
  <link name="arm">
    <inertial><origin xyz="0.5 0 0"/><mass value="2.0"/>
      <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 -1 0"/>
    <limit lower="-10" upper="10" effort="100" velocity="10"/></joint>
</robot>"""
M_BOB, L_BOB, I_LINK, G = 2.0, 0.5, 2.0 * 0.25 + 0.01, 9.81


@pytest.fixture(scope="module")
def pendulum():
    return RobotModel.from_urdf(PENDULUM, gravity=(0.0, 0.0, -9.81))


def one(**brake):
    return {"brakes": {"joints": {"j": brake}}}


def reference_stop(q0, v0, *, sliding, breakaway, vs, viscous, delay, rise, armature):
    """Independent 1-DOF stop: (I + armature) q'' = -g(q) + tau_b(t, q'), the brake as in the brakes module,
    integrated by scipy (LSODA-free RK45 at tight tolerances) until the velocity reaches zero after engagement."""
    inertia = I_LINK + armature

    def gravity(q):  # torque of gravity about the joint axis (the link points along +x at q = 0, axis -y)
        return -M_BOB * G * L_BOB * math.cos(q)

    def rise_factor(t):
        if t < delay:
            return 0.0
        return 1.0 if rise == 0 else min(1.0, (t - delay) / rise)

    def rhs(t, y, s):
        q, v = y
        mu = sliding + (breakaway - sliding) * math.exp(-(v / vs) ** 2) if vs else sliding
        tau = -rise_factor(t) * (s * mu + viscous * v)
        return [v, (gravity(q) + tau) / inertia]

    # segments split at the engagement and the end of the rise (the kinks), as an independent integrator would
    t, y = 0.0, [q0, v0]
    s = math.copysign(1.0, v0)
    for t_end in (delay, delay + rise, 10.0):
        if t_end <= t:
            continue

        def crossing(tt, yy, s=s):
            return yy[1]
        crossing.terminal = True
        crossing.direction = -s
        sol = scipy.integrate.solve_ivp(rhs, (t, t_end), y, args=(s,), events=crossing, rtol=1e-12, atol=1e-13,
                                        method="DOP853")
        if sol.t_events[0].size:
            return float(sol.t_events[0][0]), float(sol.y_events[0][0][0])
        t, y = sol.t[-1], sol.y[:, -1].tolist()
    raise AssertionError("reference: no stop within 10 s")


@pytest.mark.parametrize("terms", [
    dict(sliding=14.0, breakaway=14.0, vs=0.0, viscous=0.0, delay=0.01, rise=0.0, armature=0.0),
    dict(sliding=14.0, breakaway=20.0, vs=0.4, viscous=0.0, delay=0.01, rise=0.0, armature=0.0),
    dict(sliding=14.0, breakaway=14.0, vs=0.0, viscous=1.5, delay=0.01, rise=0.03, armature=0.0),
    dict(sliding=14.0, breakaway=14.0, vs=0.0, viscous=0.0, delay=0.01, rise=0.0, armature=0.7),
    dict(sliding=12.0, breakaway=19.0, vs=0.3, viscous=1.0, delay=0.015, rise=0.02, armature=0.4),
])
def test_single_joint_stop_agrees_with_an_independent_integration(pendulum, terms):
    """Stribeck, rise, armature, each alone and together: stop time and angle within 1e-8 of scipy's."""
    cfg = {"sliding_torque": terms["sliding"], "viscous": terms["viscous"], "engage_delay": terms["delay"],
           "rise_time": terms["rise"], "armature": terms["armature"], "holding_torque": 40.0}
    if terms["vs"]:
        cfg.update(breakaway_torque=terms["breakaway"], stribeck_velocity=terms["vs"])
    brakes = brakes_from_config(pendulum, one(**cfg))
    q0, v0 = 0.2, 3.0  # moving up against gravity and the brake
    t_ref, q_ref = reference_stop(q0, v0, **terms)
    p = predict_stop(pendulum, brakes, [q0], [v0])
    assert p.stopped
    assert p.stop_time == pytest.approx(t_ref, abs=1e-8)
    assert p.q_final[0] == pytest.approx(q_ref, abs=1e-8)


def test_rise_end_is_a_step_boundary(pendulum):
    """The end of the rise is located as a time event: a sample lands exactly on it."""
    brakes = brakes_from_config(pendulum, one(sliding_torque=14.0, holding_torque=40.0, engage_delay=0.01,
                                              rise_time=0.0237))
    p = predict_stop(pendulum, brakes, [0.2], [3.0])
    assert np.any(np.abs(p.t - 0.0337) < 1e-15)


def test_joint_at_rest_slips_while_the_capacity_rises_and_sticks_when_the_brake_can_hold(pendulum):
    """Held horizontal at rest when the power is cut (no delay): the capacity rises from 0 over the rise time, so
    the pendulum starts to fall, then the brake (above the gravity load) stops it; the same with scipy."""
    gravity_load = M_BOB * G * L_BOB  # 9.81 N m at q = 0
    brakes = brakes_from_config(pendulum, one(sliding_torque=2.0 * gravity_load, holding_torque=30.0,
                                              engage_delay=0.0, rise_time=0.05))
    p = predict_stop(pendulum, brakes, [0.0], [0.0])
    kinds = [e.kind for e in p.events]
    assert kinds[0] == "engage" and "stick" in kinds
    assert p.stopped and p.q_final[0] < -1e-4  # it fell a little

    # independent: free fall with the brake torque r(t) * 2 m g l opposing the downward motion
    inertia = I_LINK

    def rhs(t, y):
        r = min(1.0, t / 0.05)
        return [y[1], (-gravity_load * math.cos(y[0]) + r * 2.0 * gravity_load) / inertia]

    def back(t, y):
        return y[1] if t > 1e-9 else -1.0
    back.terminal, back.direction = True, 1
    sol = scipy.integrate.solve_ivp(rhs, (0, 1.0), [0.0, 0.0], events=back, rtol=1e-12, atol=1e-13,
                                    method="DOP853", max_step=0.05)
    assert p.stop_time == pytest.approx(float(sol.t_events[0][0]), abs=1e-7)
    assert p.q_final[0] == pytest.approx(float(sol.y_events[0][0][0]), abs=1e-8)


def test_slip_from_rest_starts_at_the_breakaway_level(pendulum):
    """A joint at rest whose holding demand exceeds its capacity slips with the friction at v = 0, the breakaway
    torque: its first acceleration is (load - breakaway) / I, not (load - sliding) / I."""
    # pendulum horizontal, load 9.81 N m, capacity 9.0 < load, breakaway 8.5, sliding 4.0
    brakes = brakes_from_config(pendulum, one(sliding_torque=4.0, breakaway_torque=8.5, stribeck_velocity=0.2,
                                              holding_torque=9.0))
    p = predict_stop(pendulum, brakes, [0.0], [0.0], settings=StopSettings(t_max=0.05))
    assert p.events[0].kind == "engage" and p.events[0].time == 0.0 and not p.locked[1][0]
    assert p.t[1] == 0.0  # the sample after the engagement decision
    load = M_BOB * G * L_BOB
    assert p.a[1][0] == pytest.approx(-(load - 8.5) / I_LINK, rel=1e-9)


EXTENDED = {"brakes": {"defaults": {"engage_delay": 0.01, "rise_time": 0.012}, "joints": {
    "shoulder_pan_joint": {"sliding_torque": 60.0, "breakaway_torque": 80.0, "stribeck_velocity": 0.3,
                           "viscous": 20.0, "armature": 1.3},
    "shoulder_lift_joint": {"sliding_torque": 130.0, "breakaway_torque": 160.0, "stribeck_velocity": 0.2,
                            "viscous": 20.0, "armature": 1.3},
    "elbow_joint": {"sliding_torque": 60.0, "breakaway_torque": 70.0, "stribeck_velocity": 0.5, "armature": 0.8},
    "wrist_1_joint": {"sliding_torque": 20.0, "armature": 0.1},
    "wrist_2_joint": {"sliding_torque": 20.0, "rise_time": 0.0},
    "wrist_3_joint": {"sliding_torque": 20.0, "breakaway_torque": 25.0, "stribeck_velocity": 0.1}}}}


def test_ur5_with_every_new_term_agrees_with_the_fixed_step_plant_and_converges(ur5):
    """The independent fixed-step plant (its own friction, rise and armature code) converges to the prediction:
    rest pose difference O(dt), shrinking with dt, and the rest times agree to the step."""
    brakes = brakes_from_config(ur5, EXTENDED)
    p = predict_stop(ur5, brakes, Q_MOVING, V_MOVING)
    assert p.stopped
    errors = []
    for dt in (2e-4, 5e-5):
        plant = BrakedPlant(ur5, brakes, dt=dt)
        plant.start(Q_MOVING, V_MOVING)
        plant.advance(3.0)
        assert plant.at_rest
        errors.append(float(np.abs(plant.q - p.q_final).max()))
        assert abs(plant.rest_time - p.stop_time) <= 2 * dt
    assert errors[1] < 0.5 * errors[0]
    assert errors[1] < 1e-4


def test_energy_balance_includes_the_rotors(ur5):
    """Kinetic (links and rotors) + potential energy change equals the brake work at every sample."""
    brakes = brakes_from_config(ur5, EXTENDED)
    p = predict_stop(ur5, brakes, Q_MOVING, V_MOVING)
    T, V = energy_series(ur5, p, brakes.armature)
    assert T[0] == pytest.approx(p.initial_kinetic_energy, rel=1e-12)
    E = T + V
    np.testing.assert_allclose(E - E[0], p.brake_work, atol=1e-6 * T[0])
    without = energy_series(ur5, p)[0]
    assert T[0] - without[0] > 1.0  # the rotors carry a real part of the energy


def test_armature_slows_the_stop_like_a_heavier_link(pendulum):
    """An armature equal to extra inertia of the link about the axis gives the same stop (no gravity change
    needed: same gravity, same brake) as the 1-DOF reference with that inertia."""
    base = dict(sliding=14.0, breakaway=14.0, vs=0.0, viscous=0.0, delay=0.0, rise=0.0)
    t1, q1 = reference_stop(0.2, 3.0, armature=0.0, **base)
    t2, q2 = reference_stop(0.2, 3.0, armature=0.5, **base)
    p = predict_stop(pendulum, brakes_from_config(pendulum, one(sliding_torque=14.0, holding_torque=40.0,
                                                                 armature=0.5)), [0.2], [3.0])
    assert t2 > t1 and p.stop_time == pytest.approx(t2, abs=1e-8)


# Figures of the starting code (before the extended model), UR5 with config/ur5_brakes.yaml as shipped then:
# (stop_time [s], brake_energy [J], q_final [rad], number of samples)
BEFORE = [
    ({}, 0.06299665824091237, 12.468872966829894, [0.37443214271302167, -1.2480357094233037, 1.548493287738336,
                                                   -0.7646067222921441, 0.45737889564905726, 0.23231052295018756], 24),
    ({"category": 1}, 1.0, -0.0, [1.3, -2.45, 2.9, -0.050000000000000044, -0.5, 1.7], 203),
    ({"lock_events": [LockEvent(0.05, "elbow_joint")]}, 0.06299665820175257, 12.468872979433877,
     [0.37443214274805836, -1.2480357094233037, 1.548493287738336, -0.7646067222921441, 0.45737889564905726,
      0.23231052295018756], 25),
]
OLD_UR5_BRAKES = {"brakes": {"defaults": {"engage_delay": 0.010}, "joints": {
    "shoulder_pan_joint": {"sliding_torque": 45.504, "viscous": 50.859, "holding_torque": 59.155},
    "shoulder_lift_joint": {"sliding_torque": 93.240, "viscous": 28.050, "holding_torque": 121.212},
    "elbow_joint": {"sliding_torque": 46.414, "viscous": 18.980, "holding_torque": 60.338},
    "wrist_1_joint": {"sliding_torque": 28.0, "viscous": 0.0, "holding_torque": 36.4},
    "wrist_2_joint": {"sliding_torque": 28.0, "viscous": 0.0, "holding_torque": 36.4},
    "wrist_3_joint": {"sliding_torque": 28.0, "viscous": 0.0, "holding_torque": 36.4}}}}


PYTHON_ENGINE = StopSettings(engine="python")  # the engine the figures were recorded with (fixed steps)


def _rounding_tolerance(ur5, brakes, extra, value_of):
    """How far a quantity may move when only rounding changes (another CPU, another BLAS or SIMD kernel): its
    spread under input perturbations of a few units in the last place, times 100, and never below 100 ulp of the
    quantity itself. Any change of the model or the integrator moves these figures by 1e-9 or more."""
    p0 = value_of(predict_stop(ur5, brakes, Q_MOVING, V_MOVING, settings=PYTHON_ENGINE, **extra))
    spread = np.zeros_like(np.atleast_1d(p0), dtype=float)
    for seed in range(4):
        eps = 4e-16 * np.random.default_rng(seed).standard_normal(6)
        p = value_of(predict_stop(ur5, brakes, Q_MOVING * (1 + eps), V_MOVING * (1 + eps), settings=PYTHON_ENGINE,
                                  **extra))
        spread = np.maximum(spread, np.abs(np.atleast_1d(p) - np.atleast_1d(p0)))
    return 100 * np.maximum(spread, np.spacing(np.abs(np.atleast_1d(p0))))


@pytest.mark.parametrize("extra,stop_time,energy,q_final,samples", BEFORE)
def test_configurations_without_the_new_fields_predict_what_the_starting_code_predicted(ur5, extra, stop_time, energy,
                                                                                        q_final, samples):
    """The figures were recorded on one machine: another CPU may differ in the last bits (a rounding change), so
    each is compared within the spread that a rounding-level change of the inputs causes (``_rounding_tolerance``),
    not bit for bit. The sample count may differ by one where a sample falls within rounding of the stop's end.
    The fixed-step Python engine, which recorded them; the compiled engine is held to them in the next test."""
    brakes = brakes_from_config(ur5, OLD_UR5_BRAKES)
    p = predict_stop(ur5, brakes, Q_MOVING, V_MOVING, settings=PYTHON_ENGINE, **extra)
    figures = lambda r: np.concatenate([[r.stop_time, r.brake_energy], r.q_final])  # noqa: E731
    tol = _rounding_tolerance(ur5, brakes, extra, figures)
    assert np.all(tol < 1e-9)  # the check still sees any change of the model or the integrator
    recorded = np.concatenate([[stop_time, energy], q_final])
    assert np.all(np.abs(figures(p) - recorded) <= tol), (figures(p) - recorded, tol)
    assert abs(len(p.t) - samples) <= 1


@pytest.mark.parametrize("extra,stop_time,energy,q_final,samples", BEFORE)
def test_compiled_engine_reproduces_the_figures_of_the_starting_code(ur5, extra, stop_time, energy, q_final,
                                                                     samples):
    """The compiled engine (error-controlled steps: other step boundaries, other rounding) gives the same stops
    within 1e-9 s, 1e-8 rad and 1e-6 J."""
    p = predict_stop(ur5, brakes_from_config(ur5, OLD_UR5_BRAKES), Q_MOVING, V_MOVING, **extra)
    assert p.stop_time == pytest.approx(stop_time, abs=1e-9)
    assert p.brake_energy == pytest.approx(energy, abs=1e-6)
    np.testing.assert_allclose(p.q_final, q_final, atol=1e-8, rtol=0)


def test_new_fields_round_trip_and_convert_from_the_motor_side(ur5):
    b = brakes_from_config(ur5, {"brakes": {"joints": {"elbow_joint": {
        "sliding_torque": 0.5, "breakaway_torque": 0.6, "stribeck_velocity": 5.0, "holding_torque": 0.7,
        "rise_time": 0.004, "armature": 1e-4, "gear_ratio": 100, "side": "motor"}}}})
    i = ur5.joint("elbow_joint").idx_v
    assert b.sliding_torque[i] == pytest.approx(50.0) and b.breakaway_torque[i] == pytest.approx(60.0)
    assert b.stribeck_velocity[i] == pytest.approx(0.05)  # the motor turns 100 x faster
    assert b.armature[i] == pytest.approx(1.0)  # rotor inertia x ratio^2
    assert b.rise_time[i] == 0.004 and b.holding_torque[i] == pytest.approx(70.0)
    again = brakes_from_config(ur5, b.as_config())
    for name in ("sliding_torque", "breakaway_torque", "stribeck_velocity", "rise_time", "armature", "holding_torque"):
        np.testing.assert_allclose(getattr(again, name), getattr(b, name))
    old = brakes_from_config(ur5, OLD_UR5_BRAKES).as_config()
    assert all(set(e) == {"engage_delay", "sliding_torque", "holding_torque", "viscous"}
               for e in old["brakes"]["joints"].values())


def test_holding_defaults_to_the_breakaway_torque(ur5):
    b = brakes_from_config(ur5, {"brakes": {"joints": {"elbow_joint": {
        "sliding_torque": 50.0, "breakaway_torque": 60.0, "stribeck_velocity": 0.1}}}})
    assert b.holding_torque[ur5.joint("elbow_joint").idx_v] == 60.0


@pytest.mark.parametrize("entry,field", [
    ({"sliding_torque": 50.0, "breakaway_torque": 40.0, "stribeck_velocity": 0.1}, "breakaway_torque"),
    ({"sliding_torque": 50.0, "breakaway_torque": 60.0}, "stribeck_velocity"),
    ({"sliding_torque": 50.0, "breakaway_torque": 60.0, "stribeck_velocity": 0.1, "holding_torque": 55.0},
     "holding_torque"),
    ({"sliding_torque": 50.0, "stribeck_velocity": -1.0}, "stribeck_velocity"),
    ({"sliding_torque": 50.0, "rise_time": -0.01}, "rise_time"),
    ({"sliding_torque": 50.0, "rise_time": 20.0}, "rise_time"),
    ({"sliding_torque": 50.0, "armature": float("nan")}, "armature"),
    ({"sliding_torque": 50.0, "armature": 1e9}, "armature"),
    ({"sliding_torque": 50.0, "stribeck_velocity": "fast"}, "stribeck_velocity"),
])
def test_bad_new_fields_give_one_line_naming_the_field(ur5, entry, field):
    with pytest.raises(BrakeConfigError) as err:
        brakes_from_config(ur5, {"brakes": {"joints": {"elbow_joint": entry}}})
    text = str(err.value)
    assert "\n" not in text and f"elbow_joint.{field}" in text


def test_release_at_exactly_the_breakaway_capacity_slips_instead_of_stalling(ur5):
    """Holding torque = breakaway torque (the default): when a held joint's demand reaches its capacity it starts
    to slip with zero acceleration at that instant. This used to leave the joint held and locate the same release
    again forever (a hang). UR5 with 5 kg, elbow test motion at pi rad/s: the elbow sticks, the shoulder's motion
    then raises the elbow's demand to its capacity."""
    from vtm_dynamics.core.estop.payload import with_payload
    robot = with_payload(ur5, 5.0, "tool0")
    x = [44.91729933403033, 47.86824689933569, 135.3777736251185, 1.416636705374497, 48.55277234253948,
         5.7164629794721815]
    joints = {}
    for k, name in enumerate(robot.joint_names):
        s, c = (x[2 * k], x[2 * k + 1]) if k < 3 else (28.0, 0.0)
        joints[name] = {"sliding_torque": s, "viscous": c, "breakaway_torque": 1.2 * s, "stribeck_velocity": 0.05}
    brakes = brakes_from_config(robot, {"brakes": {"defaults": {"engage_delay": 0.01, "rise_time": 0.005},
                                                   "joints": joints}})
    v = np.zeros(6)
    v[2] = np.pi
    p = predict_stop(robot, brakes, np.zeros(6), v)
    assert p.stopped
    kinds = [(e.kind, e.joints) for e in p.events]
    assert ("release", ("elbow_joint",)) in kinds
    release = next(e for e in p.events if e.kind == "release")
    assert release.time < p.stop_time


def test_extended_model_default_integration_is_within_1e6_of_a_fine_reference(ur5):
    """Time-dependent (rise) and speed-dependent (Stribeck) brake torques keep the default step's accuracy: event
    times, rest pose and joint stop times within 1e-6 of a 4 x finer step."""
    brakes = brakes_from_config(ur5, EXTENDED)
    coarse = predict_stop(ur5, brakes, Q_MOVING, V_MOVING)
    fine = predict_stop(ur5, brakes, Q_MOVING, V_MOVING, settings=StopSettings(step=StopSettings().step / 4))
    assert [e.kind for e in fine.events] == [e.kind for e in coarse.events]
    assert max(abs(a.time - b.time) for a, b in zip(fine.events, coarse.events)) <= 1e-6
    assert np.max(np.abs(fine.q_final - coarse.q_final)) <= 1e-6


def test_abrupt_lock_conserves_momentum_with_the_rotor_inertia(ur5):
    """A lock event's jump uses M + diag(armature): the free joints' momentum rows of (M + A) v are conserved."""
    brakes = brakes_from_config(ur5, EXTENDED)
    p = predict_stop(ur5, brakes, Q_MOVING, V_MOVING, lock_events=[LockEvent(0.005, "elbow_joint")])
    ev = next(e for e in p.events if e.kind == "lock")
    M = ur5.mass_matrix(ev.q) + np.diag(brakes.armature)
    free = [i for i, n in enumerate(ur5.joint_names) if n != "elbow_joint"]
    np.testing.assert_allclose((M @ ev.v_plus)[free], (M @ ev.v_minus)[free], atol=1e-9)
