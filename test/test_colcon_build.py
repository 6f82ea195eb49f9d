"""colcon builds both packages of the repository (vtm_msgs, vtm_dynamics) and the result is usable."""

import os
import subprocess
import sys

from test.ros_helpers import REPO_ROOT, ros_subprocess_env


def test_colcon_builds_both_packages_and_the_install_space_imports(tmp_path):
    build = subprocess.run(
        ["bash", os.path.join(REPO_ROOT, "tools", "colcon_build.sh"), str(tmp_path)],
        capture_output=True, text=True, timeout=900,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert "2 packages finished" in build.stdout + build.stderr
    install = tmp_path / "install"
    assert (install / "vtm_dynamics" / "share" / "vtm_dynamics" / "package.xml").is_file()
    assert (install / "vtm_dynamics" / "lib" / "vtm_dynamics" / "estop_predictor").is_file()
    # Source the colcon install space and check that Python takes vtm_msgs from it, not from .venv.
    script = (
        f". {install}/setup.sh && {sys.executable} -c "
        "'import vtm_msgs.msg, vtm_msgs.srv, vtm_dynamics; print(vtm_msgs.__file__); "
        "print(vtm_msgs.msg.StopPrediction().CATEGORY_1)'"
    )
    env = ros_subprocess_env()
    env["AMENT_PREFIX_PATH"] = os.path.join(REPO_ROOT, ".venv")
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    module_file, category = run.stdout.split()
    assert module_file.startswith(str(install / "vtm_msgs")), module_file
    assert category == "1"
