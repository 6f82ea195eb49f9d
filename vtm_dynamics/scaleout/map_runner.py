"""A workspace stopping map on Dask distributed: chunks as tasks, results written as they finish, resumable.

Why Dask distributed (not Ray): both are well kept, but ``dask`` + ``distributed`` are pure-Python wheels (about
25 MB installed against Ray's several-hundred-MB platform wheel with its own object store and raylet daemons), an
embedded ``LocalCluster`` starts in about a second inside the calling process, and an existing cluster is named by
its scheduler's plain ``tcp://host:port`` address, the same form ``dask scheduler`` prints.

The client submits one task per chunk not yet on disk (:class:`ChunkStore`), each depending on one task that holds
the job (URDF text, brake configuration, map spec; fetched once per worker, and computed again if every worker
holding it died); workers build their robot once per process and thread.
Each finished chunk is written by the client as it completes, so an interrupted run resumes by skipping the chunks
on disk; Dask reruns the tasks of a lost worker on the others. A chunk whose state cannot be predicted is reported
with its input (:class:`ChunkFailure`) and the rest completes; the combined file is written only when every chunk
is done. Results do not depend on the worker count or completion order: each chunk's states come from its own seed
(:func:`vtm_dynamics.core.stopping.workspace_map.chunk_states`).

Closed to everyone else (:func:`_client`): the local cluster's processes listen on 127.0.0.1 with TLS and credentials
made for the run, its threads on Dask's in-process transport; the HTTP servers Dask starts serve nothing and listen
on loopback. An existing scheduler's address is checked strictly and must answer within ``connect_timeout``. The
inputs hash holds the software that computes the rows (:func:`software_fingerprint`), and every chunk its content
checksum (:mod:`.chunk_store`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.warm_up import warm_up
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.stopping.map_summary import MapSummary
from vtm_dynamics.core.stopping.workspace_map import (
    ChunkFailure, MapInputError, MapSpec, check_map_spec, evaluate_chunk,
)
from vtm_dynamics.scaleout.chunk_store import ChunkStore, inputs_hash
from vtm_dynamics.scaleout.result_file import summarize_result
from vtm_dynamics.scaleout.settings import CONNECT_TIMEOUT

WORKER_WAIT = 30.0  # [s] how long a run waits for the first worker of a cluster
_ADDRESS = re.compile(r"(?P<scheme>tcp|tls)://(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|"
                      r"\[[0-9A-Fa-f:.]{2,45}\]):(?P<port>[0-9]{1,5})")


@dataclass(frozen=True)
class MapJob:
    """Everything a worker needs: ``urdf_text``, ``brake_config`` (dict with a ``brakes`` key), ``spec``."""

    urdf_text: str
    brake_config: dict
    spec: MapSpec

    def inputs(self) -> dict:
        """What the rows depend on: the model, the brakes, the map, and the software that computes it (the package
        version, a fingerprint of the physics' source, the numerical libraries and the engine's settings) - so a
        chunk from another engine is never mixed into a resumed map."""
        import hashlib

        return {"urdf_sha256": hashlib.sha256(self.urdf_text.encode()).hexdigest(),
                "brakes": self.brake_config, "spec": self.spec.as_dict(), "software": software_fingerprint()}


@dataclass(frozen=True)
class MapRun:
    """Outcome: ``path`` of the combined Parquet file (None while chunks failed), ``summary`` (None likewise),
    ``failures`` (dicts with chunk, state, q, v, reason), chunks ``computed`` now and ``skipped`` (already on
    disk), ``workers`` and wall ``seconds``."""

    path: str | None
    summary: MapSummary | None
    failures: tuple[dict, ...]
    computed: int
    skipped: int
    workers: int
    seconds: float
    inputs_hash: str


def software_fingerprint() -> dict:
    """The software a map's rows come from: package version, sha256 of the ``vtm_dynamics.core`` sources (the
    physics), the versions of numpy, scipy and Pinocchio, and the default engine settings the map uses."""
    import dataclasses
    import hashlib
    from importlib import metadata

    import vtm_dynamics
    from vtm_dynamics.core.estop.inputs import StopSettings

    core = os.path.join(os.path.dirname(os.path.abspath(vtm_dynamics.__file__)), "core")
    h = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(core)):
        dirs.sort()
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            h.update(os.path.relpath(path, core).encode() + b"\0")
            with open(path, "rb") as fh:
                h.update(fh.read())
    versions = {}
    for package in ("numpy", "scipy", "pin"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "unknown"
    return {"vtm_dynamics": vtm_dynamics.__version__, "core_sha256": h.hexdigest(), "libraries": versions,
            "engine_settings": dataclasses.asdict(StopSettings())}


def check_scheduler_address(address: str) -> str:
    """``tcp://HOST:PORT`` or ``tls://HOST:PORT`` exactly (nothing before or after, no trailing newline), or a
    one-line :class:`MapInputError`."""
    m = _ADDRESS.fullmatch(address) if isinstance(address, str) else None
    if m is None or not 1 <= int(m.group("port")) <= 65535:
        text = address if isinstance(address, str) else repr(address)
        shown = text if len(text) <= 80 else text[:80] + "..."
        raise MapInputError(f"scheduler: expected tcp://HOST:PORT or tls://HOST:PORT (port 1-65535), got {shown!r}")
    return address


def check_workers(workers: int | None, scheduler: str | None) -> None:
    """``workers`` of a local cluster: None (every core) or 1 to twice the machine's cores, and only without
    ``scheduler``; a one-line :class:`MapInputError` otherwise. Each worker runs one CPU-bound thread with its own
    robot and engine, so workers beyond the cores make no map faster and only cost memory and start-up."""
    if workers is None:
        return
    if scheduler is not None:
        raise MapInputError("workers: sets the local cluster; an existing cluster (scheduler) has the workers that "
                            "joined it")
    limit = 2 * (os.cpu_count() or 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= limit:
        raise MapInputError(f"workers: expected 1..{limit} (twice the cores of this machine), got {workers!r}")


def probe_scheduler(address: str, timeout: float, security: Any = None) -> None:
    """Reach the scheduler at ``address`` and hear it answer within ``timeout`` [s] (connection, handshake and an
    ``identity`` request, all bounded); a one-line :class:`MapInputError` otherwise. distributed's own client
    waits without end on a server that accepts the connection and stays silent."""
    import asyncio

    from distributed.comm import connect

    async def ask() -> Any:
        kwargs = security.get_connection_args("client") if security is not None else {}
        comm = await connect(address, timeout=timeout, **kwargs)
        try:
            await comm.write({"op": "identity"})
            return await comm.read()
        finally:
            comm.abort()

    try:
        reply = asyncio.run(asyncio.wait_for(ask(), timeout))
    except (OSError, asyncio.TimeoutError, TimeoutError) as err:
        raise MapInputError(f"scheduler: no answer from {address} within {timeout:g} s "
                            f"({type(err).__name__})") from None
    except Exception as err:  # noqa: BLE001 - a server that speaks something else
        raise MapInputError(f"scheduler: {address} is not a Dask scheduler ({type(err).__name__})") from None
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        raise MapInputError(f"scheduler: {address} is not a Dask scheduler")


# ------------------------------------------------------------------------------------------------ worker side
_local = threading.local()


def _worker_state(job: MapJob, digest: str) -> tuple[RobotModel, Any, dict]:
    cache = getattr(_local, "jobs", None)
    if cache is None:
        cache = _local.jobs = {}
    if digest not in cache:
        robot = RobotModel.from_urdf(job.urdf_text)
        brakes = brakes_from_config(robot, job.brake_config)
        warm_up(robot, brakes)  # the compiled engine loaded once per worker, not inside its first chunk
        cache.clear()
        cache[digest] = (robot, brakes, {})
    return cache[digest]


def job_of(job: MapJob) -> MapJob:
    """The task that holds the job on the cluster (its result is recomputed if the workers holding it die)."""
    return job


def run_chunk(job: MapJob, digest: str, chunk: int) -> dict[str, np.ndarray]:
    """The task: evaluate one chunk (raises :class:`ChunkFailure` with the failing state's input)."""
    robot, brakes, models = _worker_state(job, digest)
    return evaluate_chunk(robot, brakes, job.spec, chunk, models)


# ------------------------------------------------------------------------------------------------ client side
class Progress:
    """``done/total`` chunks, states per second and time left, as one refreshed line on ``stream``."""

    def __init__(self, stream: Any, total_states: int) -> None:
        self.stream, self.total, self.start, self.last = stream, total_states, time.monotonic(), 0.0

    def __call__(self, done_states: int, new_states: int, done_chunks: int, n_chunks: int) -> None:
        now = time.monotonic()
        if done_chunks < n_chunks and now - self.last < 0.2:
            return
        self.last = now
        rate = new_states / max(now - self.start, 1e-9)
        left = (self.total - done_states) / rate if rate > 0 else math.inf
        eta = f"{left:6.0f} s left" if math.isfinite(left) else "   ? s left"
        bar = "#" * int(30 * done_states / self.total)
        self.stream.write(f"\r[{bar:<30}] {done_chunks}/{n_chunks} chunks {done_states}/{self.total} states "
                          f"{rate:8.1f} states/s {eta}")
        if done_chunks == n_chunks:
            self.stream.write("\n")
        self.stream.flush()


def _client(scheduler: str | None, workers: int | None, threads: bool,
            connect_timeout: float = CONNECT_TIMEOUT) -> Any:
    """A client of the cluster at ``scheduler``, or of a local cluster closed to everyone else:

    * ``threads``: scheduler and workers are threads of this process talking over Dask's in-process transport
      (``inproc://``: no socket another process could reach);
    * processes: every listener (scheduler, nannies, workers) on 127.0.0.1 with TLS and temporary credentials made
      for this run (``Security.temporary``): a client without them - any other process - is refused.
    In both modes the HTTP servers Dask always starts listen on 127.0.0.1 only and serve no route (no dashboard,
    no status pages)."""
    import dask
    from distributed import Client, LocalCluster
    from distributed.security import Security

    if scheduler is not None:
        check_scheduler_address(scheduler)
        security = Security() if scheduler.startswith("tls://") else None  # credentials from the Dask config
        probe_scheduler(scheduler, connect_timeout, security)
        with dask.config.set({"distributed.comm.timeouts.connect": f"{connect_timeout}s"}):
            try:
                return Client(scheduler, timeout=f"{connect_timeout}s",
                              **({"security": security} if security is not None else {}))
            except (OSError, TimeoutError) as err:
                raise MapInputError(f"scheduler: cannot connect to {scheduler}: {type(err).__name__}") from None
    n = (os.cpu_count() or 1) if workers is None else workers
    # the HTTP servers Dask starts in any case serve nothing here (no dashboard, no routes) and listen on loopback
    no_routes = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
    loopback_http = {"dashboard_address": None, "worker_dashboard_address": "127.0.0.1:0",
                     "scheduler_kwargs": {"dashboard": False, "dashboard_address": "127.0.0.1:0"}}
    with dask.config.set(no_routes):
        if threads:
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=False, protocol="inproc://",
                                   silence_logs=logging.ERROR, **loopback_http)
            return Client(cluster)
        security = Security.temporary()
        with _children_ignore_ctrl_c():
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, protocol="tls://",
                                   host="127.0.0.1", security=security, silence_logs=logging.ERROR, **loopback_http)
        return Client(cluster, security=security)


