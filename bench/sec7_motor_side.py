"""Müller 2026, Sec. 7 on a UR5: joints 1, 2, 3 locked at 0.05, 0.10, 0.15 s, seen from the motors.

The paper's industrial-arm example (its Stäubli RX130L model is not public) shows motor angles, motor rates and
the generalized momenta of the unlocked motors, related to the joint side by a gear ratio of 100, once with the
naive update (the locked joint's rate set to zero, the others kept: Figs. 6, 8b) and once with the
momentum-consistent one (eq. (22): Figs. 7, 8a), and points out that the arm comes to rest in a different pose.

Here: the UR5 of example-robot-data with the rotor inertias of the shipped brakes (``armature``, the motors'
inertia reflected through the gear) added to M, from q0 = (0, -1.2, 1.5, -0.5, 1.2, 0) rad with the first three
joints moving at (1, -0.8, 1.2) rad/s; the wrist is held rigid, as the paper's "simplified scenario" that leaves the
wrist out, so that the arm is at rest once joint 3 locks. Motor side, gear ratio r: motor angle r q, motor rate
r q', motor-side momentum p / r (the momentum conjugate to the motor angle: p q' = (p / r)(r q'), the power is the
same on both sides).

Run: ``python bench/sec7_motor_side.py [--out docs/figures/mueller_sec7_ur5.png]``: prints the momentum jumps, the
energy dropped at each lock and the rest poses; writes the figure of docs/estop.md ("Müller Sec. 7").
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

import numpy as np

from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.robot.constraints import JointLock
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
from vtm_dynamics.core.switching.integrator import TimeEvent, Trajectory, simulate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEAR_RATIO = 100.0  # the paper's
Q0 = np.array([0.0, -1.2, 1.5, -0.5, 1.2, 0.0])  # [rad] as bench/scenarios.py (Sec. 7 on a UR5)
V0 = np.array([1.0, -0.8, 1.2, 0.0, 0.0, 0.0])  # [rad/s] the positioning joints move; the wrist is held
LOCK_TIMES = (0.05, 0.10, 0.15)  # [s] joints 1, 2, 3
HORIZON = 0.2  # [s] at rest from 0.15 s on


@dataclass(frozen=True)
class MotorSide:
    """One run seen from both sides: ``t`` [s]; joint side ``q`` [rad], ``v`` [rad/s], ``p`` = M v [N m s]; motor
    side ``q_motor`` = r q, ``v_motor`` = r v, ``p_motor`` = p / r; ``free`` (N, 3): joint i of the first three not
    yet locked at the sample (the curves end at the lock); the trajectory itself."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    p: np.ndarray
    q_motor: np.ndarray
    v_motor: np.ndarray
    p_motor: np.ndarray
    free: np.ndarray
    trajectory: Trajectory


def arm_with_rotors() -> RobotModel:
    """The UR5 with the rotor inertias of config/ur5_brakes.yaml in its mass matrix (Pinocchio's armature)."""
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    brakes = brakes_from_config(robot, os.path.join(ROOT, "config", "ur5_brakes.yaml"))
    robot.model.armature = np.asarray(brakes.armature, dtype=float).copy()
    return robot


def run(robot: RobotModel, transition: str, dt: float = 1e-4, gear: float = GEAR_RATIO,
        record_every: int = 5) -> MotorSide:
    """The Sec. 7 locks with ``transition`` "kkt" (momentum consistent, eq. (22)) or "naive"; RK4 with step dt."""
    wrist = [JointLock(name) for name in robot.joint_names[3:]]
    events = [TimeEvent(0.0, wrist, "wrist held")]
    events += [TimeEvent(t, JointLock(robot.joint_names[i]), f"joint {i + 1} locks") for i, t in enumerate(LOCK_TIMES)]
    traj = simulate(robot, Q0, V0, HORIZON, events, integrator="rk4", dt=dt, transition=transition,
                    record_every=record_every)
    p = np.array([robot.mass_matrix(q) @ v for q, v in zip(traj.q, traj.v)])
    locked_from = np.array(LOCK_TIMES)
    free = np.array([[not (t > lt or (t == lt and seg >= i + 2)) for i, lt in enumerate(locked_from)]
                     for t, seg in zip(traj.t, traj.segment)])
    return MotorSide(traj.t, traj.q, traj.v, p, gear * traj.q, gear * traj.v, p / gear, free, traj)


def lock_jumps(side: MotorSide) -> list[tuple[float, np.ndarray]]:
    """Per lock: its time and the jump of the motor-side momenta of the joints still free after it [N m s]."""
    out = []
    t, seg = side.t, side.trajectory.segment
    for k in range(1, len(t)):
        if seg[k] != seg[k - 1] and t[k] > 0.0:
            still = side.free[k]
            out.append((float(t[k]), (side.p_motor[k] - side.p_motor[k - 1])[:3][still]))
    return out


