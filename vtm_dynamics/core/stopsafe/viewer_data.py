"""The worst stop of a trajectory check as plain data for plots and a 3-D viewer (world frame).

For every case of the worst sample: the stop's times and joint positions (model order), the TCP path and the joint
origins (the robot's skeleton) at the start and at rest; for the closest case also the path of the robot's witness
point (the nearest point of the closest link at the closest instant, carried along with its link) and the nearest
points. The stopping motion is the predicted one (Müller 2026, eqs. (3) and (22) through
:mod:`vtm_dynamics.core.estop`). Units: m, s, rad.
"""

from __future__ import annotations

import numpy as np

from vtm_dynamics.core.stopsafe.results import WorstStop
from vtm_dynamics.core.stopsafe.robot_geometry import RobotGeometry


def _part_of_link(geometry: RobotGeometry, link: str) -> int:
    for k, p in enumerate(geometry.parts):
        if p.link == link:
            return k
    return -1


def worst_stop_paths(geometry: RobotGeometry, worst: WorstStop, tcp_frame: str | None) -> dict:
    """JSON-ready dict of ``worst`` (module docstring)."""
    robot = geometry.robot
    tcp = None
    if tcp_frame is not None:
        f = robot.model.frames[robot.frame_id(tcp_frame)]
        tcp = (int(f.parentJoint), np.array(f.placement.translation))
    cases = []
    for k, p in enumerate(worst.predictions):
        Rs, ps = geometry.joint_poses(p.q)
        entry = {"case": k, "t_s": p.t.tolist(), "q": p.q.tolist(), "stopped": bool(p.stopped),
                 "skeleton_start": ps[0].tolist(), "skeleton_end": ps[-1].tolist()}
        if tcp is not None:
            entry["tcp_path"] = (ps[:, tcp[0]] + Rs[:, tcp[0]] @ tcp[1]).tolist()
        cases.append(entry)
    witness = None
    part = _part_of_link(geometry, worst.pair[0])
    if part >= 0 and worst.q_at is not None and np.all(np.isfinite(worst.points)):
        joint = geometry.parts[part].joint
        R0, p0 = geometry.joint_poses(worst.q_at[None])
        local = R0[0, joint].T @ (worst.points[0] - p0[0, joint])
        Rs, ps = geometry.joint_poses(worst.predictions[worst.case].q)
        witness = (ps[:, joint] + Rs[:, joint] @ local).tolist()
    return {"joint_names": list(robot.joint_names), "sample_time_s": worst.sample.time, "kind": worst.kind,
            "case": worst.case, "pair": list(worst.pair), "stop_instant_s": worst.stop_instant,
            "closest_points": worst.points.tolist(), "witness_path": witness, "cases": cases}
