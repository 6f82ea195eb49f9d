"""Joint reactions along a motion by the Lagrange-multiplier (KKT) formulation, for comparison with the Taylor one.

Motion: the joint-coordinate model with its loop closures, integrated by Aghili's projection recipe
(:func:`vtm_dynamics.core.projection.simulation.constrained_step`: accelerations of eq. (25), classical RK4,
Newton position correction eq. (39), kinetic-energy velocity projection). Reactions at every sample, two ways:

* ``kkt``: the KKT system of the absolute coordinates, ``[[M, −Cᵀ], [C, 0]] [ν̇; λ] = [F − h; −Ċν]``
  (Wojtyra & Frączek 2013, eq. (11); :func:`solvability.unique_reactions`), the same M and C as the Taylor
  formulation (:mod:`taylor_reactions`), so ``λ`` has the same pair-frame components, labels and sign. Components
  that are not uniquely determined (redundant constraints) are NaN, never a picked value;
* ``aghili``: the loop closures' constraint forces from Aghili's eq. (32), ``F = (I − P) (f − h − M q̈)`` and the
  minimum-norm multipliers ``λ = A⁺ᵀF`` of the closure rows (``LoopClosure`` rows: v_B − v_A and, for revolute
  and fixed pairs, n_k·(ω_B − ω_A)), turned into the reaction on the child in the pair frame. Tree joints and
  the other closure types: NaN (their multipliers are not mapped here).

Layering: it composes the projection motion (``core/projection``) with the absolute-coordinate KKT reactions;
``core/reactions`` may import ``core/projection``, never the reverse (docs/architecture.md).

Units: SI. Motor efforts [N m, N] are generalized forces on the named tree joints, held over a step.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

import numpy as np

from vtm_dynamics.core.excerpt import excerpt
from vtm_dynamics.core.projection.simulation import ConstraintSet, constrained_dynamics, constrained_step
from vtm_dynamics.core.reactions.absolute_coordinates import (
    GROUND,
    AbsoluteModel,
    body_poses,
    closure_residuals,
    constraint_matrix,
)
from vtm_dynamics.core.reactions.solvability import analyze_constraint_matrix, unique_reactions
from vtm_dynamics.core.reactions.taylor_reactions import (
    DEFAULT_MAX_STEPS,
    Efforts,
    ReactionRun,
    TaylorError,
    efforts_at,
    check_run_size,
)
from vtm_dynamics.core.robot.constraints import LoopClosure, constraints_from_extension
from vtm_dynamics.core.robot.model import RobotModel


def without_drives(model: AbsoluteModel) -> AbsoluteModel:
    """The same model without its ``<driving_constraint>`` rows (a free mechanism under motor efforts)."""
    return replace(model, pairs=tuple(p for p in model.pairs if p.kind != "driving_constraint"))


def _efforts_vector(robot: RobotModel, efforts) -> np.ndarray:
    tau = np.zeros(robot.nv)
    for name, value in (efforts or {}).items():
        try:
            j = robot.joint(name)
        except (KeyError, ValueError):
            raise TaylorError(f"torques: {excerpt(str(name))} is not a joint of the model") from None
        tau[j.v_slice] = value
    return tau


def _applied_wrenches(model: AbsoluteModel, poses, efforts) -> np.ndarray:
    k = model.coordinates_per_body
    out = np.zeros(model.n_coordinates)
    joints = {j.name: j for j in model.tree_joints}
    col = {b: i * k for i, b in enumerate(model.bodies)}
    for name, tau in (efforts or {}).items():
        j = joints[name]
        R, o = poses[j.child]
        u = R @ np.asarray(j.axis)
        w = np.concatenate([np.zeros(3), tau * u]) if j.type != "prismatic" else np.concatenate([tau * u, np.zeros(3)])
        for link, sign in ((j.child, 1.0), (j.parent, -1.0)):
            b = GROUND if link == model.root_link else link
            if b == GROUND or b not in col:
                continue
            ww = sign * w.copy()
            if j.type == "prismatic":  # force through the child origin: moment about this body's origin
                ww[3:] = np.cross(o - poses[b][1], ww[:3])
            out[col[b]: col[b] + k] += ww[[0, 1, 5]] if model.planar else ww
    return out


def _aghili_reactions(model: AbsoluteModel, robot: RobotModel, closures, acc, q, cols, n_cols) -> np.ndarray:
    """Loop-closure reactions on the child, pair-frame components along W, from Aghili's eq. (32) multipliers."""
    out = np.full(n_cols, np.nan)
    lam = acc.multipliers
    if not acc.multipliers_unique:
        return out
    poses = body_poses(model, q)
    row = 0
    specs = {p.name: p for p in model.pairs}
    for c in closures:
        dim = c.dim(robot)
        lc = c.spec
        mult = lam[row: row + dim]
        row += dim
        spec = specs.get(lc.name)
        if spec is None or lc.type not in ("spherical", "revolute", "fixed"):
            continue
        Rp, _ = poses[spec.frame_link]
        R_pair = Rp @ spec.frame_offset.rotation()
        f = -mult[:3]  # rows v_B − v_A: the force on the child is −λ (world)
        m = np.zeros(3)
        if lc.type == "fixed":
            m = -mult[3:6]
        elif lc.type == "revolute":
            A_rot = R_pair
            a = np.asarray(lc.axis) / np.linalg.norm(lc.axis)
            helper = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
            n1 = np.cross(a, helper)
            n1 /= np.linalg.norm(n1)
            n2 = np.cross(a, n1)
            m = -(A_rot @ (mult[3] * n1 + mult[4] * n2))
        w = np.concatenate([R_pair.T @ f, R_pair.T @ m])
        a0, a1 = cols[lc.name]
        out[a0:a1] = spec.wrench_basis.T @ w
    return out


