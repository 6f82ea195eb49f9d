"""URDF text of scalable overconstrained mechanisms, assembled at the neutral configuration (for benches and tests).

* :func:`comb_urdf`: a planar comb of k equal cranks pivoted on the ground and all pinned to one coupler (k − 1
  parallelogram loops sharing the coupler): k + 1 bodies, mobility 1, in planar mode p = k − 2.
* :func:`random_mechanism_urdf`: a random tree (link i hangs on a link between i/2 and i, so the depth grows as
  log(bodies); revolute and prismatic joints, random offsets and axes) with random
  loop closures (revolute, prismatic, spherical, fixed) between nearby links (index distance ≤ 8) and, in planar mode, random knife
  edges. Every closure frame is placed where the two links already are at q = 0, so the model is assembled
  exactly there (residual at rounding level) whatever the redundancy; a seed gives the same text every time.

Lengths in metres, angles in radians; inertias are nominal (the analysis does not use them).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

_INERTIAL = ('<inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/>'
             '</inertial>')
_LIMIT = '<limit lower="-3" upper="3" effort="1" velocity="1"/>'


def comb_urdf(k: int, spacing: float = 0.1, crank: float = 0.2) -> str:
    """URDF of k ≥ 2 cranks (revolute on the ground, along +y) pinned to one coupler along x (loop closures)."""
    if k < 2:
        raise ValueError(f"k: a comb needs at least 2 cranks, got {k}")
    parts = ['<robot name="comb"><link name="world"/>', f'<link name="coupler">{_INERTIAL}</link>']
    for i in range(k):
        parts.append(f'<link name="crank_{i}">{_INERTIAL}</link>')
        parts.append(f'<joint name="O{i}" type="revolute"><parent link="world"/><child link="crank_{i}"/>'
                     f'<origin xyz="{i * spacing} 0 0"/><axis xyz="0 0 1"/>{_LIMIT}</joint>')
    parts.append(f'<joint name="A0" type="revolute"><parent link="crank_0"/><child link="coupler"/>'
                 f'<origin xyz="0 {crank} 0"/><axis xyz="0 0 1"/>{_LIMIT}</joint>')
    for i in range(1, k):
        parts.append(f'<loop_closure name="A{i}" type="revolute"><parent link="coupler"/><child link="crank_{i}"/>'
                     f'<origin xyz="{i * spacing} 0 0"/><child_origin xyz="0 {crank} 0"/><axis xyz="0 0 1"/>'
                     '</loop_closure>')
    parts.append("</robot>")
    return "".join(parts)


def _f(x) -> str:
    return " ".join(repr(float(v)) for v in x)


def _rotation(rng: np.random.Generator, planar: bool) -> np.ndarray:
    if planar:
        return pin.rpy.rpyToMatrix(0.0, 0.0, float(rng.uniform(-np.pi, np.pi)))
    return pin.rpy.rpyToMatrix(*rng.uniform(-np.pi, np.pi, 3))


def random_mechanism_urdf(bodies: int, seed: int, planar: bool = True, loops: int | None = None,
                          knife_edges: int | None = None) -> str:
    """URDF of a random overconstrained mechanism with ``bodies`` moving links, assembled at q = 0.

    ``loops`` loop closures (default bodies // 3 + 1) and, in planar mode, ``knife_edges`` (default bodies // 8).
    Planar mode: joint axes along z, prismatic axes and frame rotations in the xy-plane, so the model is planar.
    """
    if bodies < 1:
        raise ValueError(f"bodies: need at least 1, got {bodies}")
    rng = np.random.default_rng(seed)
    loops = bodies // 3 + 1 if loops is None else loops
    knife_edges = (bodies // 8 if planar else 0) if knife_edges is None else knife_edges
    names = ["world"] + [f"b{i}" for i in range(bodies)]
    pose = {"world": (np.eye(3), np.zeros(3))}
    parts = [f'<robot name="random_{bodies}_{seed}"><link name="world"/>']
    for i in range(bodies):
        child = names[i + 1]
        parent = names[int(rng.integers(i // 2, i + 1))]  # a bushy tree: depth grows as log(bodies)
        R = _rotation(rng, planar)
        xyz = rng.uniform(-1.0, 1.0, 3)
        if planar:
            xyz[2] = 0.0
        kind = "prismatic" if rng.random() < 0.2 else "revolute"
        if planar:
            axis = np.array([1.0, 0.0, 0.0]) if kind == "prismatic" else np.array([0.0, 0.0, 1.0])
        else:
            axis = rng.standard_normal(3)
            axis /= np.linalg.norm(axis)
        Rp, op = pose[parent]
        pose[child] = (Rp @ R, op + Rp @ xyz)
        parts.append(f'<link name="{child}">{_INERTIAL}</link>')
        parts.append(f'<joint name="j{i}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
                     f'<origin xyz="{_f(xyz)}" rpy="{_f(pin.rpy.matrixToRpy(R))}"/><axis xyz="{_f(axis)}"/>'
                     f'{_LIMIT}</joint>')
    kinds = ("revolute", "revolute", "prismatic", "spherical", "fixed")
    for c in range(loops):
        a = int(rng.integers(0, len(names) - 1))
        b = min(len(names) - 1, a + int(rng.integers(1, 9)))  # loops close between nearby links, as in machines
        a_name, b_name = names[int(a)], names[int(b)]
        Rw = _rotation(rng, planar)
        p = rng.uniform(-1.5, 1.5, 3)
        if planar:
            p[2] = 0.0
        kind = kinds[int(rng.integers(0, len(kinds)))]
        axis = np.array([0.0, 0.0, 1.0]) if kind == "revolute" else np.array([1.0, 0.0, 0.0])
        Ra, oa = pose[a_name]
        Rb, ob = pose[b_name]
        Rpa, Rpb = Ra.T @ Rw, Rb.T @ Rw
        parts.append(f'<loop_closure name="L{c}" type="{kind}"><parent link="{a_name}"/><child link="{b_name}"/>'
                     f'<origin xyz="{_f(Ra.T @ (p - oa))}" rpy="{_f(pin.rpy.matrixToRpy(Rpa))}"/>'
                     f'<child_origin xyz="{_f(Rb.T @ (p - ob))}" rpy="{_f(pin.rpy.matrixToRpy(Rpb))}"/>'
                     f'<axis xyz="{_f(axis)}"/></loop_closure>')
    for e in range(knife_edges):
        link = names[int(rng.integers(1, len(names)))]
        normal = np.zeros(3)
        normal[:2] = rng.standard_normal(2)
        normal /= np.linalg.norm(normal)
        point = rng.uniform(-0.5, 0.5, 3)
        point[2] = 0.0
        parts.append(f'<knife_edge name="K{e}" link="{link}"><origin xyz="{_f(point)}"/>'
                     f'<axis xyz="{_f(normal)}"/></knife_edge>')
    parts.append("</robot>")
    return "".join(parts)
