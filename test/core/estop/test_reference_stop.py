"""The independent references of a stop model every brake term the predictor uses, and the predictor agrees with
the tight one on the benchmark's states with the shipped UR5 brakes (every extended term on) and on the Panda.

The tight reference (:mod:`vtm_dynamics.core.estop.reference_stop`: scipy DOP853 at 1e-12 with its own brake law
and stick/slip rule) and the fixed-step plant (:mod:`vtm_dynamics.core.estop.braked_plant`) are each run on a
recording proxy of the brake set: every field the predictor reads must be read by them too, and every physical
field of :class:`BrakeSet` must be read by all of them (a new term cannot reach the engine unchecked).
"""

import dataclasses
import math
import os
import sys
import types

import numpy as np
import pytest

from core_testdata import REPO
from vtm_dynamics.core.estop import StopSettings, predict_stop
from vtm_dynamics.core.estop.braked_plant import BrakedPlant
from vtm_dynamics.core.estop.brakes import BrakeSet, brakes_from_config
from vtm_dynamics.core.estop.reference_stop import reference_stop

sys.path.insert(0, os.path.join(REPO, "bench"))
from bench_estop import moving_states, panda_brakes, panda_model  # noqa: E402  (the benchmark's own states)

UR5_BRAKES = os.path.join(REPO, "config", "ur5_brakes.yaml")
NOT_PHYSICAL = {"joint_names", "brakes", "source"}
EVERY_TERM = {"brakes": {"defaults": {"engage_delay": 0.01, "rise_time": 0.004}, "joints": {
    "shoulder_pan_joint": {"sliding_torque": 60.0, "breakaway_torque": 72.0, "stribeck_velocity": 0.05,
                           "viscous": 20.0, "armature": 1.3, "holding_torque": 90.0},
    "shoulder_lift_joint": {"sliding_torque": 130.0, "viscous": 20.0, "armature": 1.3, "holding_torque": 200.0},
    "elbow_joint": {"sliding_torque": 60.0, "holding_torque": 90.0, "pawl_delay": 0.03, "pawl_holding_torque": 500.0},
    "wrist_1_joint": {"sliding_torque": 20.0, "holding_torque": 30.0},
    "wrist_2_joint": {"sliding_torque": 20.0, "holding_torque": 30.0},
    "wrist_3_joint": {"sliding_torque": 20.0, "holding_torque": 30.0}}}}
Q = np.array([0.3, -1.2, 1.5, -0.8, 0.5, 0.2])
V = np.array([2.0, -2.5, 2.8, 1.5, -2.0, 3.0])


class FieldRecorder:
    """Stands in for a BrakeSet and records which of its dataclass fields are read (also through its properties and
    methods, which run on the recorder)."""

    def __init__(self, brakes: BrakeSet) -> None:
        object.__setattr__(self, "_brakes", brakes)
        object.__setattr__(self, "read", set())

    def __getattr__(self, name):
        attr = getattr(type(self._brakes), name, None)
        if isinstance(attr, property):
            return attr.fget(self)
        if callable(attr):
            return types.MethodType(attr, self)
        if name in {f.name for f in dataclasses.fields(BrakeSet)}:
            self.read.add(name)
        return getattr(self._brakes, name)


def physical_fields() -> set[str]:
    return {f.name for f in dataclasses.fields(BrakeSet)} - NOT_PHYSICAL


@pytest.fixture(scope="module")
def every_term(ur5):
    return brakes_from_config(ur5, EVERY_TERM)


def fields_read(run) -> set[str]:
    return run.read - NOT_PHYSICAL


@pytest.mark.parametrize("engine", ["compiled", "python"])
def test_the_references_read_every_brake_field_the_predictor_reads(ur5, every_term, engine):
    engine_view = FieldRecorder(every_term)
    p = predict_stop(ur5, engine_view, Q, V, settings=StopSettings(engine=engine))
    assert p.stopped and any(e.kind == "lock" for e in p.events)
    tight = FieldRecorder(every_term)
    reference_stop(ur5, tight, Q, V)
    plant_view = FieldRecorder(every_term)
    plant = BrakedPlant(ur5, plant_view, dt=1e-3)
    plant.start(Q, V)
    plant.advance(0.2)
    assert fields_read(engine_view) <= fields_read(tight), fields_read(engine_view) - fields_read(tight)
    assert fields_read(engine_view) <= fields_read(plant_view), fields_read(engine_view) - fields_read(plant_view)
    for view in (engine_view, tight, plant_view):
        assert fields_read(view) == physical_fields(), physical_fields() - fields_read(view)


