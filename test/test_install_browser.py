"""tools/install_browser.sh (run by `make test`): Chromium from Debian's packages for the browser tests, or one
line saying why not, never a failed `make test` on a machine without apt-get."""

from __future__ import annotations

import os
import shutil
import subprocess

from test.ros_helpers import REPO_ROOT

SCRIPT = os.path.join(REPO_ROOT, "tools", "install_browser.sh")
TOOLS = ["bash", "env", "dirname", "mkdir", "tail", "id", "cat", "chmod"]


def _run(tmp_path, extra: dict[str, str], **env):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in TOOLS:
        os.symlink(shutil.which(tool), bindir / tool)
    for name, text in extra.items():
        (bindir / name).write_text("#!/bin/sh\n" + text)
        (bindir / name).chmod(0o755)
    environ = {"PATH": str(bindir), "HOME": str(tmp_path), "VTM_VENV": str(tmp_path / "venv"), **env}
    out = subprocess.run([shutil.which("bash"), SCRIPT], capture_output=True, text=True, env=environ, timeout=30)
    return out.returncode, [line for line in out.stdout.splitlines() if line.strip()]  # its own lines


def test_an_installed_chromium_is_used_as_it_is(tmp_path):
    code, lines = _run(tmp_path, {"chromium": "exit 0\n", "apt-get": "echo never >&2; exit 1\n"})
    assert code == 0 and lines == [f"browser: {tmp_path}/bin/chromium is installed"]


def test_without_apt_get_it_skips_in_one_line(tmp_path):
    code, lines = _run(tmp_path, {})
    assert code == 0 and len(lines) == 1 and lines[0].startswith("browser: skipped: no apt-get here")


def test_a_failing_apt_get_is_reported_and_does_not_fail_the_test_run(tmp_path):
    code, lines = _run(tmp_path, {"apt-get": "echo 'E: Unable to locate package chromium' >&2; exit 100\n"})
    assert code == 0
    assert lines[0].startswith("browser: installing Debian's chromium package (apt-get)")
    assert lines[-1].startswith("browser: apt-get could not install chromium")


def test_apt_get_installs_it(tmp_path):
    bindir = tmp_path / "bin"
    fake = f"echo \"$@\" >> {tmp_path}/apt.log\ncase \"$1\" in install) printf '#!/bin/sh\\n' > {bindir}/chromium; " \
           f"chmod +x {bindir}/chromium;; esac\n"
    code, lines = _run(tmp_path, {"apt-get": fake})
    assert code == 0 and lines[-1] == f"browser: installed {bindir}/chromium"
    assert (tmp_path / "apt.log").read_text().splitlines() == ["install -y --no-install-recommends chromium"]
