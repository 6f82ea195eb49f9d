"""Shared helpers for tests that use real ROS 2 middleware (rclpy over Fast DDS on loopback).

conftest.py has already set ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST and a per-run ROS_DOMAIN_ID; subprocesses
started through `ros_subprocess_env()` inherit both.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from typing import Any, Callable

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ros_subprocess_env() -> dict[str, str]:
    """Environment for a child process: loopback-only discovery, the test run's domain, the checkout importable."""
    env = dict(os.environ)
    assert env.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST"
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def python_executable() -> str:
    return sys.executable


def spin_until(executor: Any, condition: Callable[[], bool], timeout: float) -> bool:
    """Spin `executor` until `condition()` holds or `timeout` seconds pass; return whether it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        executor.spin_once(timeout_sec=0.05)
    return condition()


def message_class(type_name: str) -> type:
    """'pkg/Name' or 'pkg/msg/Name' -> the Python message class."""
    parts = type_name.split("/")
    package, name = parts[0], parts[-1]
    return getattr(importlib.import_module(f"{package}.msg"), name)


_SCALARS = {
    "boolean": lambda k: k % 2 == 1,
    "octet": lambda k: bytes([k % 256]),
    "char": lambda k: k % 128,
    "float": lambda k: 0.25 * k + 0.5,
    "double": lambda k: 1.0 / 3.0 + k * 1.25e-3,
    "int8": lambda k: -(k % 100),
    "uint8": lambda k: k % 7,
    "int16": lambda k: -k,
    "uint16": lambda k: k,
    "int32": lambda k: -1000 * k - 1,
    "uint32": lambda k: 1000 * k + 3,
    "int64": lambda k: -(10**12) - k,
    "uint64": lambda k: 10**12 + k,
    "string": lambda k: f"value-{k}-äöü",
}


def filled_message(cls: type, seed: int = 1) -> Any:
    """An instance of `cls` in which every field, recursively, holds a distinct non-default value.

    Sequences get two elements, so that a round trip also checks array lengths and element order.
    """
    msg = cls()
    for index, (field, type_str) in enumerate(sorted(msg.get_fields_and_field_types().items())):
        k = seed * 31 + index
        setattr(msg, field, _value(type_str, k))
    return msg


def _value(type_str: str, k: int) -> Any:
    if type_str.startswith("sequence<"):
        inner = type_str[len("sequence<") : -1].split(",")[0]
        values = [_value(inner, k), _value(inner, k + 17)]
        if inner in ("double", "float"):
            import array

            return array.array("d" if inner == "double" else "f", values)
        return values
    if type_str.startswith("string<"):
        return _value("string", k)
    if "[" in type_str:  # fixed-size array, e.g. double[36]
        inner, size = type_str[:-1].split("[")
        import numpy as np

        return np.array([_value(inner, k + i) for i in range(int(size))])
    if type_str in _SCALARS:
        return _SCALARS[type_str](k)
    if type_str == "builtin_interfaces/Time" or type_str == "builtin_interfaces/Duration":
        cls = message_class(type_str)
        return cls(sec=k, nanosec=(k * 7919) % 1_000_000_000)
    return filled_message(message_class(type_str), k)
