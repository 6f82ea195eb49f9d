"""Cylindrical pairs (Huang et al., eqs. (28)-(31)) and point contacts in the Taylor formulation.

A sleeve on a vertical bore (``cylindrical`` loop closure to the world) spins at ω about the bore and falls freely
along it; its centre of mass sits r off the axis. Newton-Euler gives the reaction in closed form: the force on the
sleeve is the centripetal one, f = −m ω² r (cos ωt, sin ωt, 0) (world = pair axes, the parent is the ground), and,
since the angular momentum about the centre of mass stays I_z ω z, the moment at the bore's pair point p is
n = (c − p) × f with c − p = (r cos ωt, r sin ωt, −g t²/2).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from vtm_dynamics.core.reactions.kkt_reactions import simulate_kkt
from vtm_dynamics.core.reactions.absolute_coordinates import load_absolute_model
from vtm_dynamics.core.reactions.taylor_reactions import prepare_mechanism, simulate_taylor

M, R_OFF, W0, G = 2.0, 0.1, 5.0, 9.81


def _sleeve(kind: str) -> str:
    axis = "0 0 1" if kind == "cylindrical" else "0 0 1"
    return f"""<?xml version="1.0"?>
<robot name="sleeve">
  <link name="world"/>
  <link name="sleeve">
    <inertial><origin xyz="{R_OFF} 0 0"/><mass value="{M}"/>
      <inertia ixx="0.02" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.01"/></inertial>
  </link>
  <joint name="float" type="floating"><parent link="world"/><child link="sleeve"/><origin xyz="0 0 1"/></joint>
  <loop_closure name="bore" type="{kind}">
    <parent link="world"/><child link="sleeve"/>
    <origin xyz="0 0 1"/><child_origin xyz="0 0 0"/><axis xyz="{axis}"/>
  </loop_closure>
</robot>"""


def _analytic(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = np.stack([R_OFF * np.cos(W0 * t), R_OFF * np.sin(W0 * t), -0.5 * G * t**2], axis=1)
    f = -M * W0**2 * np.stack([np.cos(W0 * t), np.sin(W0 * t), np.zeros_like(t)], axis=1) * R_OFF
    return f, np.cross(c, f)


@pytest.mark.parametrize("correction", ["none", "heun"])
def test_cylindrical_sleeve_reactions_match_newton_euler(correction):
    model = load_absolute_model(_sleeve("cylindrical"))
    labels = next(p.labels for p in model.pairs if p.name == "bore")
    assert len(labels) == 4  # 2 forces + 2 moments normal to the axis
    q0 = pin.neutral(model.pin_model)
    v0 = np.array([0.0, 0.0, 0.0, 0.0, 0.0, W0])  # spin about the bore through the frame origin
    mech = prepare_mechanism(model, q0)
    errs = []
    for dt in (2e-3, 1e-3):
        run = simulate_taylor(mech, q0, v0, dt, 0.4, correction=correction, every=int(round(0.05 / dt)))
        W = next(p.wrench_basis for p in model.pairs if p.name == "bore")
        w = run.pair("bore") @ W.T  # (K, 6) world axes (the pair frame is the ground's)
        f, n = _analytic(run.times)
        errs.append(max(np.abs(w[:, :3] - f).max(), np.abs(w[:, 3:] - n).max()))
    # N, N m (forces ~5 N); the literal scheme's motion error (first order) enters the moment arm as well
    assert errs[1] < (0.5 if correction == "none" else 0.1), errs
    assert 0.8 < np.log2(errs[0] / errs[1]) < 1.3  # first order, as everywhere
    kkt, _ = simulate_kkt(model, q0, v0, 1e-3, 0.4, every=50)
    f, n = _analytic(kkt.times)
    wk = kkt.pair("bore") @ W.T
    assert np.abs(wk[:, :3] - f).max() < 1e-6 and np.abs(wk[:, 3:] - n).max() < 1e-6


def test_point_on_line_reaction_acts_at_the_child_point():
    """The same sleeve as a point on the bore's line: a pure force at the child's point, no moment rows."""
    model = load_absolute_model(_sleeve("point_on_line"))
    q0 = pin.neutral(model.pin_model)
    v0 = np.array([0.0, 0.0, 0.0, 0.0, 0.0, W0])
    mech = prepare_mechanism(model, q0)
    run = simulate_taylor(mech, q0, v0, 1e-3, 0.2, correction="heun", every=50)
    kkt, _ = simulate_kkt(model, q0, v0, 1e-3, 0.2, every=50)
    assert run.pair("bore").shape[1] == 2
    assert np.abs(run.pair("bore") - kkt.pair("bore")).max() < 0.05
