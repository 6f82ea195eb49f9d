"""Shared helpers for tests that use real ROS 2 middleware (rclpy over Fast DDS on loopback).

conftest.py has already set ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, the loopback Fast DDS profile and a private
per-run ROS_DOMAIN_ID; subprocesses started through `ros_subprocess_env()` inherit all three.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from typing import Any, Callable

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ros_subprocess_env() -> dict[str, str]:
    """Environment for a child process: loopback-only discovery and sockets, the test run's private domain, the
    checkout importable."""
    env = dict(os.environ)
    assert env.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST"
    assert env.get("FASTDDS_DEFAULT_PROFILES_FILE", "").endswith("fastdds_localhost.xml")
    assert env.get("ROS_DOMAIN_ID", "").isdigit()
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def default_signals() -> None:
    """``preexec_fn`` of a child that a test stops with SIGINT: the default disposition, unblocked. A child
    inherits ignored and blocked signals from the test process, and what earlier tests in the same worker left
    there (a library's handler set to ignore, a blocked mask) would make it deaf to Ctrl-C."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


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


def call_until_answered(executor: Any, client: Any, request: Any, timeout: float = 60.0,
                        attempt: float = 2.0) -> Any:
    """The answer of ``client``'s service to ``request``, sent again every ``attempt`` seconds until one arrives or
    ``timeout`` passes (then None). For requests that may be served twice (a query, a refusal). Why: a service
    reads as ready once it hears requests, but its answers are dropped while its reply writer has not yet matched
    the client's reply reader (Fast DDS waits 100 ms for that, then drops the answer: ros2/rmw_fastrtps#418), and
    between processes on a loaded machine the match can take longer. A client that got one answer gets them all."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        future = client.call_async(request)
        if spin_until(executor, future.done, min(attempt, max(deadline - time.monotonic(), 0.0))):
            return future.result()
        client.remove_pending_request(future)
    return None


def declared_parameters(node: Any) -> dict[str, Any]:
    """Every declared parameter of ``node`` with its value, through the node's public API: what its
    ``list_parameters`` and ``get_parameters`` services answer (an uninitialized parameter would raise here)."""
    names = node.list_parameters([], 0).names
    return {p.name: p.value for p in node.get_parameters(names)}


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


# ----------------------------------------------------------------------------------------- sockets of a process
def _ipv4(hex_addr: str) -> str:
    """'0100007F' (host byte order as /proc/net/udp prints it on little-endian machines) -> '127.0.0.1'."""
    raw = bytes.fromhex(hex_addr)
    return ".".join(str(b) for b in (raw[::-1] if sys.byteorder == "little" else raw))


def _ipv6(hex_addr: str) -> str:
    import ipaddress

    words = [bytes.fromhex(hex_addr[i : i + 8]) for i in range(0, 32, 8)]
    raw = b"".join(w[::-1] if sys.byteorder == "little" else w for w in words)
    return str(ipaddress.IPv6Address(raw))


def inet_sockets(pid: int) -> list[tuple[str, str, int]]:
    """The IP sockets process ``pid`` holds, as (protocol, local address, local port), read from
    ``/proc/<pid>/fd`` (socket inodes) and ``/proc/<pid>/net/{udp,udp6,tcp,tcp6}``."""
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = []
    for proto in ("udp", "udp6", "tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{proto}", encoding="ascii") as f:
            rows = f.read().splitlines()[1:]
        for row in rows:
            cols = row.split()
            if len(cols) < 10 or cols[9] not in inodes:
                continue
            addr, port = cols[1].split(":")
            found.append((proto, _ipv4(addr) if len(addr) == 8 else _ipv6(addr), int(port, 16)))
    return found


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1 and IPv4-mapped loopback; the wildcard addresses 0.0.0.0 and :: are NOT loopback."""
    import ipaddress

    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def stop_process(proc: Any, timeout: float = 15.0) -> None:
    """End a process the test started, by its PID: terminate, then kill if it has not ended within ``timeout`` s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired; kill whatever kept it alive
        proc.kill()
        proc.wait(timeout=timeout)
