"""The map's cluster stays on loopback, admits no foreign client, and is careful with files (scaleout/*).

Each case was reproduced against the earlier code: with ``--threads`` the scheduler's and the workers' HTTP servers
listened on 0.0.0.0 and ::; another process joined the local scheduler and ran code in the map's process
(``run_on_scheduler``); ``--overwrite`` with ``OUT/chunks`` a symbolic link deleted the files of the folder it
pointed to; chunks whose values were edited (metadata kept), and chunks of another engine, were mixed into a
resumed map; a scheduler address with a trailing newline passed the check, and a silent server kept the run waiting
(here: without end).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pyarrow.parquet as pq
import pytest

from test.ros_helpers import REPO_ROOT, inet_sockets, is_loopback, python_executable
from test.scaleout.test_map_runner import rows, small_job, ur5  # noqa: F401 - ur5 is a fixture
from vtm_dynamics.core.stopping.workspace_map import MapInputError
from vtm_dynamics.scaleout import map_runner
from vtm_dynamics.scaleout.chunk_store import StoreError
from vtm_dynamics.scaleout.map_runner import check_scheduler_address, run_map


def _processes_of_this_run() -> list[int]:
    import psutil

    me = psutil.Process()
    return [me.pid] + [p.pid for p in me.children(recursive=True)]


def _sockets(pids: list[int]) -> list[tuple[int, str, str, int]]:
    found = []
    for pid in pids:
        try:
            found += [(pid, proto, address, port) for proto, address, port in inet_sockets(pid)]
        except (FileNotFoundError, ProcessLookupError):
            pass  # a process that ended meanwhile
    return found


# A foreign client: another process that tries to join the scheduler and run code in it.
INTRUDER = textwrap.dedent("""
    import sys
    from distributed import Client
    from distributed.security import Security
    address = sys.argv[1]
    attempts = [(address, None), (address.replace("tls://", "tcp://"), None),
                (address.replace("tcp://", "tls://"), Security.temporary())]  # TLS with credentials of its own
    for attempt, security in attempts:
        try:
            client = Client(attempt, timeout="3s", **({"security": security} if security else {}))
            print("JOINED", client.run_on_scheduler(lambda: 42))
            client.close()
        except Exception as err:
            print("REFUSED", type(err).__name__)
