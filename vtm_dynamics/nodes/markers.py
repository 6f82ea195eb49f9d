"""RViz markers of a predicted stop: TCP path, rest pose, reaction arrows scaled by magnitude.

The array always starts with one DELETEALL marker, so that markers of an earlier prediction (e.g. more reaction
arrows for a longer chain) never linger. Namespaces (``ns``) group the marker kinds so that each can be toggled in
RViz's MarkerArray display:

========================  =========================================================================================
``tcp_path``              LINE_STRIP of the predicted TCP positions from the E-stop to rest
``tcp_start``/``tcp_rest``  SPHERE at the TCP position at the E-stop (green) and at rest (red)
``rest_pose``             LINE_STRIP through the joint origins at rest, and a SPHERE_LIST at the joints
``reaction_forces``       one ARROW per joint: force the joint transmits at rest, length = ``force_scale`` * |F|
``holding_torques``       one ARROW per joint along its axis: length = ``torque_scale`` * |holding torque|,
                          pointing along +axis for a positive torque
``summary``               TEXT_VIEW_FACING with stop time and distance; red, headed "NOT VALID: ...", for a
                          prediction that is not the robot's stop (past a joint limit, not at rest in the horizon)
========================  =========================================================================================

Inputs are plain arrays already expressed in ``frame_id`` (the model's root frame) [m, N, N m]; the nodes compute
them with the core model's kinematics. No physics here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

NAMESPACES = ("tcp_path", "tcp_start", "tcp_rest", "rest_pose", "reaction_forces", "holding_torques", "summary")


@dataclass(frozen=True)
class MarkerScales:
    """Display scales: ``force_scale`` [m/N], ``torque_scale`` [m/(N m)], ``line_width`` [m], ``sphere`` [m];
    arrows are clipped to ``max_arrow`` [m] so one large reaction does not hide the robot."""

    force_scale: float = 0.002
    torque_scale: float = 0.005
    line_width: float = 0.01
    sphere: float = 0.04
    max_arrow: float = 1.0


def point(p: Sequence[float]) -> Point:
    """A geometry_msgs/Point from three numbers [m]."""
    return Point(x=float(p[0]), y=float(p[1]), z=float(p[2]))


def color_rgba(r: float, g: float, b: float, a: float = 1.0) -> ColorRGBA:
    """A std_msgs/ColorRGBA (components 0..1)."""
    return ColorRGBA(r=float(r), g=float(g), b=float(b), a=float(a))


def new_marker(frame_id: str, stamp: Time, ns: str, mid: int, kind: int) -> Marker:
    """An ADD marker of type ``kind`` in namespace ``ns`` with id ``mid``, identity pose."""
    m = Marker()
    m.header.frame_id = frame_id
    m.header.stamp = stamp
    m.ns = ns
    m.id = mid
    m.type = kind
    m.action = Marker.ADD
    m.pose.orientation.w = 1.0
    m.frame_locked = False
    return m


def arrow_marker(frame_id: str, stamp: Time, ns: str, mid: int, start: np.ndarray, vec: np.ndarray, width: float,
                 color: ColorRGBA, max_len: float) -> Marker:
    """An ARROW from ``start`` along ``vec`` [m], shaft ``width`` [m], clipped to ``max_len`` [m]."""
    m = new_marker(frame_id, stamp, ns, mid, Marker.ARROW)
    length = float(np.linalg.norm(vec))
    if length > max_len:
        vec = vec * (max_len / length)
    m.points = [point(start), point(start + vec)]
    m.scale.x = width  # shaft diameter
    m.scale.y = 2.0 * width  # head diameter
    m.scale.z = 0.0  # default head length
    m.color = color
    return m


def _heat(fraction: float) -> ColorRGBA:
    """Blue (small) -> red (largest) for arrow colours."""
    f = float(np.clip(fraction, 0.0, 1.0))
    return color_rgba(f, 0.2, 1.0 - f, 0.9)


def stop_markers(
    frame_id: str,
    stamp: Time,
    tcp_path: np.ndarray,
    joint_origins_rest: np.ndarray,
    joint_axes_rest: np.ndarray,
    reaction_forces: np.ndarray | None,
    holding_torques: np.ndarray | None,
    summary: str = "",
    scales: MarkerScales = MarkerScales(),
    alert: bool = False,
) -> MarkerArray:
    """MarkerArray of one predicted stop.

    ``tcp_path`` (N, 3) [m]; ``joint_origins_rest`` and ``joint_axes_rest`` (k, 3) [m, unit]; ``reaction_forces``
    (k, 3) [N] in ``frame_id``; ``holding_torques`` (k,) [N m]; either may be None (not drawn). ``alert``: the
    summary is a warning (a prediction that is not a valid stop), drawn red instead of white.
    """
    out = MarkerArray()
    clear = Marker()
    clear.header.frame_id = frame_id
    clear.header.stamp = stamp
    clear.action = Marker.DELETEALL
    out.markers.append(clear)

    tcp_path = np.asarray(tcp_path, dtype=float).reshape(-1, 3)
    if len(tcp_path):
        path = new_marker(frame_id, stamp, "tcp_path", 0, Marker.LINE_STRIP)
        path.points = [point(p) for p in tcp_path]
        if len(path.points) == 1:
            path.points.append(path.points[0])
        path.scale.x = scales.line_width
        path.color = color_rgba(1.0, 0.55, 0.0)
        out.markers.append(path)
        for ns, p, c in (("tcp_start", tcp_path[0], color_rgba(0.1, 0.8, 0.1)), ("tcp_rest", tcp_path[-1], color_rgba(0.9, 0.1, 0.1))):
            s = new_marker(frame_id, stamp, ns, 0, Marker.SPHERE)
            s.pose.position = point(p)
            s.scale.x = s.scale.y = s.scale.z = scales.sphere
            s.color = c
            out.markers.append(s)

    origins = np.asarray(joint_origins_rest, dtype=float).reshape(-1, 3)
    axes = np.asarray(joint_axes_rest, dtype=float).reshape(-1, 3)
    if len(origins):
        chain = new_marker(frame_id, stamp, "rest_pose", 0, Marker.LINE_STRIP)
        chain.points = [point(p) for p in origins] + ([point(tcp_path[-1])] if len(tcp_path) else [])
        if len(chain.points) == 1:
            chain.points.append(chain.points[0])
        chain.scale.x = 1.5 * scales.line_width
        chain.color = color_rgba(0.9, 0.1, 0.1, 0.6)
        out.markers.append(chain)
        joints = new_marker(frame_id, stamp, "rest_pose", 1, Marker.SPHERE_LIST)
        joints.points = [point(p) for p in origins]
        joints.scale.x = joints.scale.y = joints.scale.z = 0.75 * scales.sphere
        joints.color = color_rgba(0.9, 0.1, 0.1, 0.6)
        out.markers.append(joints)

    if reaction_forces is not None and len(origins):
        forces = np.asarray(reaction_forces, dtype=float).reshape(-1, 3)
        mags = np.linalg.norm(forces, axis=1)
        top = float(mags.max()) if len(mags) and mags.max() > 0 else 1.0
        for k, (o, f) in enumerate(zip(origins, forces)):
            out.markers.append(arrow_marker(frame_id, stamp, "reaction_forces", k, o, scales.force_scale * f,
                                      0.5 * scales.line_width * 2, _heat(mags[k] / top), scales.max_arrow))
    if holding_torques is not None and len(origins):
        tau = np.asarray(holding_torques, dtype=float).reshape(-1)
        top = float(np.abs(tau).max()) if len(tau) and np.abs(tau).max() > 0 else 1.0
        for k, (o, a, t) in enumerate(zip(origins, axes, tau)):
            out.markers.append(arrow_marker(frame_id, stamp, "holding_torques", k, o, scales.torque_scale * t * a,
                                      1.5 * scales.line_width, color_rgba(0.6, 0.0, 0.8 * abs(t) / top + 0.2, 0.9),
                                      scales.max_arrow))
    if summary:
        text = new_marker(frame_id, stamp, "summary", 0, Marker.TEXT_VIEW_FACING)
        anchor = tcp_path[-1] if len(tcp_path) else (origins[0] if len(origins) else np.zeros(3))
        text.pose.position = point(anchor + np.array([0.0, 0.0, 0.15]))
        text.scale.z = 0.06
        text.color = color_rgba(1.0, 0.1, 0.1) if alert else color_rgba(1.0, 1.0, 1.0)
        text.text = summary
        out.markers.append(text)
    return out
