"""``--view FILE.html`` and ``--serve`` of the command-line tools: the page is written (or served on loopback) with
what the tool computed, and a view that cannot be written is one line and status 2."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import urllib.request

import numpy as np

from test.ros_helpers import REPO_ROOT, default_signals, python_executable, ros_subprocess_env


def _scene(path) -> dict:
    text = open(path, encoding="utf-8").read()
    block = re.search(r'<script type="application/json" id="vtm-scene">(.*?)</script>', text, re.S)
    return json.loads(block.group(1))


def test_predict_writes_the_stop_with_its_worst_case(tmp_path, capsys):
    from vtm_dynamics.cli.predict import main, run_prediction

    out = tmp_path / "stop.html"
    assert main(["ur5", "--envelope", "1", "--json", str(tmp_path / "stop.json"), "--view", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    scene = _scene(out)
    assert [r["name"] for r in scene["robots"]] == ["robot", "start", "rest", "worst"]
    saved = json.loads((tmp_path / "stop.json").read_text())
    assert scene["robots"][0]["frames"] == len(saved["series"]["t_s"])  # the prediction the tool printed
    times = np.frombuffer(base64.b64decode(scene["robots"][0]["times"]), dtype="<f8")
    np.testing.assert_allclose(times, saved["series"]["t_s"])
    assert scene["duration"] == run_prediction("ur5")[0].prediction.t[-1]


def test_a_view_that_cannot_be_written_is_one_line_and_status_2(tmp_path, capsys):
    from vtm_dynamics.cli.predict import main

    assert main(["ur5", "--view", str(tmp_path / "no" / "such" / "dir" / "stop.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vtm-predict: error: view: cannot write 'stop.html'")


def test_solvability_view_marks_the_pairs(tmp_path, capsys):
    from vtm_dynamics.cli.solvability import main

    out = tmp_path / "four_bar.html"
    assert main([os.path.join(REPO_ROOT, "urdf", "parallelogram_4bar.urdf"), "--view", str(out)]) == 0
    scene = _scene(out)
    assert sorted(lb["text"] for lb in scene["labels"]) == [
        "A1 (not unique)", "A2 (not unique)", "O1 (not unique)", "O2 (not unique)", "drive_O1"]


def test_stopping_map_view_shows_its_states_and_box(tmp_path):
    from vtm_dynamics.cli.stopping_map import main

    out = tmp_path / "map.html"
    assert main(["ur5", "--states", "6", "--chunk-size", "6", "--threads", "--workers", "1", "--box", "0.2", "-0.5",
                 "0.0", "0.8", "0.5", "0.6", "--out", str(tmp_path / "run"), "--view", str(out)]) == 0
    scene = _scene(out)
    assert scene["clouds"][0]["n"] == 6 and any(s["name"] == "cell_box" for s in scene["shapes"])
    assert [lb["text"][:2] for lb in scene["labels"]] == ["#1", "#2", "#3"]


def test_serve_shows_the_view_on_loopback_until_interrupted(tmp_path):
    proc = subprocess.Popen([python_executable(), "-m", "vtm_dynamics.cli.predict", "planar_3r", "--serve"],
                            cwd=REPO_ROOT, env=ros_subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=default_signals)
    try:
        url = None
        for _ in range(200):
            line = proc.stdout.readline()
            found = re.search(r"serving on (http://127\.0\.0\.1:\d+/)", line)
            if found:
                url = found.group(1)
                break
        assert url, proc.stderr.read() if proc.poll() is not None else "no URL printed"
        with urllib.request.urlopen(url, timeout=10) as response:
            page = response.read().decode()
        assert "planar_3r: predicted stop" in page and 'id="vtm-scene"' in page
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=120)  # generous: a loaded machine may starve the exit for a while
        except subprocess.TimeoutExpired:
            with open(f"/proc/{proc.pid}/status", encoding="ascii") as fh:
                state = [x for x in fh.read().splitlines() if x.startswith(("State", "Sig", "Shd"))]
            proc.kill()
            proc.communicate()
            raise AssertionError(f"the served view did not stop on Ctrl-C within 120 s: {state}") from None
    assert proc.returncode == 0 and "view: stopped" in out


def test_check_trajectory_writes_and_serves_the_check_it_ran(tmp_path, capsys, monkeypatch):
    """What the page shows is the check's result, here computed again through the core API from the same files;
    ``--serve`` binds the real server on loopback and answers with the very page ``--view`` wrote (Ctrl-C is
    pressed once the page has been fetched)."""
    import threading
    import urllib.request

    import yaml

    from test.views.views_testdata import CHECK_CELL, CHECK_RATE, ur5_check
    from vtm_dynamics.cli.check_trajectory import main
    from vtm_dynamics.views import palette, serve

    _, trajectory, _, result, _ = ur5_check()
    plan, cell = tmp_path / "plan.yaml", tmp_path / "cell.yaml"
    plan.write_text(yaml.safe_dump(trajectory.as_message_dict()))
    cell.write_text(yaml.safe_dump(CHECK_CELL))
    bound, served = [], []
    serve_forever = serve.PageServer.serve_forever

    def fetch_once_then_interrupt(server, *args, **kwargs):
        bound.append(server.server_address)
        thread = threading.Thread(target=serve_forever, args=(server,), daemon=True)
        thread.start()
        try:
            with urllib.request.urlopen(server.url, timeout=30) as response:
                served.append(response.read())
        finally:
            server.shutdown()
            thread.join(timeout=30)
        raise KeyboardInterrupt

    monkeypatch.setattr(serve.PageServer, "serve_forever", fetch_once_then_interrupt)
    out = tmp_path / "check.html"
    argv = [str(plan), "--scene", str(cell), "--rate", str(CHECK_RATE), "--nominal", "--quiet"]
    assert main([*argv, "--view", str(out), "--serve"]) == 1  # unsafe, and the view written and served
    printed = capsys.readouterr().out
    assert f"wrote {out} (3-D view" in printed and "(loopback only)" in printed and "view: stopped" in printed
    assert len(bound) == 1 and bound[0][0] == "127.0.0.1" and f"serving on http://127.0.0.1:{bound[0][1]}/" in printed
    assert served == [out.read_bytes()]  # --serve shows the very page --view wrote
    scene = _scene(out)
    worst = result.worst
    p = worst.predictions[worst.case]
    robots = {r["name"]: r for r in scene["robots"]}
    assert list(robots) == ["robot", "estop", "stop", "stop_rest"] and robots["stop"]["appears"]
    times = np.frombuffer(base64.b64decode(robots["stop"]["times"]), dtype="<f8")
    assert times[0] == worst.sample.time and times[-1] == worst.sample.time + p.t[-1]
    closest = next(ln for ln in scene["lines"] if ln["name"] == "closest")
    np.testing.assert_allclose(np.frombuffer(base64.b64decode(closest["points"]), dtype="<f4").reshape(2, 3),
                               worst.points, atol=1e-6)
    assert {s["name"] for s in scene["shapes"]} >= {"obstacle_0", "obstacle_4", "floor"}
    for s in result.samples:
        span = next(sp for sp in scene["spans"] if sp["start"] <= s.time <= sp["end"])
        rgb = [int(span["color"][i:i + 2], 16) / 255 for i in (1, 3, 5)]
        np.testing.assert_allclose(rgb, palette.SAFE if s.safe else palette.UNSAFE, atol=0.5 / 255)


def test_check_trajectory_refuses_an_unwritable_view_before_it_checks(tmp_path, capsys):
    from vtm_dynamics.cli.check_trajectory import main

    missing = tmp_path / "no" / "such" / "dir" / "check.html"
    assert main(["no_plan.yaml", "--scene", "no_cell.yaml", "--view", str(missing)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vtm-check-trajectory: error: view: cannot write 'check.html': No such directory"]


def test_a_port_outside_0_to_65535_is_one_line_and_status_2(capsys):
    from vtm_dynamics.cli.check_trajectory import main

    assert main(["plan.yaml", "--scene", "cell.yaml", "--serve", "--port", "70000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vtm-check-trajectory: error: argument --port: expected a port 0..65535, got '70000' "
                   "(see vtm-check-trajectory --help)"]