def simulate_kkt(
    model: AbsoluteModel, q0, v0, dt: float, duration: float, efforts: Efforts = None,
    gravity=(0.0, 0.0, -9.81), every: int = 1, progress: Callable[[float], None] | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> tuple[ReactionRun, ReactionRun]:
    """Run the joint-coordinate motion and return the ``kkt`` and the ``aghili`` reaction series (module docstring).

    ``model`` must not contain driving constraints (use :func:`without_drives`); ``q0, v0`` Pinocchio order.
    """
    if any(p.kind == "driving_constraint" for p in model.pairs):
        raise TaylorError("driving_constraint: the KKT run takes a free mechanism; drop the drives first")
    n_steps = check_run_size(dt, duration, max_steps)
    every = max(1, int(every))
    robot = RobotModel(model.pin_model.copy(), model.extension)
    robot = robot.with_gravity(gravity)
    closures = tuple(c for c in constraints_from_extension(robot) if isinstance(c, LoopClosure))
    cset = ConstraintSet(closures)
    C0 = constraint_matrix(model, q0)
    report = analyze_constraint_matrix(C0)
    cols, labels, start = {}, {}, 0
    for pr in C0.pairs:
        cols[pr.name] = (start, start + len(pr.rows))
        labels[pr.name] = pr.labels
        start += len(pr.rows)
    n_cols = start
    unique = {p.name: p.solvable for p in report.pairs}
    q, v = np.asarray(q0, dtype=float).copy(), np.asarray(v0, dtype=float).copy()
    samples: list = []
    cpu = 0.0
    for k in range(n_steps + 1):
        t = k * dt
        eff = efforts_at(efforts, t)
        tau = _efforts_vector(robot, eff)
        if k % every == 0 or k == n_steps:
            poses = body_poses(model, q)
            # which components are unique depends on the configuration: analysed at every sample, not at q0
            rep = unique_reactions(model, q=q, v=v, gravity=gravity, applied=_applied_wrenches(model, poses, eff))
            for pr in rep.pairs:
                unique[pr.name] = unique[pr.name] and pr.solvable
            lam = np.full(n_cols, np.nan)
            for pr in rep.pairs:
                a0, _ = cols[pr.name]
                for i, c in enumerate(pr.components):
                    if c is not None:
                        lam[a0 + i] = c
            acc = constrained_dynamics(robot, cset, q, v, tau)
            ag = _aghili_reactions(model, robot, closures, acc, q, cols, n_cols)
            x = np.array([poses[b][1] + poses[b][0] @ np.asarray(model.inertias[b].com) for b in model.bodies])
            R = np.array([poses[b][0] for b in model.bodies])
            energy = robot.kinetic_energy(q, v) + robot.potential_energy(q)
            res = closure_residuals(model, q)
            samples.append((t, lam, ag, x, R, energy, float(np.max(np.abs(res), initial=0.0))))
            if progress is not None:
                progress(t)
        if k == n_steps:
            break
        c0 = time.process_time()
        step = constrained_step(robot, cset, q, v, tau, dt)
        cpu += time.process_time() - c0
        q, v = step.q, step.v

    def run(name: str, idx: int) -> ReactionRun:
        return ReactionRun(name, dt, np.array([s[0] for s in samples]),
                           np.array([s[idx] for s in samples]).reshape(len(samples), -1), cols, labels, unique,
                           model.bodies, np.array([s[3] for s in samples]), np.array([s[4] for s in samples]),
                           np.array([s[5] for s in samples]), np.array([s[6] for s in samples]),
                           np.zeros(len(samples)), 0, cpu)

    return run("kkt", 1), run("aghili", 2)
