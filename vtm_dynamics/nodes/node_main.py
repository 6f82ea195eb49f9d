"""The common ``main`` of the vtm_dynamics node executables: start, spin, shut down cleanly.

Before ``rclpy.init`` it applies the isolation defaults of ``graph.apply_isolation_defaults`` (DDS discovery on
this machine unless the user chose otherwise), so no node module changes the environment at import.
A node whose parameters or model are unusable does not start: one line ``<name>: cannot start: <reason>`` on
stdout and exit status 2 (the reason names the parameter or field). Ctrl-C or an external shutdown ends with 0.
"""

from __future__ import annotations

from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from vtm_dynamics.nodes.graph import apply_isolation_defaults


def run_node(name: str, factory: Callable[[], Node], startup_errors: tuple[type[BaseException], ...],
             args: list[str] | None = None) -> int:
    """Create the node with ``factory`` and spin it until shutdown; return the process exit status."""
    for warning in apply_isolation_defaults():
        print(f"{name}: warning: {warning}", flush=True)
    rclpy.init(args=args)
    try:
        node = factory()
    except startup_errors as err:
        print(f"{name}: cannot start: {err}", flush=True)
        rclpy.try_shutdown()
        return 2
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
