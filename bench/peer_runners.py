"""Independent peers for the paper's 3R locking scenario (Müller 2026, Sec. 6): MuJoCo and Drake.

Both load the same ``urdf/planar_3r.urdf`` with their own URDF parsers and integrate with their own solvers:

* MuJoCo: RK4 at the same step, joint locks as ``mjEQ_JOINT`` equality constraints (q_j = lock angle) that are
  switched on at the event through ``MjData.eq_active``; MuJoCo's constraints are soft (solref/solimp), so the
  impact is spread over a few steps instead of being an instantaneous impulse.
* Drake: a discrete ``MultibodyPlant`` (time step = our step) and ``Joint.Lock(context)`` at the event. Drake's
  documentation of Lock says the joint's "generalized velocities will be 0 until it is unlocked"; what happens to
  the other joints' velocities at that instant is what the comparison measures.

The functions return states at the same sample times as ours (just before/after each lock and at the horizon).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np
from scenarios import HORIZON_3R as HORIZON  # one home for the paper's scenario (bench/scenarios.py)
from scenarios import LOCKS_3R as LOCKS
from scenarios import Q0_3R as Q0

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLANAR_3R = os.path.join(REPO, "urdf", "planar_3r.urdf")


@dataclass(frozen=True)
class PeerRun:
    """Samples: times [s], q [rad], v [rad/s]; ``labels`` name each sample; ``wall_time`` [s]."""

    name: str
    labels: tuple[str, ...]
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    wall_time: float


def _labels():
    out = []
    for t, j in LOCKS:
        out += [f"before lock {j} ({t:g} s)", f"after lock {j} ({t:g} s)"]
    return out + [f"horizon ({HORIZON:g} s)"]


def run_mujoco_3r(dt: float = 1e-4, integrator: str = "RK4", horizon: float = HORIZON,
                  solref: tuple[float, float] | None = None) -> PeerRun:
    import mujoco

    spec = mujoco.MjSpec.from_file(PLANAR_3R)
    spec.option.timestep = dt
    spec.option.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    for _, joint in LOCKS:
        eq = spec.add_equality()
        eq.name = f"lock_{joint}"
        eq.type = mujoco.mjtEq.mjEQ_JOINT
        eq.objtype = mujoco.mjtObj.mjOBJ_JOINT
        eq.name1 = joint
        eq.active = False
        # the stiffest reference MuJoCo accepts is a time constant of 2 steps (critically damped)
        eq.solref = solref if solref is not None else (2 * dt, 1.0)
        eq.solimp = (0.99, 0.999, 0.001, 0.5, 2.0)
    model = spec.compile()
    data = mujoco.MjData(model)
    data.qpos[:] = Q0
    data.qvel[:] = 0.0
    mujoco.mj_forward(model, data)
    ts, qs, vs = [], [], []
    t0 = time.perf_counter()
    step = 0
    for t_lock, joint in LOCKS:
        n = int(round(t_lock / dt))
        while step < n:
            mujoco.mj_step(model, data)
            step += 1
        ts.append(step * dt), qs.append(data.qpos.copy()), vs.append(data.qvel.copy())
        eid = model.equality(f"lock_{joint}").id
        jid = model.joint(joint).id
        model.eq_data[eid, :5] = [data.qpos[model.jnt_qposadr[jid]], 0, 0, 0, 0]
        data.eq_active[eid] = 1
        # the soft constraint needs a few steps to stop the joint: "after" is 10 steps (1 ms at 1e-4 s) later
        for _ in range(10):
            mujoco.mj_step(model, data)
            step += 1
        ts.append(step * dt), qs.append(data.qpos.copy()), vs.append(data.qvel.copy())
    n = int(round(horizon / dt))
    while step < n:
        mujoco.mj_step(model, data)
        step += 1
    wall = time.perf_counter() - t0
    ts.append(step * dt), qs.append(data.qpos.copy()), vs.append(data.qvel.copy())
    return PeerRun("MuJoCo eq_active", tuple(_labels()), np.array(ts), np.array(qs), np.array(vs), wall)


def run_drake_3r(dt: float = 1e-4, horizon: float = HORIZON, apply_jump: bool = False) -> PeerRun:
    """Drake with ``Joint.Lock`` at each event; with ``apply_jump`` the velocities right after the lock are
    replaced by the momentum-consistent jump of ``vtm_dynamics.core.switching.transitions`` (how a Drake user can get it)."""
    from pydrake.multibody.parsing import Parser
    from pydrake.multibody.plant import AddMultibodyPlantSceneGraph
    from pydrake.systems.analysis import Simulator
    from pydrake.systems.framework import DiagramBuilder

    builder = DiagramBuilder()
    plant, _ = AddMultibodyPlantSceneGraph(builder, time_step=dt)
    with open(PLANAR_3R, encoding="utf-8") as handle:
        Parser(plant).AddModelsFromString(handle.read(), "urdf")
    plant.WeldFrames(plant.world_frame(), plant.GetFrameByName("base_link"))
    plant.Finalize()
    diagram = builder.Build()
    sim = Simulator(diagram)
    ctx = sim.get_mutable_context()
    pctx = plant.GetMyMutableContextFromRoot(ctx)
    plant.SetPositions(pctx, Q0)
    plant.SetVelocities(pctx, np.zeros(3))
    sim.Initialize()
    ts, qs, vs = [], [], []
    t0 = time.perf_counter()
    for t_lock, joint in LOCKS:
        sim.AdvanceTo(t_lock)
        ts.append(ctx.get_time()), qs.append(plant.GetPositions(pctx).copy()), vs.append(plant.GetVelocities(pctx).copy())
        plant.GetJointByName(joint).Lock(pctx)
        if apply_jump:
            locked_before = [j for tl, j in LOCKS if tl < t_lock]
            v_plus = _consistent_jump(plant.GetPositions(pctx), vs[-1], locked_before, joint)
            plant.SetVelocities(pctx, v_plus)
        ts.append(ctx.get_time()), qs.append(plant.GetPositions(pctx).copy()), vs.append(plant.GetVelocities(pctx).copy())
    sim.AdvanceTo(horizon)
    wall = time.perf_counter() - t0
    ts.append(ctx.get_time()), qs.append(plant.GetPositions(pctx).copy()), vs.append(plant.GetVelocities(pctx).copy())
    name = "Drake Joint.Lock + vtm_dynamics jump" if apply_jump else "Drake Joint.Lock"
    return PeerRun(name, tuple(_labels()), np.array(ts), np.array(qs), np.array(vs), wall)


def _consistent_jump(q, v_minus, locked_before, joint):
    from vtm_dynamics.core.robot.constraints import JointLock
    from vtm_dynamics.core.robot.model import RobotModel
    from vtm_dynamics.core.switching.transitions import solve_activation

    robot = RobotModel.from_urdf_file(PLANAR_3R)
    before = [JointLock(j) for j in locked_before]
    return solve_activation(robot, q, v_minus, before, [JointLock(joint)])[0].v_plus


def run_ours_3r(transition: str = "kkt", dt: float = 1e-4, integrator: str = "rk4", horizon: float = HORIZON) -> PeerRun:
    from vtm_dynamics.core.robot.constraints import JointLock
    from vtm_dynamics.core.switching.integrator import TimeEvent, simulate
    from vtm_dynamics.core.robot.model import RobotModel

    robot = RobotModel.from_urdf_file(PLANAR_3R)
    events = [TimeEvent(t, JointLock(j)) for t, j in LOCKS]
    t0 = time.perf_counter()
    traj = simulate(robot, Q0, np.zeros(3), horizon, events, integrator=integrator, dt=dt, transition=transition,
                    record_every=10**9)
    wall = time.perf_counter() - t0
    idx = []
    for i in range(1, len(traj.t)):
        if traj.segment[i] != traj.segment[i - 1]:
            idx += [i - 1, i]
    idx.append(len(traj.t) - 1)
    name = {"kkt": "vtm_dynamics (consistent)", "naive": "vtm_dynamics (naive)"}.get(transition, transition)
    return PeerRun(name, tuple(_labels()), traj.t[idx], traj.q[idx], traj.v[idx], wall)


def free_momenta(q: np.ndarray, v: np.ndarray, free: list[int]) -> np.ndarray:
    """F^T M(q) v of the given free joints, evaluated with our model (the same M for every peer's state)."""
    from vtm_dynamics.core.robot.model import RobotModel

    robot = RobotModel.from_urdf_file(PLANAR_3R)
    return (robot.mass_matrix(q) @ v)[free]
