"""Figures of the paper's two scenarios (Müller 2026, Secs. 6 and 7), as reported in docs/core_dynamics.md.

Run: python bench/scenario_figures.py
Prints: momentum error of the unlocked joints across each lock (consistent and naive), relative energy drift
between events, energy drop at each lock, agreement of eqs. (22), (32), (37) at the scenario's events, and for the
UR5 version of Sec. 7 the locked angles and the tool position of consistent versus naive switching.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from peer_runners import PLANAR_3R  # noqa: E402
from scenarios import run_3r, run_arm  # noqa: E402
from vtm_dynamics.core.robot.constraints import JointLock  # noqa: E402
from vtm_dynamics.core.switching.diagnostics import generalized_momentum, trajectory_energy  # noqa: E402
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf  # noqa: E402
from vtm_dynamics.core.switching.transitions import solve_activation  # noqa: E402
from vtm_dynamics.core.switching.topology import Topology  # noqa: E402


def main() -> None:
    robot = RobotModel.from_urdf_file(PLANAR_3R)
    for transition in ("kkt", "naive"):
        traj = run_3r(robot, transition)
        jumps = [(i - 1, i) for i in range(1, len(traj.t)) if traj.segment[i] != traj.segment[i - 1]]
        E = trajectory_energy(robot, traj.q, traj.v)
        print(f"== planar 3R, {transition} switching, RK4 1e-4 s")
        for (b, a), topo in zip(jumps, traj.topologies[1:]):
            pb = generalized_momentum(robot, topo, traj.q[b], traj.v[b])
            pa = generalized_momentum(robot, topo, traj.q[a], traj.v[a])
            print(f"  t={traj.t[b]:.2f} s  free momenta {pb} -> {pa}  rel. error "
                  f"{np.abs(pa - pb).max() / np.abs(pb).max():.2e}  energy drop {E[b] - E[a]:.4f} J")
        for s in range(len(traj.topologies)):
            e = E[traj.segment == s]
            print(f"  segment {s}: energy drift (max - min) {np.ptp(e):.2e} J, relative {np.ptp(e) / np.abs(e).max():.2e}")
        print(f"  q(2 s) = {traj.q[-1]}")
        if transition == "kkt":
            before = Topology()
            for ev in traj.events:
                outs = [solve_activation(robot, ev.q, ev.v_minus, before, [JointLock(ev.topology.locked_joints[-1])],
                                         method=m)[0] for m in ("kkt", "redundant", "minimal")]
                dev = max(np.abs(o.v_plus - outs[0].v_plus).max() for o in outs) / np.abs(ev.v_minus).max()
                print(f"  t={ev.time:.2f} s: eqs. 22/32/37 max relative difference {dev:.2e}, "
                      f"Lambda_2 = {[float(o.impulses[0]) for o in outs]}")
                before = ev.topology
    ur5 = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    cons, naive = run_arm(ur5, "kkt"), run_arm(ur5, "naive")
    print("== UR5, joints 1, 2, 3 locked at 0.05, 0.10, 0.15 s (Sec. 7), state at 0.5 s")
    print(f"  locked angles consistent {cons.q[-1, :3]}  naive {naive.q[-1, :3]}  "
          f"difference {cons.q[-1, :3] - naive.q[-1, :3]} rad")
    tool_c = ur5.frame_placement(cons.q[-1], "tool0").translation
    tool_n = ur5.frame_placement(naive.q[-1], "tool0").translation
    print(f"  tool0 at 0.5 s: consistent {tool_c}, naive {tool_n}, distance {np.linalg.norm(tool_c - tool_n):.4f} m")
    print(f"  energy dissipated by the locks (consistent): {[round(e.transition.energy_loss, 6) for e in cons.events]} J")
    print(f"  energy dissipated by the locks (naive): {[round(e.transition.energy_loss, 6) for e in naive.events]} J")


if __name__ == "__main__":
    main()
