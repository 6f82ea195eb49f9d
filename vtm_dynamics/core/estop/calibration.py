"""Brake calibration from published category-0 stopping angles and times (single-joint test motions).

Robot makers publish, per joint, the angle and time a joint needs to stop in a category-0 stop (ISO 10218-1 asks
for them). This module turns such figures into sliding (Coulomb) and viscous brake torques, given an explicitly
stated test motion (:class:`TestMotion`): the joint under test moves alone at speed ``speed`` through the test pose,
the other joints are held, the drives are cut at t = 0 and the brake engages after ``engage_delay``. The figures
(:class:`~vtm_dynamics.core.robot.catalogue.PublishedStop`) of the shipped robots are in the robot catalogue.

With the other joints held the arm is one rigid body turning about joint i: its inertia about the axis, M_ii, is
constant, and the equation of motion is the joint-i row of Müller 2026, eq. (3) with the other joints locked:

    M_ii theta'' = -g_i(q_test + theta e_i) - sliding * sign(theta') - viscous * theta'   (after the delay)

with g_i the generalized gravity torque from Pinocchio. It is integrated with scipy (tight tolerances, stop at
theta' = 0) and the two unknowns (sliding, viscous) are solved from the two published figures (angle, time).
This 1-DOF model is independent of :mod:`estop`; the tests check that the full multibody prediction reproduces the
figures. Units: rad, rad/s, s, N m, N m s/rad.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
import scipy.integrate
import scipy.optimize

from vtm_dynamics.core.robot.catalogue import PublishedStop
from vtm_dynamics.core.robot.model import RobotModel


class CalibrationError(ValueError):
    """Published figures that the assumed test motion cannot reproduce (e.g. would need negative viscous drag)."""


@dataclass(frozen=True)
class TestMotion:
    """Assumed test motion: ``q_test`` [rad] pose at the stop instant, joint ``speed`` [rad/s] (sign chosen so
    gravity does not oppose the motion, the longer stop), brake ``engage_delay`` [s]."""

    q_test: tuple[float, ...]
    speed: float
    engage_delay: float


@dataclass(frozen=True)
class CalibratedBrake:
    """Result for one joint: ``sliding_torque`` [N m], ``viscous`` [N m s/rad], the test ``direction`` (+1/-1),
    the axis inertia ``inertia`` [kg m^2] and the 1-DOF model's reproduced ``angle`` [rad] / ``time`` [s]."""

    joint: str
    sliding_torque: float
    viscous: float
    direction: float
    inertia: float
    angle: float
    time: float


def single_joint_stop(
    robot: RobotModel, joint: str, motion: TestMotion, sliding: float, viscous: float, direction: float = 1.0,
) -> tuple[float, float]:
    """(stopping angle |theta| [rad], stopping time [s]) of the 1-DOF model (module docstring)."""
    i = robot.joint(joint).idx_v
    q0 = np.asarray(motion.q_test, dtype=float)
    I = robot.mass_matrix(q0)[i, i]
    m, d = robot.model, robot.data

    def grav(theta: float) -> float:
        q = q0.copy()
        q[i] += theta
        return float(pin.computeGeneralizedGravity(m, d, q)[i])

    w0 = direction * motion.speed
    delay = motion.engage_delay
    # free phase (no brake) for the delay
    th, w = 0.0, w0
    if delay > 0:
        sol = scipy.integrate.solve_ivp(lambda t, y: [y[1], -grav(y[0]) / I], (0, delay), [0.0, w0],
                                        rtol=1e-11, atol=1e-12)
        th, w = sol.y[0, -1], sol.y[1, -1]
    s = math.copysign(1.0, w)

    def rhs(t, y):
        return [y[1], (-grav(y[0]) - s * sliding - viscous * y[1]) / I]

    def stop(t, y):
        return y[1]

    stop.terminal = True
    stop.direction = -s
    sol = scipy.integrate.solve_ivp(rhs, (0, 30.0), [th, w], events=stop, rtol=1e-11, atol=1e-12)
    if not sol.t_events[0].size:
        raise CalibrationError(f"{joint}: the brake does not stop the joint within 30 s (sliding={sliding:.4g})")
    return abs(float(sol.y_events[0][0][0])), delay + float(sol.t_events[0][0])


def calibrate_joint(robot: RobotModel, figure: PublishedStop, motion: TestMotion) -> CalibratedBrake:
    """Sliding and viscous torque that make the 1-DOF test stop match ``figure`` (angle and time)."""
    i = robot.joint(figure.joint).idx_v
    q0 = np.asarray(motion.q_test, dtype=float)
    I = float(robot.mass_matrix(q0)[i, i])
    g0 = float(robot.gravity_torques(q0)[i])
    direction = 1.0 if g0 <= 1e-9 else -1.0  # move the way gravity pulls (v * (-g) >= 0); +1 without gravity
    w0 = motion.speed
    # start: constant deceleration through the figures, no viscous part
    decel = w0 / max(figure.time - motion.engage_delay, 1e-3)
    x0 = np.array([I * decel + abs(g0), 0.1 * I * decel / w0])

    def resid(x):
        ang, tim = single_joint_stop(robot, figure.joint, motion, x[0], x[1], direction)
        return [(ang - figure.angle) / figure.angle, (tim - figure.time) / figure.time]

    sol = scipy.optimize.root(resid, x0, method="hybr", options={"xtol": 1e-12})
    res = np.abs(resid(sol.x))
    if not sol.success and np.max(res) > 1e-8:
        raise CalibrationError(f"{figure.joint}: no sliding/viscous torque reproduces {figure.angle} rad in "
                               f"{figure.time} s under the assumed test motion")
    sliding, viscous = float(sol.x[0]), float(sol.x[1])
    if sliding < 0 or viscous < 0:
        raise CalibrationError(f"{figure.joint}: the figures need a negative brake parameter "
                               f"(sliding={sliding:.4g} N m, viscous={viscous:.4g} N m s/rad) under the assumed test motion")
    ang, tim = single_joint_stop(robot, figure.joint, motion, sliding, viscous, direction)
    return CalibratedBrake(figure.joint, sliding, viscous, direction, I, ang, tim)


def calibrate_brakes(robot: RobotModel, figures: tuple[PublishedStop, ...], motion: TestMotion) -> tuple[CalibratedBrake, ...]:
    """:func:`calibrate_joint` for every published figure."""
    return tuple(calibrate_joint(robot, f, motion) for f in figures)