""")


@pytest.mark.parametrize("threads", [False, True], ids=["processes", "threads"])
def test_every_listener_of_the_run_is_on_loopback_and_no_other_process_can_join(ur5, tmp_path, threads):
    seen: dict = {}

    def on_start(client):
        time.sleep(0.5)  # every server of the cluster is up
        seen["sockets"] = _sockets(_processes_of_this_run())
        seen["address"] = client.scheduler.address
        if not threads:
            out = subprocess.run([python_executable(), "-c", INTRUDER, client.scheduler.address], cwd=REPO_ROOT,
                                 capture_output=True, text=True, timeout=120)
            seen["intruder"] = out.stdout

    run = run_map(small_job(ur5, n=8, chunk=4), str(tmp_path / "run"), workers=1, threads=threads,
                  on_start=on_start)
    assert run.path is not None
    assert seen["sockets"], "no socket seen: the check would pass vacuously"
    outside = [s for s in seen["sockets"] if not is_loopback(s[2])]
    assert outside == [], outside
    if threads:
        assert seen["address"].startswith("inproc://")  # no socket for the scheduler at all
    else:
        assert seen["address"].startswith("tls://127.0.0.1:")
        assert "JOINED" not in seen["intruder"] and seen["intruder"].count("REFUSED") == 3, seen["intruder"]


def test_overwrite_never_deletes_through_a_symbolic_link(ur5, tmp_path):
    out, foreign = tmp_path / "run", tmp_path / "foreign"
    foreign.mkdir()
    for name in ("chunk-000000.parquet", "thesis.tex"):
        (foreign / name).write_text("not yours")
    out.mkdir()
    (out / "manifest.json").write_text('{"inputs_hash": "another run"}')
    os.symlink(foreign, out / "chunks")
    with pytest.raises(StoreError, match=r"chunks is not a folder \(a symbolic link\); nothing was changed"):
        run_map(small_job(ur5, n=4, chunk=4), str(out), workers=1, threads=True, overwrite=True)
    assert sorted(os.listdir(foreign)) == ["chunk-000000.parquet", "thesis.tex"]


def test_overwrite_deletes_only_the_files_the_tool_writes(ur5, tmp_path):
    out = tmp_path / "run"
    run_map(small_job(ur5, n=8, chunk=4), str(out), workers=1, threads=True)
    (out / "chunks" / "notes.txt").write_text("mine")
    (out / "my_plot.png").write_text("mine")
    job = small_job(ur5, n=12, chunk=4)  # other inputs
    run = run_map(job, str(out), workers=1, threads=True, overwrite=True)
    assert run.computed == 3
    assert (out / "chunks" / "notes.txt").read_text() == "mine" and (out / "my_plot.png").read_text() == "mine"


def test_a_symbolic_link_under_a_chunk_name_is_neither_read_nor_deleted(ur5, tmp_path):
    out = tmp_path / "run"
    run_map(small_job(ur5, n=8, chunk=4), str(out), workers=1, threads=True)
    elsewhere = tmp_path / "elsewhere.parquet"
    os.replace(out / "chunks" / "chunk-000001.parquet", elsewhere)
    os.symlink(elsewhere, out / "chunks" / "chunk-000001.parquet")
    with pytest.raises(StoreError, match="chunk-000001.parquet is not a regular file"):
        run_map(small_job(ur5, n=8, chunk=4), str(out), workers=1, threads=True)
    assert elsewhere.exists() and os.path.islink(out / "chunks" / "chunk-000001.parquet")


def test_edited_chunk_values_with_their_metadata_kept_are_recomputed(ur5, tmp_path):
    out = tmp_path / "run"
    job = small_job(ur5, n=8, chunk=4)
    first = run_map(job, str(out), workers=1, threads=True)
    path = out / "chunks" / "chunk-000001.parquet"
    table = pq.read_table(path)
    distance = table.column("tcp_straight_distance_m").to_numpy().copy()
    distance[0] *= 0.5  # a smaller stopping distance: the dangerous direction
    import pyarrow as pa

    edited = table.set_column(table.column_names.index("tcp_straight_distance_m"), "tcp_straight_distance_m",
                              pa.array(distance)).replace_schema_metadata(table.schema.metadata)
    pq.write_table(edited, path)
    (out / "stopping_map.parquet").unlink()
    resumed = run_map(job, str(out), workers=1, threads=True)
    assert resumed.computed == 1 and resumed.skipped == 1
    assert rows(resumed.path).equals(rows(first.path))


def test_chunks_of_another_engine_are_never_mixed_into_a_map(ur5, tmp_path, monkeypatch):
    out = tmp_path / "run"
    job = small_job(ur5, n=8, chunk=4)
    current = map_runner.software_fingerprint()
    assert current["vtm_dynamics"] and len(current["core_sha256"]) == 64
    assert current["engine_settings"]["step"] > 0 and "method" in current["engine_settings"]
    older = dict(current, core_sha256="0" * 64)
    monkeypatch.setattr(map_runner, "software_fingerprint", lambda: older)
    run_map(job, str(out), workers=1, threads=True)
    monkeypatch.setattr(map_runner, "software_fingerprint", lambda: current)
    with pytest.raises(StoreError, match="holds a run with other inputs"):
        run_map(job, str(out), workers=1, threads=True)


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786\n", " tcp://127.0.0.1:8786", "tcp://127.0.0.1:8786/x",
                                     "tcp://127.0.0.1:0", "http://127.0.0.1:8786", "tcp://a b:1"])
def test_a_scheduler_address_is_parsed_strictly(address):
    with pytest.raises(MapInputError, match="scheduler: expected"):
        check_scheduler_address(address)


def test_a_silent_server_is_given_up_after_the_connect_timeout(ur5, tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    outcome: list = []

    def run() -> None:
        try:
            run_map(small_job(ur5, n=4, chunk=4), str(tmp_path / "run"), scheduler=address, connect_timeout=1.0)
        except MapInputError as err:
            outcome.append(str(err))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(60.0)
    server.close()
    assert not worker.is_alive(), "the run still waits on a silent scheduler"
    assert outcome == [f"scheduler: no answer from {address} within 1 s (TimeoutError)"]
