"""Planned trajectories from YAML and CSV text (``trajectory_msgs/JointTrajectory`` semantics).

YAML: the message's fields, either at the top level or under ``joint_trajectory`` / ``trajectory``::

    joint_names: [shoulder_pan_joint, shoulder_lift_joint, ...]
    points:
      - {positions: [0.0, -1.2, ...], velocities: [0.0, 0.0, ...], time_from_start: 0.0}
      - {positions: [...], velocities: [...], accelerations: [...], time_from_start: {sec: 1, nanosec: 500000000}}

``time_from_start`` is seconds or a ``builtin_interfaces/Duration`` mapping (``sec``, ``nanosec``). Every point
carries the same fields (velocities on all points or none, likewise accelerations).

CSV: a header row ``time_from_start, q_<joint>..., [v_<joint>...], [a_<joint>...]`` and one row per point
(the column naming of ``vtm-predict --csv``).

Files are trusted configuration given on a command line; their text is still bounded (bytes before reading, YAML
depth and node count while parsing, rows while reading) and errors name the file by its base name, never quoting
its contents. A field never names another file. Units: s, rad (m), rad/s, rad/s^2.
"""

from __future__ import annotations

import csv
import io
import math
import os
from typing import Any, Mapping

from vtm_dynamics.core.bounded_file import NOT_REGULAR, TOO_LARGE, BoundedFileError, read_bounded_file
from vtm_dynamics.core.excerpt import clip
from vtm_dynamics.core.limited_yaml import load_yaml_text
from vtm_dynamics.core.stopsafe.scene import check_keys
from vtm_dynamics.core.stopsafe.trajectory import (
    MAX_JOINTS, MAX_POINTS, PlannedTrajectory, TrajectoryError, planned_trajectory,
)

MAX_TRAJECTORY_BYTES = 8 * 1024 * 1024  # ~30,000 points of a 7-joint arm with positions, velocities, accelerations
MAX_TRAJECTORY_YAML_NODES = 1_500_000  # PyYAML composes ~10^5 nodes per second: about 15 s at the cap
MAX_DURATION_SECONDS = 10 ** 9  # a Duration's sec field (the message allows int32)


