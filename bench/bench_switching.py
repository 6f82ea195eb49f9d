"""Timing of the core: one transition solve, one simulated second, and MuJoCo on the same scenario in this run.

Run: python bench/bench_switching.py
Prints (no assertions): per-method time of one activation solve (eqs. 22, 32, 37) on the planar 3R and a UR5,
the cost of one right-hand-side evaluation for each formulation of the constrained dynamics, the wall time of one
simulated second of the paper's locking scenarios (RK4 at 1e-4 s and adaptive), and MuJoCo's wall time for the
same scenario (RK4 at 1e-4 s, joint equalities switched on at the events), as a ratio ours / MuJoCo.
"""

from __future__ import annotations

import os
import sys
import time
import xml.etree.ElementTree as ET

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from peer_runners import PLANAR_3R  # noqa: E402
from scenarios import Q0_3R  # noqa: E402
from vtm_dynamics.core.robot.constraints import JointLock  # noqa: E402
from vtm_dynamics.core.switching.integrator import TimeEvent, constrained_acceleration, simulate  # noqa: E402
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf  # noqa: E402
from vtm_dynamics.core.switching.transitions import solve_activation  # noqa: E402
from vtm_dynamics.core.switching.topology import Topology  # noqa: E402

UR5 = example_robot_urdf("ur_description/urdf/ur5_robot.urdf")
SCENARIOS = {
    # name: (urdf, q0, v0, [(t, joint index)], horizon)
    "planar 3R (Sec. 6)": (PLANAR_3R, Q0_3R, np.zeros(3), [(0.8, 1), (1.3, 2)], 2.0),
    "UR5 (Sec. 7)": (UR5, np.array([0.0, -1.2, 1.5, -0.5, 1.2, 0.0]), np.array([1.0, -0.8, 1.2, 0.5, -0.5, 0.8]),
                     [(0.05, 0), (0.10, 1), (0.15, 2)], 1.0),
}


def best_of(fn, repeat=5, number=1):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return min(times)


def bench_transition(robot, rng):
    q = robot.random_configuration(rng)
    v = rng.normal(size=robot.nv)
    names = robot.joint_names
    topo = Topology.of([JointLock(names[0])]).activate(robot, q, [])
    topo = Topology(tuple(c.bind(robot, q) for c in topo.constraints))
    v[robot.v_indices([names[0]])] = 0.0
    out = {}
    for method in ("kkt", "redundant", "minimal", "naive"):
        out[method] = best_of(lambda: solve_activation(robot, q, v, topo, [JointLock(names[1])], method=method),
                              number=200)
    return out


def bench_rhs(robot, rng):
    q = robot.random_configuration(rng)
    v = rng.normal(size=robot.nv)
    names = robot.joint_names
    topo = Topology(tuple(JointLock(n).bind(robot, q) for n in names[:2]))
    v[robot.v_indices(list(names[:2]))] = 0.0
    import pinocchio as pin

    red = pin.buildReducedModel(robot.model, [robot.joint(n).joint_id for n in names[:2]], q)
    rdata = red.createData()
    free = topo.free_v_indices(robot)
    xq, xv, z = q[free].copy(), v[free].copy(), np.zeros(len(free))
    return {
        "locked_aba (reduced model, ABA)": best_of(lambda: pin.aba(red, rdata, xq, xv, z), number=2000),
        "locked_cholesky (M_ff Cholesky)": best_of(
            lambda: constrained_acceleration(robot, topo, q, v, formulation="locked_cholesky"), number=2000),
        "projected (eq. 7)": best_of(
            lambda: constrained_acceleration(robot, topo, q, v, formulation="projected"), number=2000),
    }


def run_ours(urdf, q0, v0, locks, horizon, integrator):
    robot = RobotModel.from_urdf_file(urdf)
    events = [TimeEvent(t, JointLock(robot.joint_names[i])) for t, i in locks]
    t0 = time.perf_counter()
    simulate(robot, q0, v0, horizon, events, integrator=integrator, dt=1e-4, record_every=100)
    return time.perf_counter() - t0


def _strip_geometry(urdf_path):
    root = ET.parse(urdf_path).getroot()
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for el in link.findall(tag):
                link.remove(el)
    return ET.tostring(root, encoding="unicode")


def run_mujoco(urdf, q0, v0, locks, horizon, dt=1e-4):
    import mujoco

    spec = mujoco.MjSpec.from_string(_strip_geometry(urdf))
    spec.option.timestep = dt
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_RK4
    model0 = spec.compile()
    joint_names = [model0.joint(i).name for i in range(model0.njnt)]
    for t, i in locks:
        eq = spec.add_equality()
        eq.name = f"lock{i}"
        eq.type = mujoco.mjtEq.mjEQ_JOINT
        eq.objtype = mujoco.mjtObj.mjOBJ_JOINT
        eq.name1 = joint_names[i]
        eq.active = False
        eq.solref = (2 * dt, 1.0)
    model = spec.compile()
    data = mujoco.MjData(model)
    data.qpos[:] = q0
    data.qvel[:] = v0
    t0 = time.perf_counter()
    step, n_end = 0, int(round(horizon / dt))
    for t, i in locks:
        while step < int(round(t / dt)):
            mujoco.mj_step(model, data)
            step += 1
        eid = model.equality(f"lock{i}").id
        model.eq_data[eid, :5] = [data.qpos[model.jnt_qposadr[i]], 0, 0, 0, 0]
        data.eq_active[eid] = 1
    while step < n_end:
        mujoco.mj_step(model, data)
        step += 1
    return time.perf_counter() - t0


def main() -> None:
    rng = np.random.default_rng(0)
    print("== one activation solve (second lock on top of a first), best of 5 x 200 [us]")
    for name, urdf in (("planar 3R", PLANAR_3R), ("UR5", UR5)):
        res = bench_transition(RobotModel.from_urdf_file(urdf), rng)
        print(f"  {name:10s} " + "  ".join(f"{m}={t * 1e6:7.1f}" for m, t in res.items()))
    print("== one right-hand-side evaluation with two joints locked [us]")
    for name, urdf in (("planar 3R", PLANAR_3R), ("UR5", UR5)):
        res = bench_rhs(RobotModel.from_urdf_file(urdf), rng)
        print(f"  {name:10s} " + "  ".join(f"{m}={t * 1e6:6.1f}" for m, t in res.items()))
    print("== one simulated second of the locking scenario (wall time per simulated second [s])")
    for name, (urdf, q0, v0, locks, horizon) in SCENARIOS.items():
        rk4 = run_ours(urdf, q0, v0, locks, horizon, "rk4") / horizon
        adaptive = run_ours(urdf, q0, v0, locks, horizon, "adaptive") / horizon
        mj = run_mujoco(urdf, q0, v0, locks, horizon) / horizon
        print(f"  {name:20s} ours RK4 1e-4 s: {rk4:.3f}  ours adaptive: {adaptive:.3f}  MuJoCo RK4 1e-4 s: {mj:.3f}"
              f"  ratio RK4 ours/MuJoCo: {rk4 / mj:.1f}  adaptive/MuJoCo: {adaptive / mj:.2f}")


if __name__ == "__main__":
    main()
