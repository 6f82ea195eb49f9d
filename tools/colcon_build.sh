#!/usr/bin/env bash
# Build both packages (vtm_msgs, vtm_dynamics) with colcon from the repository root, using the colcon and the
# ROS 2 wheels of the project's .venv (pip-only machine). Usage: tools/colcon_build.sh [WORKDIR]
# (build/, install/ and log/ go to WORKDIR, default: the repository root).
# In a ROS 2 installation use plain colcon instead (see README: "Building in a ROS 2 workspace").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VTM_VENV:-$root/.venv}"
work="${1:-$root}"
[ -x "$venv/bin/colcon" ] || { echo "colcon_build: error: $venv/bin/colcon missing; run 'make setup' first" >&2; exit 1; }
py="$venv/bin/python"
py_include="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
cd "$root"
# The repository root is itself a package, so colcon does not look below it: name vtm_msgs as a second base path.
AMENT_PREFIX_PATH="$venv" PATH="$venv/bin:$PATH" "$venv/bin/colcon" --log-base "$work/log" build \
  --base-paths . vtm_msgs --build-base "$work/build" --install-base "$work/install" \
  --event-handlers console_direct- \
  --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$py" -DCMAKE_PREFIX_PATH="$venv" \
    -DCMAKE_PROJECT_INCLUDE="$root/tools/cmake/relocate_wheel_include_dirs.cmake" -DVTM_PYTHON_INCLUDE_DIR="$py_include"
