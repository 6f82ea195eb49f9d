"""Default brakes fitted to published category-0 stopping figures with the full multibody model, every joint braked.

A robot maker publishes, per joint, the angle and time the joint needs to stop in a category-0 stop (IEC 60204-1:
power removed at once, the brakes stop the arm). The figures come without the test motion, so it is stated here
(:class:`Category0Spec`) and every other joint is part of the stop as it is on the real robot:

* pose: the arm stretched horizontally (q = 0 of the example-robot-data URDFs: "100 % extension"), the rated
  payload as a point mass at ``tool0``;
* the joint under test moves at the test speed min(pi rad/s, the URDF velocity limit) ("100 % speed"; 180 deg/s is
  the UR joints' rated speed), in the direction gravity pulls it (the longer stop; +1 for the base, which gravity
  does not load); every other joint is at rest when the power is cut, and is braked too;
* every brake engages after ``engage_delay``, its torque rises over ``rise_time``; Stribeck friction with
  breakaway = ``breakaway_ratio`` x sliding at ``stribeck_velocity``; holding capacity ``holding_ratio`` x sliding;
  reflected rotor inertias ``armature`` (all stated assumptions, in docs/estop.md).

The sliding and viscous torques of J0, J1, J2 are fitted by scipy's least squares (trust-region reflective, relative
residuals of angle and time of the three test stops, every residual from :func:`~.prediction.predict_stop`), with
the lower bound sliding >= ``sliding_margin`` x the gravity load of the joint in the stretched pose with payload,
so that a joint sliding under gravity always comes to rest. The margin, 1.16, is chosen for the brake tolerance:
the stopping envelope scales brake torques by 0.9-1.1 (:class:`~.envelope.EnvelopeSpec`), and at the weakest
corner a margin of 1.1 leaves 0.99 x the load (a 10^5-state UR5 map found the stretched, loaded shoulder crawling
for up to 4.2 s there); 1.16 leaves 1.04 x, the largest margin (in steps of 0.01) at which the UR5's published J1
figures are still met within 10 % (the study: ``tools/fit_default_brakes.py --margin-study``; docs/estop.md). The wrist joints have no published figures: sliding =
``wrist_sliding`` (the URDF effort limit), no viscous part. Units: rad, rad/s, s, N m, N m s/rad, kg m^2, kg.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.optimize

from vtm_dynamics.core.estop.brakes import BrakeSet, brakes_from_config
from vtm_dynamics.core.estop.payload import with_payload
from vtm_dynamics.core.estop.prediction import predict_stop
from vtm_dynamics.core.robot.catalogue import ROBOTS, CatalogueRobot, PublishedStop, UrdfSource
from vtm_dynamics.core.robot.model import RobotModel


@dataclass(frozen=True)
class Category0Spec:
    """The stated test motion and the fixed (assumed) brake terms of one robot's default brakes (module docstring).

    ``urdf`` where the model comes from; ``payload`` [kg] at ``payload_frame``; ``figures`` J0, J1, J2;
    ``engage_delay`` / ``rise_time`` [s]; ``breakaway_ratio`` / ``holding_ratio`` [-] of the sliding torque;
    ``stribeck_velocity`` [rad/s]; ``armature`` [kg m^2] per joint; ``wrist_sliding`` [N m];
    ``sliding_margin`` [-] over the gravity load; ``max_speed`` [rad/s] cap of the test speed."""

    robot: str
    urdf: UrdfSource
    payload: float
    figures: tuple[PublishedStop, ...]
    armature: tuple[float, ...]
    wrist_sliding: float
    payload_frame: str = "tool0"
    engage_delay: float = 0.010
    rise_time: float = 0.005
    breakaway_ratio: float = 1.2
    stribeck_velocity: float = 0.05
    holding_ratio: float = 1.5
    sliding_margin: float = 1.16
    max_speed: float = math.pi


def catalogue_spec(robot: CatalogueRobot) -> Category0Spec:
    """The stated test of a catalogue robot with published figures: its rated payload at its payload frame, the
    figures (Universal Robots CB3 user manual, Appendix A, for the URs) and its brake assumptions."""
    return Category0Spec(robot=robot.name, urdf=robot.urdf, payload=robot.rated_payload,
                         figures=robot.published_stops, armature=robot.brake_assumptions.armature,
                         wrist_sliding=robot.brake_assumptions.wrist_sliding, payload_frame=robot.payload_frame)


SPECS = {name: catalogue_spec(robot) for name, robot in ROBOTS.items() if robot.published_stops}


@dataclass(frozen=True)
class Category0Stop:
    """One test stop: the tested ``joint``, its ``angle`` [rad] and ``time`` [s], the whole arm's rest time
    ``arm_time`` [s] (nan if not at rest), ``stopped``, the largest angle [rad] any other joint moved
    (``other_angle``) and the gravity load [N m] / holding capacity [N m] of every joint at the final pose."""

    joint: str
    speed: float
    angle: float
    time: float
    arm_time: float
    stopped: bool
    other_angle: float
    gravity_load: np.ndarray
    capacity: np.ndarray


@dataclass(frozen=True)
class Category0Fit:
    """Fitted ``sliding`` / ``viscous`` of J0-J2, the ``config`` (brake YAML dict), relative ``residuals``
    (angle, time per figure), the ``stops`` with the fitted brakes, and the lower bounds ``sliding_bounds``."""

    sliding: np.ndarray
    viscous: np.ndarray
    config: dict
    residuals: np.ndarray
    stops: tuple[Category0Stop, ...]
    sliding_bounds: np.ndarray


def spec_robot(spec: Category0Spec) -> RobotModel:
    """The robot of ``spec`` with its rated payload."""
    return with_payload(RobotModel.from_urdf_file(spec.urdf.resolve()), spec.payload, spec.payload_frame)


def brake_config(robot: RobotModel, spec: Category0Spec, sliding: np.ndarray, viscous: np.ndarray,
                 digits: int | None = None) -> dict:
    """The brake configuration (dict for :func:`brakes_from_config`) with J0-J2 ``sliding`` [N m] and ``viscous``
    [N m s/rad], the spec's assumed terms for all joints, and the wrist values; torques rounded to ``digits``
    decimals if given (for the shipped YAML; the fit itself uses unrounded values)."""

    def round_(x: float) -> float:
        return round(x, digits) if digits is not None else x

    joints = {}
    for k, name in enumerate(robot.joint_names):
        s, c = (float(sliding[k]), float(viscous[k])) if k < len(spec.figures) else (spec.wrist_sliding, 0.0)
        joints[name] = {
            "sliding_torque": round_(s), "viscous": round_(c),
            "breakaway_torque": round_(spec.breakaway_ratio * s), "stribeck_velocity": spec.stribeck_velocity,
            "holding_torque": round_(spec.holding_ratio * s), "armature": spec.armature[k],
        }
    return {"brakes": {"defaults": {"engage_delay": spec.engage_delay, "rise_time": spec.rise_time},
                       "joints": joints}}


def test_velocity(robot: RobotModel, spec: Category0Spec, joint: str) -> np.ndarray:
    """Joint velocities [rad/s] at the power cut of the test of ``joint`` (module docstring)."""
    i = robot.joint(joint).idx_v
    load = robot.gravity_torques(np.zeros(robot.nq))[i]
    speed = min(spec.max_speed, float(robot.model.velocityLimit[i]))
    v = np.zeros(robot.nv)
    v[i] = speed if load <= 1e-9 else -speed  # the way gravity pulls (generalized gravity g: a = -M^-1 g)
    return v


def run_test(robot: RobotModel, brakes: BrakeSet, spec: Category0Spec, figure: PublishedStop) -> Category0Stop:
    """The category-0 test stop of ``figure.joint`` with ``brakes`` (every joint braked)."""
    i = robot.joint(figure.joint).idx_v
    v = test_velocity(robot, spec, figure.joint)
    p = predict_stop(robot, brakes, np.zeros(robot.nq), v)
    others = np.delete(np.abs(p.stopping_angles), i)
    load = np.abs(robot.gravity_torques(p.q_final))
    return Category0Stop(
        joint=figure.joint, speed=float(abs(v[i])), angle=float(abs(p.stopping_angles[i])),
        time=float(p.joint_stop_times[i]), arm_time=float(p.stop_time), stopped=p.stopped,
        other_angle=float(others.max()), gravity_load=load, capacity=brakes.holding_torque.copy(),
    )


def fit_category0(spec: Category0Spec, robot: RobotModel | None = None, progress=None) -> Category0Fit:
    """Fit J0-J2 sliding and viscous torques to ``spec.figures`` (module docstring); ``progress`` (optional
    callable) receives one line per residual evaluation."""
    robot = robot or spec_robot(spec)
    n = len(spec.figures)
    load = np.abs(robot.gravity_torques(np.zeros(robot.nq)))[:n]
    lower = np.zeros(2 * n)
    lower[0::2] = spec.sliding_margin * load

    def residuals(x):
        b = brakes_from_config(robot, brake_config(robot, spec, x[0::2], x[1::2]))
        r = []
        for f in spec.figures:
            s = run_test(robot, b, spec, f)
            r += [(s.angle - f.angle) / f.angle, (s.time - f.time) / f.time]
        if progress:
            progress(f"fit {spec.robot}: x={np.round(x, 3).tolist()} max|r|={np.max(np.abs(r)):.4f}")
        return np.array(r)

    # start: half the uniform deceleration that stops the joint within the published time as Coulomb part (at
    # least the bound), the other half as viscous part at the mean speed
    x0 = np.zeros(2 * n)
    for k, f in enumerate(spec.figures):
        i = robot.joint(f.joint).idx_v
        inertia = robot.mass_matrix(np.zeros(robot.nq))[i, i] + spec.armature[i]
        speed = min(spec.max_speed, float(robot.model.velocityLimit[i]))
        torque = inertia * speed / (f.time - spec.engage_delay)
        x0[2 * k] = max(0.5 * torque, 1.01 * lower[2 * k])
        x0[2 * k + 1] = 0.5 * torque / (0.5 * speed)
    # the residuals are piecewise smooth (the event sequence changes with the parameters): two starts, one with a
    # fifth of the viscous part, and the better solution is kept
    sol = None
    for viscous_share in (1.0, 0.2):
        start = x0.copy()
        start[1::2] *= viscous_share
        trial = scipy.optimize.least_squares(residuals, start, bounds=(lower, np.full(2 * n, np.inf)),
                                             x_scale=10.0, diff_step=1e-4)
        if sol is None or trial.cost < sol.cost:
            sol = trial
    # rounded for the YAML; a sliding torque at its bound is rounded up, so the shipped value honours the bound
    sliding = np.maximum(np.round(sol.x[0::2], 3), np.ceil(lower[0::2] * 1e3) / 1e3)
    viscous = np.round(sol.x[1::2], 3)
    config = brake_config(robot, spec, sliding, viscous, digits=3)
    brakes = brakes_from_config(robot, config)
    stops = tuple(run_test(robot, brakes, spec, f) for f in spec.figures)
    res = np.array([[(s.angle - f.angle) / f.angle, (s.time - f.time) / f.time] for s, f in zip(stops, spec.figures)])
    return Category0Fit(sliding=sliding, viscous=viscous, config=config, residuals=res, stops=stops,
                        sliding_bounds=lower[0::2])
