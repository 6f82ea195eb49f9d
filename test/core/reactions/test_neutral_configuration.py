"""At the neutral configuration the analysis needs no Pinocchio model: link poses are the URDF joint origins
composed from the root. Building Pinocchio's model costs more than linear time in the joints (4.9 s at 10,000
bodies, measured), more than the sparse analysis of an assembled model.

The reference poses are Pinocchio's own forward kinematics at ``pin.neutral``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from vtm_dynamics.core.reactions.absolute_coordinates import AbsoluteModelError, load_absolute_model, neutral_poses
from vtm_dynamics.core.reactions.mechanism_families import comb_urdf, random_mechanism_urdf
from vtm_dynamics.core.reactions.solvability import analyze_solvability
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

URDF = Path(__file__).resolve().parents[3] / "urdf"
MODELS = [f.name for f in sorted(URDF.glob("*.urdf"))]


def _pinocchio_poses(model) -> dict:
    pm = model.pin_model
    data = pm.createData()
    pin.forwardKinematics(pm, data, pin.neutral(pm))
    pin.updateFramePlacements(pm, data)
    return {link: data.oMf[model.frame_ids[link]] for link in model.bodies}


@pytest.mark.parametrize("text", [read_urdf_file(str(URDF / name)) for name in MODELS]
                         + [random_mechanism_urdf(60, 3, planar=False), comb_urdf(5)],
                         ids=MODELS + ["random_spatial_60", "comb_5"])
def test_neutral_poses_are_pinocchios_forward_kinematics_at_neutral(text):
    model = load_absolute_model(text, planar=False)
    composed = neutral_poses(model)
    reference = _pinocchio_poses(model)
    assert set(composed) == set(reference) | {"<ground>"}
    for link, M in reference.items():
        R, o = composed[link]
        np.testing.assert_allclose(R, M.rotation, atol=1e-12)
        np.testing.assert_allclose(o, M.translation, atol=1e-12)


def test_an_assembled_model_at_neutral_is_analysed_without_building_pinocchios_model():
    model = load_absolute_model(comb_urdf(30), planar=True)
    report = analyze_solvability(model, planar=True, method="sparse")
    assert "pin_model" not in vars(model)  # never built
    assert report.q is None and report.closure_residual < 1e-12
    assert report.redundancy == analyze_solvability(model, planar=True, method="dense").redundancy


def test_a_given_configuration_still_uses_pinocchio_and_is_reported():
    model = load_absolute_model(comb_urdf(4), planar=True)
    q = np.zeros(model.pin_model.nq)
    report = analyze_solvability(model, planar=True, q=q)
    assert report.q == tuple(q)


def test_inertias_are_read_when_first_needed_and_a_bad_one_names_its_link():
    text = comb_urdf(3).replace('<link name="crank_1"><inertial><mass value="1"/>',
                                '<link name="crank_1"><inertial><mass value="-2"/>', 1)
    assert '<mass value="-2"/>' in text  # the case: a negative mass the solvability analysis does not need
    model = load_absolute_model(text, planar=True)
    assert analyze_solvability(model, planar=True).redundancy >= 0
    with pytest.raises(AbsoluteModelError, match="crank_1.*mass: must not be negative"):
        model.inertias
