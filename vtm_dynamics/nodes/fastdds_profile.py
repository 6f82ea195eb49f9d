"""The Fast DDS profile shipped with vtm_dynamics (``config/fastdds_localhost.xml``) and how it is put in charge.

The profile binds UDPv4 to 127.0.0.1, keeps shared memory, turns Fast DDS's builtin all-interface transports off
and does LOCALHOST discovery itself (unicast to 127.0.0.1 initial peers, no multicast). ``graph.
apply_isolation_defaults`` points ``FASTDDS_DEFAULT_PROFILES_FILE`` at it.

Why ``rcl_init_environment`` exists: with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` rmw_fastrtps (Kilted) appends
its *own* UDPv4 transport, without an interface allowlist, to whatever the profile configures; that transport's
send sockets bind 0.0.0.0 and every LAN address. While ``rclpy.init`` reads the environment, the range is therefore
presented to rcl as ``SYSTEM_DEFAULT`` (rmw then leaves transports and discovery to the profile, which implements
LOCALHOST itself) and restored right after, so child processes and tools still see LOCALHOST. No rclpy import.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator, MutableMapping

from vtm_dynamics.core.package_data import package_data_file

PROFILE_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"
PROFILE_FILE = "fastdds_localhost.xml"
DISCOVERY_VARIABLE = "ROS_AUTOMATIC_DISCOVERY_RANGE"
STATIC_PEERS_VARIABLE = "ROS_STATIC_PEERS"


def fastdds_profile_path() -> str:
    """Absolute path of the loopback profile: ``config/`` of a source checkout, else
    ``<prefix>/share/vtm_dynamics/config`` of a pip or colcon install; "" if it is not installed."""
    return package_data_file("config", PROFILE_FILE) or ""


def is_loopback_profile(path: str) -> bool:
    """True when ``path`` is the shipped loopback profile: this install's file, or a byte-identical copy (another
    install or checkout of the suite hands its own path to the processes it starts)."""
    ours = fastdds_profile_path()
    if not path or not ours:
        return False
    if path == ours:
        return True
    try:
        with open(ours, "rb") as mine, open(path, "rb") as theirs:
            return mine.read() == theirs.read(1 << 20)
    except OSError:
        return False


def loopback_profile_active(environ: MutableMapping[str, str] | None = None) -> bool:
    """True when the shipped loopback profile is the one Fast DDS will load and discovery is LOCALHOST."""
    env = os.environ if environ is None else environ
    return (env.get(DISCOVERY_VARIABLE, "").strip().upper() == "LOCALHOST"
            and not env.get(STATIC_PEERS_VARIABLE, "").strip()
            and is_loopback_profile(env.get(PROFILE_VARIABLE, "")))


@contextmanager
def rcl_init_environment(environ: MutableMapping[str, str] | None = None) -> Iterator[None]:
    """Wrap ``rclpy.init``: with the loopback profile active, rcl sees ``SYSTEM_DEFAULT`` discovery (the profile
    does LOCALHOST discovery on loopback sockets only); otherwise nothing changes. The previous value is restored
    on exit, also after an exception."""
    env = os.environ if environ is None else environ
    if not loopback_profile_active(env):
        yield
        return
    previous = env[DISCOVERY_VARIABLE]
    env[DISCOVERY_VARIABLE] = "SYSTEM_DEFAULT"
    try:
        yield
    finally:
        env[DISCOVERY_VARIABLE] = previous
