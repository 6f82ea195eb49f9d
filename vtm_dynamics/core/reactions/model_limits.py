"""Caps for loading a model for the solvability analysis, all following from one number, ``max_bodies``.

The text may hold ``URDF_BYTES_PER_BODY`` bytes per body (at least the parser's default), the tree 6 degrees of
freedom per body, and the tree may be at most ``MAX_TREE_DEPTH`` joints deep. Each check is linear in the text and
runs before Pinocchio sees it; each refusal is one line that names the cap to raise.
"""

from __future__ import annotations

from vtm_dynamics.core.reactions.absolute_coordinates import AbsoluteModel, AbsoluteModelError, load_absolute_model
from vtm_dynamics.core.robot.urdf_extension import DEFAULT_MAX_DOF, DEFAULT_MAX_URDF_BYTES

URDF_BYTES_PER_BODY = 4_000  # a link with visual, collision and inertial plus its joint: 1-2 kB; twice that
# Pinocchio's URDF parser recurses along the tree: a 5,000-joint chain crashed the process (SIGSEGV), 3,000 did
# not. Mechanisms are wide, not deep (a vehicle or a fixture: depth < 50). Checked only when max_bodies exceeds it.
MAX_TREE_DEPTH = 1_000


def _check_tree_depth(root) -> None:
    """Refuse a URDF tree deeper than ``MAX_TREE_DEPTH`` joints (linear time, before Pinocchio sees it)."""
    parent_of = {}
    for joint in root.findall("joint"):
        p, c = joint.find("parent"), joint.find("child")
        if p is not None and c is not None:
            parent_of[c.get("link", "")] = p.get("link", "")
    depth: dict[str, int] = {}
    for link in parent_of:
        path = []
        while link in parent_of and link not in depth and len(path) <= len(parent_of):
            path.append(link)
            link = parent_of[link]
        d = depth.get(link, 0)
        for node in reversed(path):
            d += 1
            depth[node] = d
            if d > MAX_TREE_DEPTH:
                raise AbsoluteModelError(f"urdf: the joint tree is more than {MAX_TREE_DEPTH} joints deep (a chain "
                                       "that long crashes the URDF parser); model long chains with loop closures")


def load_for_analysis(urdf: str, planar: bool, max_bodies: int) -> AbsoluteModel:
    """:func:`load_absolute_model` with the byte and degree-of-freedom caps scaled to ``max_bodies``.

    The link cap is the one that refuses an oversized model while it is parsed (before any model is built); the
    byte cap (``URDF_BYTES_PER_BODY`` per body, at least the parser's default) and the degree-of-freedom cap (6
    per body) follow from it so that ``max_bodies`` is the only number a user needs to set.
    """
    max_bytes = max(DEFAULT_MAX_URDF_BYTES, URDF_BYTES_PER_BODY * max(0, max_bodies))
    if isinstance(urdf, str) and len(urdf) > max_bytes:  # characters <= bytes: a cheap first look, no encoding
        raise AbsoluteModelError(
            f"urdf: {len(urdf)} characters of URDF text exceed what max_bodies = {max_bodies} allows ({max_bytes} "
            f"bytes: {URDF_BYTES_PER_BODY} per body, at least {DEFAULT_MAX_URDF_BYTES}); raise max_bodies for a "
            "larger model")
    checks = (_check_tree_depth,) if max_bodies > MAX_TREE_DEPTH else ()  # only then can a tree be that deep
    return load_absolute_model(urdf, planar=planar, max_bodies=max_bodies, max_bytes=max_bytes,
                               max_dof=max(DEFAULT_MAX_DOF, 6 * max(0, max_bodies)), root_checks=checks)
