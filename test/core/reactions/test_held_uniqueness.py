"""Which joint reactions are unique with some joints held: a tree always, a hyperstatic loop of held joints never,
a loop that holding one joint makes determinate yes and holding two no; the URDF's own drives are not constraints
of a held robot or of the controller, and a held joint the model lacks is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vtm_dynamics.core.reactions.held_uniqueness import held_joint_uniqueness
from vtm_dynamics.core.reactions.solvability_report import SolvabilityError

URDF = Path(__file__).resolve().parents[3] / "urdf"
SLIDER_CRANK_Q = np.array([0.6, -1.2])  # assembled point-on-plane slider crank


def _text(name: str) -> str:
    return (URDF / name).read_text(encoding="utf-8")


def _with_drive(text: str, joint: str) -> str:
    cut = text.rfind("</robot>")
    return text[:cut] + f'<driving_constraint name="drive_{joint}" joint="{joint}"/>' + text[cut:]


def test_a_tree_is_determinate_however_many_joints_are_held():
    text = _text("planar_3r.urdf")
    assert held_joint_uniqueness(text, np.zeros(3)) == {"joint1": True, "joint2": True, "joint3": True, "tip_joint": True}
    assert all(held_joint_uniqueness(text, np.zeros(3), locked=["joint2"]).values())


def test_a_parallelogram_held_by_its_brakes_is_hyperstatic():
    verdict = held_joint_uniqueness(_text("parallelogram_4bar.urdf"), np.array([0.3, -0.3, 0.3]))
    assert verdict == {"O1": False, "A1": False, "O2": False}


def test_holding_one_joint_of_a_mobility_one_loop_leaves_it_determinate_two_do_not():
    text = _text("slider_crank_point_on_plane.urdf")
    assert held_joint_uniqueness(text, SLIDER_CRANK_Q, locked=[]) == {"crank_joint": True, "rod_joint": True}
    assert held_joint_uniqueness(text, SLIDER_CRANK_Q, locked=["crank_joint"]) == {"crank_joint": True,
                                                                                    "rod_joint": True}
    assert not all(held_joint_uniqueness(text, SLIDER_CRANK_Q, locked=["crank_joint", "rod_joint"]).values())
    assert not all(held_joint_uniqueness(text, SLIDER_CRANK_Q).values())  # every brake closed: both held


def test_a_urdf_drive_is_not_a_constraint_of_the_held_mechanism():
    text = _text("slider_crank_point_on_plane.urdf")
    driven = _with_drive(text, "crank_joint")
    for locked in ([], ["crank_joint"], None):
        assert held_joint_uniqueness(driven, SLIDER_CRANK_Q, locked=locked) == \
            held_joint_uniqueness(text, SLIDER_CRANK_Q, locked=locked)


def test_a_held_joint_the_model_does_not_have_is_refused_in_one_line():
    for name in ("slider_crank_point_on_plane.urdf", "planar_3r.urdf"):
        with pytest.raises(SolvabilityError, match="^locked: 'crank,rod' is not a one-coordinate joint"):
            held_joint_uniqueness(_text(name), np.zeros(2 if "slider" in name else 3), locked=["crank,rod"])
