"""MuJoCo as an independent peer for brake stops (used by test_estop.py and bench/bench_estop.py).

The URDF is loaded by MuJoCo's own URDF importer after removing visual/collision geometry (their meshes are not
needed for dynamics) and joint <dynamics> tags; fixed joints are kept as separate bodies (fusestatic off).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import mujoco
import numpy as np


def mujoco_model_from_urdf(path: str, payload: tuple[float, str] | None = None,
                           fixed_joints: tuple[str, ...] = ()) -> mujoco.MjModel:
    """MuJoCo model of a URDF file without geometry; ``payload`` = (mass [kg], link name) adds a point mass body
    rigidly attached at that link's origin (matches vtm_dynamics.core.estop.payload.with_payload at a link frame);
    ``fixed_joints`` are turned into fixed joints (e.g. gripper fingers)."""
    root = ET.parse(path).getroot()
    for j in root.findall("joint"):
        if j.get("name") in fixed_joints:
            j.set("type", "fixed")
            for tag in ("limit", "axis", "mimic"):
                for e in j.findall(tag):
                    j.remove(e)
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for e in link.findall(tag):
                link.remove(e)
    for j in root.findall("joint"):
        for e in j.findall("dynamics"):
            j.remove(e)
    if payload is not None:
        mass, parent = payload
        link = ET.SubElement(root, "link", {"name": "vtm_payload"})
        inertial = ET.SubElement(link, "inertial")
        ET.SubElement(inertial, "origin", {"xyz": "0 0 0", "rpy": "0 0 0"})
        ET.SubElement(inertial, "mass", {"value": repr(float(mass))})
        ET.SubElement(inertial, "inertia", {k: "1e-9" if k in ("ixx", "iyy", "izz") else "0"
                                            for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")})
        joint = ET.SubElement(root, "joint", {"name": "vtm_payload_joint", "type": "fixed"})
        ET.SubElement(joint, "parent", {"link": parent})
        ET.SubElement(joint, "child", {"link": "vtm_payload"})
        ET.SubElement(joint, "origin", {"xyz": "0 0 0", "rpy": "0 0 0"})
    mj = ET.SubElement(root, "mujoco")
    ET.SubElement(mj, "compiler", {"fusestatic": "false", "discardvisual": "true", "balanceinertia": "false"})
    return mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"))


def mujoco_sliding_phase(model: mujoco.MjModel, brakes, q0, v0, t_end: float, dt: float = 1e-4):
    """Category-0 stop in MuJoCo (RK4, ``dt`` [s]) until ``t_end`` or the first zero crossing of a braked
    joint's velocity: each brake engages at its delay with an applied torque -sign(v) * sliding (sign frozen at
    engagement, like our sliding phase) and its viscous part as MuJoCo joint damping.
    Returns (times, q, v) arrays sampled every step and the time of the first crossing (or t_end)."""
    m = model
    m.opt.timestep = dt
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    m.dof_damping[:] = 0.0
    m.dof_frictionloss[:] = 0.0
    m.dof_armature[:] = 0.0
    d = mujoco.MjData(m)
    d.qpos[:] = q0
    d.qvel[:] = v0
    mujoco.mj_forward(m, d)
    n = m.nv
    engaged = np.zeros(n, dtype=bool)
    sign = np.zeros(n)
    ts, tl, vl = [0.0], [d.qpos.copy()], [d.qvel.copy()]
    steps = int(round(t_end / dt))
    for k in range(steps):
        t = k * dt
        for i in range(n):
            if brakes.braked[i] and not engaged[i] and t >= brakes.engage_delay[i] - 1e-12:
                engaged[i] = True
                sign[i] = np.sign(d.qvel[i])
                m.dof_damping[i] = brakes.viscous[i]
        d.qfrc_applied[:] = np.where(engaged, -sign * brakes.sliding_torque, 0.0)
        v_prev = d.qvel.copy()
        mujoco.mj_step(m, d)
        ts.append((k + 1) * dt)
        tl.append(d.qpos.copy())
        vl.append(d.qvel.copy())
        if np.any(engaged & (sign != 0) & (d.qvel * sign <= 0) & (v_prev * sign > 0)):
            break
    return np.array(ts), np.array(tl), np.array(vl)


def mujoco_full_stop(model: mujoco.MjModel, brakes, q0, v0, t_end: float, dt: float = 2e-4,
                     soft_friction: bool = False):
    """Whole category-0 stop in MuJoCo with the Coulomb part as joint ``frictionloss`` (MuJoCo's soft dry-friction
    constraint: stick and slip, static = sliding capacity) engaged at each brake's delay, the viscous part as
    damping; implicit-fast integrator. The friction constraint is made stiff (time constant 2 dt, 20 no-slip
    iterations); with MuJoCo's default soft friction the joints creep for a further ~0.2 s. The extended brake
    terms as MuJoCo can take them: the reflected rotor inertias as ``dof_armature``, the torque rise as a factor
    r(t) on the friction level and the damping, the Stribeck rise of the friction level at the velocity of the
    step start (explicit); without those terms the stop is the plain Coulomb + viscous one. ``soft_friction``: MuJoCo's
    default friction constraint instead (time constant 0.02 s, no no-slip iterations), under which a joint loaded by
    gravity below its friction creeps on at a steady speed (about 0.1 rad/s on a UR5). Returns (times, q, v)."""
    m = model
    m.opt.timestep = dt
    m.opt.noslip_iterations = 0 if soft_friction else 20
    m.dof_solref[:, 0] = 0.02 if soft_friction else 2 * dt
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    m.dof_damping[:] = 0.0
    m.dof_frictionloss[:] = 0.0
    m.dof_armature[:] = np.where(brakes.braked, brakes.armature, 0.0)
    d = mujoco.MjData(m)
    d.qpos[:] = q0
    d.qvel[:] = v0
    mujoco.mj_forward(m, d)
    ts, tl, vl = [0.0], [d.qpos.copy()], [d.qvel.copy()]
    stribeck = brakes.stribeck
    amplitude = np.where(stribeck, brakes.breakaway_torque - brakes.sliding_torque, 0.0)
    v_s = np.where(stribeck, brakes.stribeck_velocity, 1.0)
    rise = np.where(brakes.braked, brakes.rise_time, 0.0)
    extended = bool(stribeck.any() or np.any(rise > 0.0))
    steps = int(round(t_end / dt))
    for k in range(steps):
        t = k * dt
        on = brakes.braked & (t >= brakes.engage_delay - 1e-12)
        if extended:
            r = np.where(rise > 0.0, np.clip((t - brakes.engage_delay) / np.where(rise > 0.0, rise, 1.0), 0.0, 1.0),
                         1.0)
            level = brakes.sliding_torque + amplitude * np.exp(-(d.qvel / v_s) ** 2)
            m.dof_frictionloss[:] = np.where(on, r * level, 0.0)
            m.dof_damping[:] = np.where(on, r * brakes.viscous, 0.0)
        else:
            m.dof_frictionloss[:] = np.where(on, brakes.sliding_torque, 0.0)
            m.dof_damping[:] = np.where(on, brakes.viscous, 0.0)
        mujoco.mj_step(m, d)
        ts.append((k + 1) * dt)
        tl.append(d.qpos.copy())
        vl.append(d.qvel.copy())
    return np.array(ts), np.array(tl), np.array(vl)
