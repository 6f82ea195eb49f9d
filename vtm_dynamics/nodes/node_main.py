"""The common ``main`` of the vtm_dynamics node executables: start, spin, shut down cleanly.

Before ``rclpy.init`` it applies the isolation defaults of ``graph.apply_isolation_defaults`` (DDS discovery on
this machine and sockets on loopback unless the user chose otherwise), so no node module changes the environment
at import. A node whose parameters or model are unusable, or whose middleware refuses to create it (e.g.
``ROS_SECURITY_ENABLE=true`` with a Fast DDS built without DDS-Security: it fails closed), does not start: one line
``<name>: cannot start: <reason>`` on stdout and exit status 2 (the reason names the parameter, field or cause).
Ctrl-C or an external shutdown ends with 0.
"""

from __future__ import annotations

from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node

from vtm_dynamics.nodes.fastdds_profile import rcl_init_environment
from vtm_dynamics.nodes.graph import apply_isolation_defaults, one_line

#: What rcl raises when it cannot create the context or the participant (bad ROS_* variables, refused security).
MIDDLEWARE_ERRORS: tuple[type[BaseException], ...] = (_rclpy.RCLError,)


def run_node(name: str, factory: Callable[[], Node], startup_errors: tuple[type[BaseException], ...],
             args: list[str] | None = None) -> int:
    """Create the node with ``factory`` and spin it until shutdown; return the process exit status."""
    for warning in apply_isolation_defaults():
        print(f"{name}: warning: {warning}", flush=True)
    try:
        with rcl_init_environment():  # the loopback profile, not rmw's all-interface UDP transport
            rclpy.init(args=args)
    except MIDDLEWARE_ERRORS as err:
        print(f"{name}: cannot start: {one_line(err, 500)}", flush=True)
        return 2
    try:
        node = factory()
    except startup_errors as err:
        print(f"{name}: cannot start: {err}", flush=True)
        rclpy.try_shutdown()
        return 2
    except MIDDLEWARE_ERRORS as err:
        print(f"{name}: cannot start: {one_line(err, 500)}", flush=True)
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