def figure(consistent: MotorSide, naive: MotorSide, path: str, gear: float = GEAR_RATIO) -> str:
    """Motor angles, motor rates and the momenta of the unlocked motors (rows) for the naive and the consistent
    update (columns), the joint side on the right-hand axes, the locks marked."""
    from vtm_dynamics.cli.plots import new_figure, pyplot, save_figure_at

    plt = pyplot()
    fig, axes = new_figure(plt, 11.0, 9.0, 3, 2, sharex=True, sharey="row")
    colors = ("tab:blue", "tab:orange", "tab:green")
    rows = (("q_motor", "motor angle travelled [rad]", "joint angle travelled [rad]", 1.0 / gear),
            ("v_motor", "motor rate [rad/s]", "joint rate [rad/s]", 1.0 / gear),
            ("p_motor", "momentum of the unlocked motors p/r [N m s]", "joint side p = M v [N m s]", gear))
    for col, (side, title) in enumerate(((naive, "naive update (locked rate set to 0)"),
                                         (consistent, "momentum-consistent update (eq. (22))"))):
        for row, (key, label, joint_label, to_joint) in enumerate(rows):
            ax = axes[row, col]
            data = getattr(side, key)[:, :3]
            if key == "q_motor":
                data = data - data[0]
            for i in range(3):
                y = np.where(side.free[:, i] | (key == "q_motor"), data[:, i], np.nan)
                ax.plot(side.t, y, color=colors[i], label=f"joint {i + 1}")
            for lt in LOCK_TIMES:
                ax.axvline(lt, color="0.4", ls=":", lw=0.9)
            ax.grid(alpha=0.3)
            if col == 0:
                ax.set_ylabel(label)
            else:
                sec = ax.secondary_yaxis("right", functions=(lambda y, s=to_joint: y * s, lambda y, s=to_joint: y / s))
                sec.set_ylabel(joint_label)
            if row == 0:
                ax.set_title(title, fontsize=10)
        axes[-1, col].set_xlabel("time [s]")
    axes[0, 1].legend(loc="upper left", bbox_to_anchor=(1.2, 1.0), borderaxespad=0.0, fontsize=8, frameon=False)
    dq = consistent.q[-1, :3] - naive.q[-1, :3]
    fig.suptitle("UR5, Müller Sec. 7: joints 1, 2, 3 locked at 0.05, 0.10, 0.15 s (dotted lines), seen from the "
                 f"motors\n(gear ratio {gear:g}: motor angles and rates = joint side x {gear:g}, momenta = joint side "
                 f"/ {gear:g})", fontsize=10)
    notes = [f"rest pose, consistent minus naive: joint side ({', '.join(f'{x:+.4f}' for x in dq)}) rad, motor side "
             f"({', '.join(f'{x:+.2f}' for x in gear * dq)}) rad; momenta are drawn while the joint is free: with the "
             "consistent update they are continuous across the other joints' locks, with the naive one they jump.",
             "wrist held rigid (the paper's simplified scenario); rotor inertias of config/ur5_brakes.yaml in M; "
             "RK4, 0.1 ms; generated by bench/sec7_motor_side.py."]
    return save_figure_at(plt, fig, path, notes=notes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "figures", "mueller_sec7_ur5.png"),
                    help="figure file (PNG)")
    args = ap.parse_args()
    robot = arm_with_rotors()
    consistent, naive = run(robot, "kkt"), run(robot, "naive")
    for name, side in (("consistent", consistent), ("naive", naive)):
        print(f"== {name}")
        for (t, jump), ev in zip(lock_jumps(side), side.trajectory.events[1:]):
            print(f"  t = {t:.2f} s: jump of the free motors' momenta {np.array2string(jump, precision=6)} N m s, "
                  f"energy dropped {ev.transition.energy_loss:.4f} J")
        print(f"  rest pose q = {np.array2string(side.q[-1, :3], precision=5)} rad "
              f"(motor {np.array2string(GEAR_RATIO * side.q[-1, :3], precision=3)} rad), |v| at the end "
              f"{np.abs(side.v[-1]).max():.1e}")
    dq = consistent.q[-1, :3] - naive.q[-1, :3]
    tool = [robot.frame_placement(s.q[-1], "tool0").translation for s in (consistent, naive)]
    print(f"rest pose difference (consistent - naive): {np.array2string(dq, precision=5)} rad, "
          f"tool0 {1e3 * np.linalg.norm(tool[0] - tool[1]):.1f} mm apart")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    print(f"wrote {figure(consistent, naive, args.out)}")


if __name__ == "__main__":
    sys.exit(main())
