"""Which reaction components are unique depends on the configuration, so vtm-reactions decides it at every sample:
three equal parallel cranks carrying one coupler (a planar parallelogram with a redundant third crank) have one
self-stress, forces along the cranks. With the cranks upright the coupler-frame x components of the coupler pins are
perpendicular to it and unique; once the cranks have turned they are not. The run used to decide once, at the
start pose, and printed minimum-norm picks for them at every later sample with exit 0."""

from __future__ import annotations

import csv

import numpy as np

from vtm_dynamics.cli.reactions import main
from vtm_dynamics.core.reactions.absolute_coordinates import constraint_matrix, load_absolute_model

CRANK, PITCH = 0.25, 0.4  # [m] crank length, distance between the ground pivots
UPRIGHT = "0 0 1.5707963267948966"


def _link(name: str, cx: float, mass: float) -> str:
    return (f'<link name="{name}"><inertial><origin xyz="{cx} 0 0"/><mass value="{mass}"/>'
            '<inertia ixx="0.02" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial></link>')


def _pin(name: str, parent: str, child: str, xyz: str, rpy: str = "0 0 0") -> str:
    return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="0 0 1"/>'
            '<limit lower="-50" upper="50" effort="10" velocity="10"/></joint>')


def _closure(name: str, k: int) -> str:
    return (f'<loop_closure name="{name}" type="revolute"><parent link="coupler"/><child link="crank{k}"/>'
            f'<origin xyz="{(k - 1) * PITCH} 0 0"/><child_origin xyz="{CRANK} 0 0"/><axis xyz="0 0 1"/>'
            '</loop_closure>')


def triple_crank_urdf() -> str:
    """Cranks upright at q = 0 (each crank's x axis along world +y); the coupler hangs on crank 1 by the joint P1
    and on cranks 2 and 3 by loop closures P2, P3 whose pair frame is the coupler's, which never turns."""
    return ('<?xml version="1.0"?><robot name="three_cranks"><link name="base"/>'
            + "".join(_link(f"crank{k}", CRANK / 2, 0.8) for k in (1, 2, 3)) + _link("coupler", PITCH, 1.5)
            + _pin("G1", "base", "crank1", "0 0 0", UPRIGHT)
            + _pin("P1", "crank1", "coupler", f"{CRANK} 0 0", "0 0 -1.5707963267948966")
            + _pin("G2", "base", "crank2", f"{PITCH} 0 0", UPRIGHT)
            + _pin("G3", "base", "crank3", f"{2 * PITCH} 0 0", UPRIGHT)
            + _closure("P2", 2) + _closure("P3", 3) + "</robot>")


def test_a_component_unique_only_at_the_start_pose_is_left_empty_once_the_mechanism_has_moved(tmp_path, capsys):
    urdf = tmp_path / "three_cranks.urdf"
    urdf.write_text(triple_crank_urdf())
    out = tmp_path / "run.csv"
    # the cranks turn together at 0.8 rad/s (the coupler translates: P1 turns back by as much)
    assert main([str(urdf), "--planar", "--gravity", "0", "-9.81", "0", "--v", "0.8", "-0.8", "0.8", "0.8",
                 "--duration", "0.6", "--dt", "2e-3", "--formulation", "kkt", "--formulation", "taylor-heun",
                 "--csv", str(out)]) == 0
    table = list(csv.DictReader(open(out)))
    for form in ("kkt", "taylor-heun"):
        rows = [r for r in table if r["formulation"] == form]
        first, last = rows[0], rows[-1]
        assert first["P2.Fx"] != "", form  # unique with the cranks upright
        assert last["P2.Fx"] == "" and last["P3.Fx"] == "" and last["P1.Fx"] == "", form
    # independently: with the cranks turned (here by 0.3 rad) C has a self-stress in which P2's Fx takes part
    model = load_absolute_model(urdf.read_text(), planar=True)
    turned = {"G1": 0.3, "P1": -0.3, "G2": 0.3, "G3": 0.3}
    q = np.array([turned[n] for n in list(model.pin_model.names)[1:]])
    C = constraint_matrix(model, q)
    _, s, Vt = np.linalg.svd(C.matrix.T)
    assert s[-1] < 1e-9 * s[0] and s[-2] > 1e-3 * s[0]  # one self-stress
    p2 = next(pr for pr in C.pairs if pr.name == "P2")
    assert abs(Vt[-1][p2.rows[0]]) > 1e-3
    text = capsys.readouterr().out
    assert "P2" in text and "NO:" in text.split("P2", 1)[1].splitlines()[0]
