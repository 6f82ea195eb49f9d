"""A private DDS domain for a demo or a test run: a random ``ROS_DOMAIN_ID`` that no other process on this machine
is using, reserved for the lifetime of this process, unless the user chose one with ``ROS_DOMAIN_ID``.

Two processes started at the same time never pick the same domain: each candidate is reserved with an advisory
lock on a file in the temporary directory (``flock``; released by the kernel when the process exits), and a domain
whose first RTPS discovery ports are already bound on this machine (by any ROS 2 / DDS process, ours or not) is
skipped. Pure Python, no rclpy: it runs before ``rclpy.init``.
"""

from __future__ import annotations

import errno
import os
import random
import socket
import tempfile
from dataclasses import dataclass
from typing import MutableMapping

DOMAIN_VARIABLE = "ROS_DOMAIN_ID"
#: Domain ids that work on Linux for any participant count with the default RTPS port mapping; 0 is avoided
#: because it is the default every unconfigured robot and tool uses.
PRIVATE_DOMAINS = range(1, 102)
#: The largest id rcl accepts on Linux with the default port mapping (ports stay below 65535).
MAX_DOMAIN_ID = 232
# RTPS port mapping (DDSI-RTPS 2.x, 9.6.1.1): PB + DG * domain + offset (+ PG * participant id for unicast)
_PB, _DG, _PG, _D0, _D1 = 7400, 250, 2, 0, 10
_PROBED_PARTICIPANTS = 4

_held: list[int] = []  # lock file descriptors kept open for the life of the process


@dataclass(frozen=True)
class DomainChoice:
    """The domain this process uses and where it came from: ``"environment"`` or ``"random"``."""

    domain_id: int
    source: str

    def describe(self) -> str:
        if self.source == "environment":
            return f"{DOMAIN_VARIABLE}={self.domain_id} (from the environment)"
        return (f"{DOMAIN_VARIABLE}={self.domain_id} (a private domain picked at random; "
                f"set {DOMAIN_VARIABLE} to choose)")


def parse_domain_id(text: str) -> int:
    """``ROS_DOMAIN_ID`` text -> int in 0..232; ``ValueError`` naming the variable otherwise."""
    try:
        value = int(text.strip(), 10)
    except ValueError:
        raise ValueError(f"{DOMAIN_VARIABLE}: must be an integer 0..{MAX_DOMAIN_ID} (got {text[:40]!r})") from None
    if not 0 <= value <= MAX_DOMAIN_ID:
        raise ValueError(f"{DOMAIN_VARIABLE}: must be an integer 0..{MAX_DOMAIN_ID} (got {value})")
    return value


def choose_domain(environ: MutableMapping[str, str] | None = None, rng: random.Random | None = None,
                  lock_dir: str | None = None) -> DomainChoice:
    """Keep a user-set ``ROS_DOMAIN_ID`` (an empty value counts as unset), else pick a free private domain,
    reserve it and write it into ``environ``. Raises ``ValueError`` for a malformed value and ``RuntimeError``
    when every private domain is taken."""
    env = os.environ if environ is None else environ
    text = env.get(DOMAIN_VARIABLE, "")
    if text.strip():
        value = parse_domain_id(text)
        env[DOMAIN_VARIABLE] = str(value)
        return DomainChoice(value, "environment")
    rng = rng or random.SystemRandom()
    candidates = list(PRIVATE_DOMAINS)
    rng.shuffle(candidates)
    for domain in candidates:
        fd = _reserve(domain, lock_dir or tempfile.gettempdir())
        if fd is None:
            continue
        if _domain_ports_in_use(domain):
            os.close(fd)
            continue
        _held.append(fd)
        env[DOMAIN_VARIABLE] = str(domain)
        return DomainChoice(domain, "random")
    raise RuntimeError(f"{DOMAIN_VARIABLE}: every private domain {PRIVATE_DOMAINS.start}..{PRIVATE_DOMAINS.stop - 1} "
                       "is in use on this machine; set it explicitly")


def _reserve(domain: int, lock_dir: str) -> int | None:
    """An open descriptor holding an exclusive ``flock`` on this domain's lock file, or None if another process
    holds it (or locking is impossible here, in which case the port probe alone decides)."""
    import fcntl

    path = os.path.join(lock_dir, f"vtm-ros-domain-{domain}.lock")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError:
        return os.open(os.devnull, os.O_RDONLY)  # e.g. a lock file of another user without read access
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        return os.open(os.devnull, os.O_RDONLY)
    return fd


def _domain_ports_in_use(domain: int) -> bool:
    """True if the discovery multicast port or the unicast discovery port of one of the first participants of
    ``domain`` is bound on loopback or on all interfaces (nothing is sent)."""
    base = _PB + _DG * domain
    ports = [base + _D0] + [base + _D1 + _PG * i for i in range(_PROBED_PARTICIPANTS)]
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return True
    return False