def read_text_file(path: str, field: str, max_bytes: int, error: type[ValueError] = TrajectoryError) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes`` (:func:`vtm_dynamics.core.bounded_file.
    read_bounded_file`: checked on the open file before reading, a FIFO never waited for); one-line ``error``
    naming the file by its base name otherwise."""
    name = os.path.basename(str(path))
    if not isinstance(path, str):
        raise error(f"{field}: file not found: {clip(name, 120)}")
    try:
        return read_bounded_file(path, max_bytes).decode("utf-8")
    except FileNotFoundError:
        raise error(f"{field}: file not found: {clip(name, 120)}") from None
    except BoundedFileError as err:
        if err.why == NOT_REGULAR:
            raise error(f"{field}: not a regular file: {clip(name, 120)}") from None
        if err.why == TOO_LARGE:
            raise error(f"{field}: {clip(name, 120)} has {err.size} bytes, more than {max_bytes}") from None
        raise error(f"{field}: {clip(name, 120)} has more than {max_bytes} bytes") from None  # it grew
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or type(err).__name__
        raise error(f"{field}: cannot read {clip(name, 120)}: {reason}") from None


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, Mapping):
        check_keys(value, ("sec", "nanosec"), where, TrajectoryError)
        sec, nsec = value.get("sec", 0), value.get("nanosec", 0)
        for n, x in (("sec", sec), ("nanosec", nsec)):
            if isinstance(x, bool) or not isinstance(x, int):
                raise TrajectoryError(f"{where}.{n}: expected an integer")
        if not (0 <= sec <= MAX_DURATION_SECONDS and 0 <= nsec < 1_000_000_000):
            raise TrajectoryError(f"{where}: expected 0 <= sec <= {MAX_DURATION_SECONDS}, 0 <= nanosec < 1e9")
        return sec + nsec * 1e-9
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise TrajectoryError(f"{where}: expected seconds or {{sec, nanosec}}")
    return float(value)


def _vector(value: Any, n: int, where: str) -> list[float]:
    if not isinstance(value, (list, tuple)) or len(value) != n:
        raise TrajectoryError(f"{where}: expected {n} numbers (one per joint name)")
    out = []
    for k, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise TrajectoryError(f"{where}[{k}]: expected a number")
        out.append(float(x))
    return out


def same_fields(fields: tuple[str, ...] | None, have: tuple[str, ...], where: str) -> tuple[str, ...]:
    """The optional fields (``velocities``, ``accelerations``) every point of a trajectory carries: ``have`` of the
    point at ``where`` if it is the first (``fields`` None), else the first point's, and a point that carries other
    ones is refused (one interpolation for the whole trajectory: a point without velocities must not turn the
    others' cubics into straight lines)."""
    if fields is not None and have != fields:
        raise TrajectoryError(f"{where}: carries {', '.join(have) or 'positions only'} but the first point "
                              f"carries {', '.join(fields) or 'positions only'}")
    return have


def trajectory_from_mapping(data: Any, source: str = "trajectory", *, max_points: int = MAX_POINTS) -> PlannedTrajectory:
    """A :class:`PlannedTrajectory` from a ``JointTrajectory``-shaped mapping (see the module docstring)."""
    if isinstance(data, Mapping):
        for key in ("joint_trajectory", "trajectory"):
            if key in data and isinstance(data[key], Mapping):
                data = data[key]
                break
    if not isinstance(data, Mapping):
        raise TrajectoryError(f"{source}: expected a mapping with joint_names and points")
    check_keys(data, ("header", "joint_names", "points"), source, TrajectoryError)
    names = data.get("joint_names")
    if not isinstance(names, list) or not names or len(names) > MAX_JOINTS:
        raise TrajectoryError(f"{source}.joint_names: expected a list of 1..{MAX_JOINTS} joint names")
    points = data.get("points")
    if not isinstance(points, list) or not 2 <= len(points) <= max_points:
        raise TrajectoryError(f"{source}.points: expected a list of 2..{max_points} points")
    n = len(names)
    fields = None
    t, p, v, a = [], [], [], []
    for k, point in enumerate(points):
        where = f"{source}.points[{k}]"
        if not isinstance(point, Mapping):
            raise TrajectoryError(f"{where}: expected a mapping")
        check_keys(point, ("positions", "velocities", "accelerations", "effort", "time_from_start"), where,
                   TrajectoryError)
        have = fields = same_fields(fields, tuple(f for f in ("velocities", "accelerations")
                                                  if point.get(f) not in (None, [])), where)
        if "time_from_start" not in point:
            raise TrajectoryError(f"{where}.time_from_start: missing")
        t.append(_seconds(point["time_from_start"], f"{where}.time_from_start"))
        p.append(_vector(point.get("positions"), n, f"{where}.positions"))
        if "velocities" in have:
            v.append(_vector(point["velocities"], n, f"{where}.velocities"))
        if "accelerations" in have:
            a.append(_vector(point["accelerations"], n, f"{where}.accelerations"))
    return planned_trajectory(names, t, p, v or None, a or None, max_points=max_points)


def trajectory_from_yaml_text(text: str, source: str = "trajectory") -> PlannedTrajectory:
    """Parse YAML text (bounded: :data:`MAX_TRAJECTORY_BYTES`, depth 12, :data:`MAX_TRAJECTORY_YAML_NODES`)."""
    data = load_yaml_text(text, "trajectory", TrajectoryError, max_bytes=MAX_TRAJECTORY_BYTES, max_depth=12,
                          max_nodes=MAX_TRAJECTORY_YAML_NODES, source=source if source != "trajectory" else "")
    return trajectory_from_mapping(data, "trajectory")


def trajectory_from_csv_text(text: str, source: str = "trajectory", *, max_points: int = MAX_POINTS) -> PlannedTrajectory:
    """Parse CSV text: header ``time_from_start, q_<joint>..., [v_<joint>...], [a_<joint>...]``."""
    if len(text) > MAX_TRAJECTORY_BYTES:
        raise TrajectoryError(f"trajectory: {source}: more than {MAX_TRAJECTORY_BYTES} characters")
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise TrajectoryError(f"trajectory: {source}: empty CSV") from None
    except csv.Error:
        raise TrajectoryError(f"trajectory: {source}: not CSV") from None
    if not header or header[0] not in ("time_from_start", "t", "time"):
        raise TrajectoryError(f"trajectory: {source}: the first column must be time_from_start [s]")
    names = [h[2:] for h in header[1:] if h.startswith("q_")]
    if not names or len(names) > MAX_JOINTS:
        raise TrajectoryError(f"trajectory: {source}: expected 1..{MAX_JOINTS} q_<joint> columns")
    col = {h: k for k, h in enumerate(header)}
    if len(col) != len(header):
        raise TrajectoryError(f"trajectory: {source}: a column name appears twice")
    groups = {}
    for prefix in ("q_", "v_", "a_"):
        present = [n for n in names if prefix + n in col]
        if present and len(present) != len(names):
            missing = next(n for n in names if prefix + n not in col)
            raise TrajectoryError(f"trajectory: {source}: column {prefix}{clip(missing)} is missing")
        groups[prefix] = [col[prefix + n] for n in names] if present else None
    known = {0} | {k for g in groups.values() if g for k in g}
    stray = [header[k] for k in range(len(header)) if k not in known]
    if stray:
        raise TrajectoryError(f"trajectory: {source}: unknown column {clip(stray[0])!r}")
    rows: list[list[float]] = []
    try:
        for line, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(rows) >= max_points:
                raise TrajectoryError(f"trajectory: {source}: more than {max_points} rows")
            if len(row) != len(header):
                raise TrajectoryError(f"trajectory: {source}: line {line} has {len(row)} fields, the header {len(header)}")
            try:
                rows.append([float(c) for c in row])
            except ValueError:
                raise TrajectoryError(f"trajectory: {source}: line {line}: not a number") from None
    except csv.Error:
        raise TrajectoryError(f"trajectory: {source}: malformed CSV") from None
    if len(rows) < 2:
        raise TrajectoryError(f"trajectory: {source}: expected at least 2 rows")

    def take(idx):
        return None if idx is None else [[r[k] for k in idx] for r in rows]

    return planned_trajectory(names, [r[0] for r in rows], take(groups["q_"]), take(groups["v_"]),
                              take(groups["a_"]), max_points=max_points)


def read_trajectory_file(path: str) -> PlannedTrajectory:
    """A trajectory from a ``.yaml``/``.yml`` or ``.csv`` file (trusted path from a command line)."""
    name = os.path.basename(str(path))
    text = read_text_file(path, "trajectory", MAX_TRAJECTORY_BYTES)
    if name.lower().endswith(".csv"):
        return trajectory_from_csv_text(text, clip(name, 120))
    if name.lower().endswith((".yaml", ".yml")):
        return trajectory_from_yaml_text(text, clip(name, 120))
    raise TrajectoryError(f"trajectory: {clip(name, 120)}: expected a .yaml, .yml or .csv file (or a bag folder)")