@contextlib.contextmanager
def _children_ignore_ctrl_c() -> Iterator[None]:
    """Processes started inside ignore SIGINT (an ignored signal stays ignored in a child, and Python then installs
    no KeyboardInterrupt handler): Ctrl-C in a terminal reaches the whole process group, and the workers, each
    interrupted on its own, printed their traces of being cancelled; the client closes them instead."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_map(
    job: MapJob, out_dir: str, *, scheduler: str | None = None, workers: int | None = None, threads: bool = False,
    overwrite: bool = False, progress: Callable[[int, int, int, int], None] | None = None,
    on_start: Callable[[Any], None] | None = None, connect_timeout: float = CONNECT_TIMEOUT,
) -> MapRun:
    """Run (or resume) the map of ``job`` into ``out_dir``: local cluster with ``workers`` processes (default:
    every core; ``threads`` runs them as threads of this process), or the cluster at ``scheduler``. ``progress``
    is called as chunks finish; ``on_start(client)`` once the cluster is up (tests use it to find workers)."""
    check_workers(workers, scheduler)
    robot = RobotModel.from_urdf(job.urdf_text)
    brakes_from_config(robot, job.brake_config)
    check_map_spec(robot, job.spec)
    if scheduler is not None:
        check_scheduler_address(scheduler)
    if job.spec.cell_box is not None:  # fail here, in one line, rather than in every chunk
        from vtm_dynamics.core.stopping.workspace_map import chunk_states

        chunk_states(robot, job.spec, 0)
    spec = job.spec
    digest = inputs_hash(job.inputs())

    def rows_of(k: int) -> int:
        return min(spec.chunk_size, spec.n_states - k * spec.chunk_size)

    store = ChunkStore(out_dir, digest, spec.n_chunks, rows_of)
    try:
        return _run(job, store, digest, rows_of, scheduler, workers, threads, overwrite, progress, on_start,
                    connect_timeout)
    finally:
        store.close()


def _run(job: MapJob, store: ChunkStore, digest: str, rows_of: Callable[[int], int], scheduler: str | None,
         workers: int | None, threads: bool, overwrite: bool, progress: Any, on_start: Any,
         connect_timeout: float) -> MapRun:
    spec = job.spec
    store.open(job.inputs(), overwrite=overwrite)
    done = store.done_chunks()
    todo = [k for k in range(spec.n_chunks) if k not in done]
    failures: list[dict] = []
    start = time.monotonic()
    n_workers = 0
    done_states = sum(rows_of(k) for k in done)
    if todo:
        from distributed import as_completed

        client = _client(scheduler, workers, threads, connect_timeout)
        try:
            try:  # an existing cluster may have no worker yet: wait a little, never forever
                client.wait_for_workers(1, timeout=WORKER_WAIT)
            except (TimeoutError, OSError):
                raise MapInputError(f"scheduler: no worker joined {scheduler or 'the local cluster'} within "
                                    f"{WORKER_WAIT:g} s") from None
            n_workers = len(client.scheduler_info().get("workers", {}))
            if on_start is not None:
                on_start(client)
            # the job as a task's result, not scattered data: a scattered value is gone for good once every worker
            # holding it died (a single worker restarted by its nanny lost every remaining chunk), a task's result
            # is computed again
            remote_job = client.submit(job_of, job, key=f"job-{digest[:16]}", pure=False)
            futures = [client.submit(run_chunk, remote_job, digest, k, key=f"chunk-{digest[:16]}-{k}", pure=False)
                       for k in todo]
            new_states, finished = 0, len(done)
            for fut in as_completed(futures):
                k = int(fut.key.rsplit("-", 1)[1])
                try:
                    cols = fut.result()
                except ChunkFailure as err:
                    failures.append({"chunk": err.chunk, "state": err.state, "q": list(err.q), "v": list(err.v),
                                     "reason": err.reason})
                except Exception as err:  # noqa: BLE001 - e.g. a worker died too often: report, keep going
                    failures.append({"chunk": k, "state": None, "q": None, "v": None,
                                     "reason": f"{type(err).__name__}: {str(err).strip()[:200]}"})
                else:
                    store.write_chunk(k, cols)
                    new_states += rows_of(k)
                    done_states += rows_of(k)
                finished += 1
                fut.release()
                if progress is not None:
                    progress(done_states, new_states, finished, spec.n_chunks)
        finally:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()
    failures.sort(key=lambda f: f["chunk"])
    store.write_failures(failures)
    seconds = time.monotonic() - start
    computed = len(todo) - len(failures)
    if failures:
        return MapRun(None, None, tuple(failures), computed, len(done), n_workers, seconds, digest)
    path = store.combine()
    return MapRun(path, summarize_result(path), (), computed, len(done), n_workers, seconds, digest)
