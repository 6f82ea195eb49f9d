"""What the guides say about the model is what the model does."""

from __future__ import annotations

import os

import yaml

from test.ros_helpers import REPO_ROOT


def _section(doc: str, heading: str) -> str:
    with open(os.path.join(REPO_ROOT, "docs", doc), encoding="utf-8") as fh:
        text = fh.read()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end > 0 else None]


def test_estop_left_out_does_not_list_terms_the_shipped_brakes_use():
    """docs/estop.md said rise time, rotor inertia and Stribeck friction are not modelled; the defaults use all
    three."""
    with open(os.path.join(REPO_ROOT, "config", "ur5_brakes.yaml"), encoding="utf-8") as fh:
        brakes = yaml.safe_load(fh)["brakes"]
    used = {k for spec in [brakes.get("defaults") or {}, *brakes["joints"].values()] for k in spec}
    assert {"rise_time", "armature", "breakaway_torque", "stribeck_velocity"} <= used
    section = _section("estop.md", "## Left out / limits")
    left_out = section.split("Left out:")[-1]  # what follows a "Modelled: ..." paragraph, if there is one
    for phrase in ("rise time", "Stribeck effect", "no velocity-dependent friction", "rotor inertia reflected"):
        assert phrase not in left_out, phrase
