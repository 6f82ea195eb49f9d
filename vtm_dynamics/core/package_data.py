"""The files shipped beside the Python package (``urdf/``, ``config/``): one place that knows where they are.

A source checkout keeps them in the repository root, next to the ``vtm_dynamics`` directory; a pip install or a
colcon (ament) build puts them in ``<prefix>/share/vtm_dynamics/``, the prefix being this Python's or one of
``AMENT_PREFIX_PATH``. Looked up in that order. Only names the package itself chooses are looked up here (a robot's
brake file from the robot catalogue, the Fast DDS profile, a shipped URDF): no message field or file content names
a file.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys

PACKAGE = "vtm_dynamics"


def data_directories(subdir: str) -> list[str]:
    """Where ``subdir`` (e.g. ``config``) of the package data may be, in the order they are tried."""
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    prefixes = [sys.prefix] + [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    return [os.path.join(checkout, subdir)] + [os.path.join(p, "share", PACKAGE, subdir) for p in prefixes]


def package_data_dir(subdir: str) -> str | None:
    """The first existing directory ``subdir`` of the package data (:func:`data_directories`), or None."""
    return next((d for d in data_directories(subdir) if os.path.isdir(d)), None)


def package_data_file(subdir: str, name: str) -> str | None:
    """The first existing file ``subdir/name`` of the package data, or None. ``name`` is a plain file name."""
    if not name or os.path.basename(name) != name or name in (".", ".."):
        return None
    return next((p for p in (os.path.join(d, name) for d in data_directories(subdir)) if os.path.isfile(p)), None)


def example_robot_data_share() -> str | None:
    """The ``share`` directory of the installed ``example-robot-data`` wheel (it holds ``example-robot-data/robots``
    and is what ``package://example-robot-data/...`` resolves in), or None when it is not installed. The wheel puts
    it in ``cmeel.prefix/share`` of the site-packages folder it is installed in: the absolute folders of
    ``sys.path`` are tried in order (a few ``stat`` calls), and only if none has it the wheel's metadata is asked
    (which lists every folder of ``sys.path``: 0.1-0.4 ms)."""
    for entry in sys.path:
        if entry and os.path.isabs(entry):
            share = os.path.join(entry, "cmeel.prefix", "share")
            if os.path.isdir(os.path.join(share, "example-robot-data", "robots")):
                return share
    try:
        dist = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        return None
    return str(dist.locate_file(os.path.join("cmeel.prefix", "share")))
