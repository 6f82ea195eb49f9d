"""The set-up command refuses a machine it cannot work on with exactly one clear error line."""

import os
import shutil
import subprocess
import sys

import pytest

from test.ros_helpers import REPO_ROOT

SETUP = os.path.join(REPO_ROOT, "tools", "setup_env.sh")
BASE_TOOLS = ["bash", "env", "dirname", "cat", "sha256sum", "cut", "nproc", "mkdir", "rm", "tail", "grep", "head"]


def _path_with(tmp_path, tools, extra=None):
    """A PATH directory that holds only `tools` (symlinks to the real ones) plus `extra` scripts."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in tools:
        real = shutil.which(tool)
        assert real, tool
        os.symlink(real, bindir / tool)
    for name, text in (extra or {}).items():
        path = bindir / name
        path.write_text(text)
        path.chmod(0o755)
    return str(bindir)


def _run(tmp_path, path, **env_extra):
    env = {"PATH": path, "HOME": str(tmp_path), "VTM_VENV": str(tmp_path / "venv"), **env_extra}
    return subprocess.run([shutil.which("bash"), SETUP], capture_output=True, text=True, env=env, timeout=60)


def _error_lines(result):
    return [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]


def test_wrong_python_version_is_one_line(tmp_path):
    fake = "#!/bin/sh\necho 3.10\n"
    path = _path_with(tmp_path, BASE_TOOLS + ["cmake", "cc", "c++"], {"python3": fake})
    result = _run(tmp_path, path)
    assert result.returncode != 0
    lines = _error_lines(result)
    assert len(lines) == 1, lines
    assert "Python 3.11 is required" in lines[0] and "3.10" in lines[0]


@pytest.mark.parametrize("missing, word", [("cmake", "cmake"), ("cc", "C compiler"), ("c++", "C++ compiler")])
def test_missing_build_tool_is_one_line(tmp_path, missing, word):
    tools = [t for t in BASE_TOOLS + ["cmake", "cc", "c++"] if t != missing]
    path = _path_with(tmp_path, tools, {"python3": f"#!/bin/sh\nexec {sys.executable} \"$@\"\n"})
    result = _run(tmp_path, path)
    assert result.returncode != 0
    lines = _error_lines(result)
    assert len(lines) == 1, lines
    assert word in lines[0] and "not found" in lines[0]
    assert not (tmp_path / "venv").exists(), "nothing may be created before the prerequisites are checked"


def test_rerun_on_a_ready_environment_changes_nothing_and_is_quiet():
    result = subprocess.run(["bash", SETUP], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout
    assert "installing" not in result.stdout and "building" not in result.stdout
