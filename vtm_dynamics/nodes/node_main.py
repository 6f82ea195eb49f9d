"""The common ``main`` of the vtm_dynamics node executables: start, spin, shut down cleanly.

Before ``rclpy.init`` it applies the isolation defaults of ``graph.apply_isolation_defaults`` (DDS discovery on
this machine and sockets on loopback unless the user chose otherwise), so no node module changes the environment
at import. A node whose parameters or model are unusable, or whose middleware refuses to create it (e.g.
``ROS_SECURITY_ENABLE=true`` with a Fast DDS built without DDS-Security: it fails closed), does not start: one line
``<name>: cannot start: <reason>`` on stdout and exit status 2 (the reason names the parameter, field or cause).
Ctrl-C or an external shutdown ends with 0, at any moment (also while the node is still being made) and however
the race with the executor falls: when the shutdown (SIGINT
shuts the context down from rclpy's signal thread) invalidates a handle the executor is using at that moment, rclpy
raises from inside ``spin`` (e.g. ``RuntimeError: Unable to convert call argument '0' to Python object`` in
``_take_subscription``, seen in 1 of 8 shutdowns under ``ros2 launch``); an exception that escapes ``spin`` once
the shutdown has begun (or begins within ``RACE_WINDOW``: the signal's shutdown runs on another thread) is that race
and ends with 0 too. An exception while the context is still up is a defect:
it propagates with its traceback (exit status 1).

Once the node is made, its start-up heap is collected and frozen (``settle_heap``): Python's first full
(generation-2) garbage collection otherwise came 8-10 s after spin began and stopped every thread of the
predictor for 68-91 ms (measured with ``gc.callbacks`` under the latency bench's flood), long enough to push an
E-stop prediction past its latency target. Frozen objects are never traversed again, so later full collections
see only what was made since.
"""

from __future__ import annotations

import gc
import sys
import time
from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node

from vtm_dynamics.nodes.fastdds_profile import rcl_init_environment
from vtm_dynamics.nodes.graph import apply_isolation_defaults, one_line

#: What rcl raises when it cannot create the context or the participant (bad ROS_* variables, refused security).
MIDDLEWARE_ERRORS: tuple[type[BaseException], ...] = (_rclpy.RCLError,)
RACE_WINDOW = 1.0  # [s] an exception out of spin this shortly before the context reports its shutdown is the race


def run_node(name: str, factory: Callable[[], Node], startup_errors: tuple[type[BaseException], ...],
             args: list[str] | None = None, switch_interval: float | None = None) -> int:
    """Create the node with ``factory`` and spin it until shutdown; return the process exit status.
    ``switch_interval`` [s]: the process's thread switch interval, if shorter than the current one
    (``use_switch_interval``)."""
    if switch_interval is not None:
        use_switch_interval(switch_interval)
    for warning in apply_isolation_defaults():
        print(f"{name}: warning: {warning}", flush=True)
    try:
        with rcl_init_environment():  # the loopback profile, not rmw's all-interface UDP transport
            rclpy.init(args=args)
    except MIDDLEWARE_ERRORS as err:
        print(f"{name}: cannot start: {one_line(err, 500)}", flush=True)
        return 2
    except KeyboardInterrupt:  # Ctrl-C before the node exists: nothing to undo but the context
        rclpy.try_shutdown()
        return 0
    try:
        node = factory()
    except KeyboardInterrupt:  # Ctrl-C while the node is still being made (a slow start on a loaded machine)
        rclpy.try_shutdown()
        return 0
    except startup_errors as err:
        print(f"{name}: cannot start: {err}", flush=True)
        rclpy.try_shutdown()
        return 2
    except MIDDLEWARE_ERRORS as err:
        print(f"{name}: cannot start: {one_line(err, 500)}", flush=True)
        rclpy.try_shutdown()
        return 2
    try:
        settle_heap()  # inside: a Ctrl-C during the collection ends the node like one during its spin
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        if shutdown_began(node, within=RACE_WINDOW):
            pass  # the shutdown race described in the module docstring, not a defect
        else:
            raise
    finally:
        try:
            node.destroy_node()
        except Exception:
            if not shutdown_began(node, within=RACE_WINDOW):
                raise
        rclpy.try_shutdown()
    return 0


def settle_heap() -> int:
    """Collect the garbage of start-up and freeze what is left out of later collections (module docstring);
    returns how many objects are frozen now. Called by the executable once the node is made."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def use_switch_interval(seconds: float) -> None:
    """Shorten Python's thread switch interval to ``seconds`` (never lengthen it): a setting of the whole process,
    made by the executable that runs a node (never by a node's constructor or at import). A node whose workers
    compute in Python under the interpreter lock needs it short, or its callback thread waits up to the default
    5 ms for every hand-over of the lock while a worker predicts."""
    if sys.getswitchinterval() > seconds:
        sys.setswitchinterval(seconds)


def shutdown_began(node: Node, within: float = 0.0) -> bool:
    """The node's context is shut down or shutting down (Ctrl-C, ``rclpy.shutdown``, an external shutdown), or
    becomes so within ``within`` [s]: the signal's shutdown runs on another thread, and the handle it invalidates
    can raise in ``spin`` a moment before the context says so."""
    deadline = time.monotonic() + within
    while node.context.ok():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True