def test_the_field_check_sees_a_term_the_reference_does_not_read(ur5, every_term):
    """The check itself: a reference that ignores the armature is caught."""
    class NoArmature(FieldRecorder):
        def __getattr__(self, name):
            if name == "armature":
                return np.zeros(len(self._brakes.armature))
            return super().__getattr__(name)
    blind = NoArmature(every_term)
    reference_stop(ur5, blind, Q, V)
    assert "armature" not in fields_read(blind)


@pytest.fixture(scope="module")
def ur5_defaults(ur5):
    return brakes_from_config(ur5, UR5_BRAKES)


def agreement(robot, brakes, q, v, settings=StopSettings()):
    ref = reference_stop(robot, brakes, q, v)
    p = predict_stop(robot, brakes, q, v, settings=settings)
    assert ref.stopped and p.stopped
    dt = float(np.nanmax(np.abs(ref.joint_stop_times - p.joint_stop_times)))
    assert np.array_equal(np.isnan(ref.joint_stop_times), np.isnan(p.joint_stop_times))
    return float(np.max(np.abs(ref.q_final - p.q_final))), dt, abs(ref.stop_time - p.stop_time)


@pytest.mark.parametrize("k", [0, 3])
def test_shipped_ur5_brakes_agree_with_the_tight_reference_on_the_bench_states(ur5, ur5_defaults, k):
    """Stribeck, torque rise and armature all on: rest pose within 1e-7 rad, each joint's stop time within 1e-7 s."""
    q, v = moving_states(ur5, 5, seed=1)[k]
    dq, dt, dstop = agreement(ur5, ur5_defaults, q, v)
    assert dq <= 1e-7 and dt <= 1e-7 and dstop <= 1e-7


def test_panda_agrees_with_the_tight_reference_on_a_bench_state():
    panda = panda_model()
    q, v = moving_states(panda, 5, seed=2)[0]
    dq, dt, dstop = agreement(panda, panda_brakes(panda), q, v)
    assert dq <= 1e-7 and dt <= 1e-7


def test_pawls_and_every_term_agree_with_the_tight_reference(ur5, every_term):
    dq, dt, dstop = agreement(ur5, every_term, Q, V)
    assert dq <= 1e-7 and dt <= 1e-7


def test_the_tight_reference_agrees_with_a_closed_form_free_fall_and_a_one_joint_stop(pendulum_model):
    """Without brakes nothing stops (the horizon ends it); a single braked pendulum stops where the 1-DOF energy
    balance says: for a Coulomb brake on a pendulum moving horizontally from q = 0 with v0, at rest
    0.5 I v0^2 = sliding q + m g l sin(q) ... solved by bisection."""
    robot, inertia, mgl = pendulum_model
    brakes = brakes_from_config(robot, {"brakes": {"joints": {"j": {"sliding_torque": 30.0,
                                                                     "holding_torque": 60.0}}}})
    ref = reference_stop(robot, brakes, [0.0], [3.0])
    lo, hi = 0.0, 1.5
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 30.0 * mid + mgl * math.sin(mid) < 0.5 * inertia * 9.0:
            lo = mid
        else:
            hi = mid
    assert ref.stopped and ref.q_final[0] == pytest.approx(lo, abs=1e-9)


@pytest.fixture(scope="module")
def pendulum_model():
    from vtm_dynamics.core.robot.model import RobotModel

    urdf = """<robot name="pendulum"><link name="base"/><link name="arm"><inertial><origin xyz="0.5 0 0"/>
      <mass value="2.0"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 -1 0"/>
      <limit lower="-10" upper="10" effort="100" velocity="10"/></joint></robot>"""
    return RobotModel.from_urdf(urdf, gravity=(0.0, 0.0, -9.81)), 2.0 * 0.25 + 0.01, 2.0 * 9.81 * 0.5
