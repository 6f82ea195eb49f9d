"""Independent reference for the reaction formulations: Pinocchio dynamics integrated by scipy's DOP853.

Trees: ``pin.aba`` for the motion, ``pin.rnea``'s ``data.f`` for the joint reactions (the spatial force the parent
exerts on the child through each joint, joint frame = the child link frame for URDF). Closed chains: the spherical
loop closures become Pinocchio ``CONTACT_3D`` rigid constraints and ``pin.constraintDynamics`` gives accelerations
and contact forces; the tree joints' reactions come from ``pin.rnea`` with the contact forces as external forces.
Shared by the tests and bench/bench_reactions.py. Nothing here shares code with the formulations under test except the URDF reader of Pinocchio itself.

Free-flyer configurations are integrated in (translation, quaternion) with the exact kinematic map
q̇ = (R v, ½ quat ⊗ ω); the quaternion is renormalised before every evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from scipy.integrate import solve_ivp

from vtm_dynamics.core.robot.urdf_extension import parse_urdf_extension


@dataclass(frozen=True)
class Reference:
    times: np.ndarray
    q: np.ndarray  # (K, nq)
    v: np.ndarray  # (K, nv)
    reactions: dict  # pair name -> (K, 6) [F; M] on the child, pair frame, at the pair point
    energy: np.ndarray


def _qdot(model: pin.Model, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    out = np.zeros(model.nq)
    for j in model.joints[1:]:
        iq, iv = j.idx_q, j.idx_v
        if j.shortname() == "JointModelFreeFlyer":
            quat = pin.Quaternion(q[iq + 6], q[iq + 3], q[iq + 4], q[iq + 5])
            R = quat.toRotationMatrix()
            out[iq: iq + 3] = R @ v[iv: iv + 3]
            x, y, z, w = q[iq + 3: iq + 7]
            ox, oy, oz = v[iv + 3: iv + 6]
            out[iq + 3: iq + 7] = 0.5 * np.array([w * ox + y * oz - z * oy, w * oy + z * ox - x * oz,
                                                  w * oz + x * oy - y * ox, -x * ox - y * oy - z * oz])
        elif j.nq == 2:  # continuous: (cos, sin)
            c, s = q[iq], q[iq + 1]
            out[iq: iq + 2] = np.array([-s, c]) * v[iv]
        else:
            out[iq: iq + j.nq] = v[iv: iv + j.nv]
    return out


def _normalise(model: pin.Model, q: np.ndarray) -> np.ndarray:
    q = q.copy()
    pin.normalize(model, q)
    return q


class _Problem:
    def __init__(self, urdf: str, gravity, efforts: dict):
        self.model = pin.buildModelFromXML(urdf)
        self.model.gravity.linear[:] = np.asarray(gravity, dtype=float)
        self.data = self.model.createData()
        ext = parse_urdf_extension(urdf)
        self.closures = []
        self.contacts = []
        for lc in ext.loop_closures:
            if lc.type != "spherical":
                raise ValueError(f"reference: loop closure type {lc.type} is not supported")
            j1 = self.model.frames[self.model.getFrameId(lc.parent)].parentJoint
            j2 = self.model.frames[self.model.getFrameId(lc.child)].parentJoint
            f1 = self.model.frames[self.model.getFrameId(lc.parent)].placement
            f2 = self.model.frames[self.model.getFrameId(lc.child)].placement
            P1 = f1 * pin.SE3(np.eye(3), np.asarray(lc.parent_origin.xyz))
            P2 = f2 * pin.SE3(np.eye(3), np.asarray(lc.child_origin.xyz))
            cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, self.model, j1, P1, j2, P2, pin.LOCAL)
            cm.setBaumgarteCorrectorParameters(pin.BaumgarteCorrectorParameters(100.0, 20.0))
            self.contacts.append(cm)
            self.closures.append((lc.name, j1, P1, j2, P2))
        models = pin.StdVec_RigidConstraintModel()
        for c in self.contacts:
            models.append(c)
        self.contacts = models
        self.cdatas = pin.StdVec_RigidConstraintData()
        for c in models:
            self.cdatas.append(c.createData())
        if len(models):
            pin.initConstraintDynamics(self.model, self.data, models, self.cdatas)
        self.settings = pin.ProximalSettings(1e-14, 1e-12, 10)
        self.tau = np.zeros(self.model.nv)
        for name, value in (efforts or {}).items():
            jid = self.model.getJointId(name)
            self.tau[self.model.joints[jid].idx_v] = value

    def accelerations(self, q, v):
        if not len(self.contacts):
            return pin.aba(self.model, self.data, q, v, self.tau), []
        a = pin.constraintDynamics(self.model, self.data, q, v, self.tau, self.contacts, self.cdatas, self.settings)
        lam = np.array(self.data.lambda_c).copy()
        return np.array(a).copy(), [lam[3 * i: 3 * i + 3] for i in range(len(self.contacts))]

    def rhs(self, t, y):
        q = _normalise(self.model, y[: self.model.nq])
        v = y[self.model.nq:]
        a, _ = self.accelerations(q, v)
        return np.concatenate([_qdot(self.model, q, v), a])


def simulate_reference(urdf: str, q0, v0, duration: float, times, gravity=(0.0, 0.0, -9.81), efforts=None,
                       rtol: float = 1e-11, atol: float = 1e-11) -> Reference:
    """Tight DOP853 integration of the Pinocchio model; reactions at ``times`` (see the module docstring)."""
    P = _Problem(urdf, gravity, efforts or {})
    m, d = P.model, P.data
    y0 = np.concatenate([np.asarray(q0, float), np.asarray(v0, float)])
    sol = solve_ivp(P.rhs, (0.0, duration), y0, method="DOP853", rtol=rtol, atol=atol, dense_output=True)
    times = np.asarray(times, dtype=float)
    Q, V, E = [], [], []
    reactions: dict = {}
    names = [m.names[i] for i in range(1, m.njoints)]
    for t in times:
        y = sol.sol(t)
        q = _normalise(m, y[: m.nq])
        v = y[m.nq:]
        a, lams = P.accelerations(q, v)
        fext = [pin.Force.Zero() for _ in range(m.njoints)]
        pin.forwardKinematics(m, d, q, v, a)
        for (name, j1, P1, j2, P2), lam in zip(P.closures, lams):
            # contact force of CONTACT_3D (LOCAL): force on joint 1 at P1, in P1 axes; joint 2 gets the opposite
            f1 = P1.act(pin.Force(lam, np.zeros(3)))
            Rrel = (d.oMi[j2] * P2).rotation.T @ (d.oMi[j1] * P1).rotation
            f2 = P2.act(pin.Force(-Rrel @ lam, np.zeros(3)))
            fext[j1] = fext[j1] + f1
            fext[j2] = fext[j2] + f2
            reactions.setdefault(name, []).append(np.concatenate([-lam, np.zeros(3)]))  # on the child (joint 2)
        pin.rnea(m, d, q, v, a, fext)
        for i, name in enumerate(names, start=1):
            reactions.setdefault(name, []).append(np.array(d.f[i].vector).copy())
        Q.append(q)
        V.append(v)
        E.append(pin.computeKineticEnergy(m, d, q, v) + pin.computePotentialEnergy(m, d, q))
    return Reference(times, np.array(Q), np.array(V), {k: np.array(x) for k, x in reactions.items()}, np.array(E))


def body_frames(urdf: str, q: np.ndarray, links) -> tuple[np.ndarray, np.ndarray]:
    """Centres of mass (K, B, 3) [m] and link-frame rotations (K, B, 3, 3) of ``links`` along ``q`` (K, nq)."""
    m = pin.buildModelFromXML(urdf)
    d = m.createData()
    x = np.zeros((len(q), len(links), 3))
    R = np.zeros((len(q), len(links), 3, 3))
    for k, qk in enumerate(q):
        pin.forwardKinematics(m, d, qk)
        pin.updateFramePlacements(m, d)
        for b, link in enumerate(links):
            fid = m.getFrameId(link)
            fr = m.frames[fid]
            M = d.oMf[fid]
            x[k, b] = M.translation + M.rotation @ fr.placement.inverse().act(m.inertias[fr.parentJoint].lever)
            R[k, b] = M.rotation
    return x, R


def body_positions(urdf: str, q: np.ndarray, links) -> np.ndarray:
    """Centres of mass (K, B, 3) [m] of ``links`` along the configurations ``q`` (K, nq)."""
    return body_frames(urdf, q, links)[0]


def rotation_error(R: np.ndarray, R_ref: np.ndarray) -> float:
    """Largest rotation angle [rad] between two stacks of rotations (..., 3, 3) (by log3: exact for small angles)."""
    A = np.einsum("...ji,...jk->...ik", R, R_ref).reshape(-1, 3, 3)
    return float(max((np.linalg.norm(pin.log3(a)) for a in A), default=0.0))
