#!/usr/bin/env bash
# Create or update the project's isolated environment (.venv) on a machine without a ROS 2 installation:
# ROS 2 Kilted wheels from PyPI, Pinocchio, numpy/scipy, the peers used by tests, then build the vtm_msgs
# interface package with the wheels' ament/rosidl toolchain into .venv, then install vtm_dynamics (editable).
# Each step is skipped when its inputs have not changed, so re-running it is fast and safe.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VTM_VENV:-$root/.venv}"
log_dir="$venv/.vtm-setup"

die() { echo "setup: error: $*" >&2; exit 1; }
say() { echo "setup: $*"; }

# --- prerequisites: one clear line each -------------------------------------------------------------------------
python_bin="${PYTHON:-}"
if [ -z "$python_bin" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then python_bin="$candidate"; break; fi
  done
fi
[ -n "$python_bin" ] || die "no python3 found; install Python 3.11 (the ROS 2 Kilted wheels on PyPI are built for CPython 3.11)"
py_version="$("$python_bin" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" \
  || die "'$python_bin' does not run"
[ "$py_version" = "3.11" ] || die "Python 3.11 is required (the ROS 2 Kilted wheels are CPython 3.11 only), '$python_bin' is $py_version; set PYTHON=/path/to/python3.11"
command -v cmake >/dev/null 2>&1 || die "cmake not found; it builds the vtm_msgs interfaces (Debian/Ubuntu: apt-get install cmake)"
command -v "${CC:-cc}" >/dev/null 2>&1 || die "C compiler '${CC:-cc}' not found; it builds the vtm_msgs interfaces (Debian/Ubuntu: apt-get install build-essential)"
command -v "${CXX:-c++}" >/dev/null 2>&1 || die "C++ compiler '${CXX:-c++}' not found; it builds the vtm_msgs interfaces (Debian/Ubuntu: apt-get install build-essential)"
py_include="$("$python_bin" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
[ -f "$py_include/Python.h" ] || die "Python headers missing ($py_include/Python.h); install the python3.11-dev package"

hash_of() { cat "$@" | sha256sum | cut -c1-16; }
stamp_ok() { [ -f "$log_dir/$1.stamp" ] && [ "$(cat "$log_dir/$1.stamp")" = "$2" ]; }
stamp_set() { echo "$2" > "$log_dir/$1.stamp"; }

# --- virtual environment and Python packages -------------------------------------------------------------------
if [ ! -x "$venv/bin/python" ]; then
  say "creating $venv"
  "$python_bin" -m venv "$venv" || die "could not create the virtual environment $venv"
fi
mkdir -p "$log_dir"
py="$venv/bin/python"

req_hash="$(hash_of "$root/requirements.txt" "$root/requirements-sparse-qr.txt")"
if stamp_ok requirements "$req_hash"; then
  say "python packages up to date"
else
  say "installing python packages (ROS 2 Kilted wheels, pinocchio, peers); log: $log_dir/pip.log"
  if ! "$py" -m pip install --disable-pip-version-check -r "$root/requirements.txt" \
       -r "$root/requirements-sparse-qr.txt" > "$log_dir/pip.log" 2>&1; then
    tail -n 15 "$log_dir/pip.log" >&2
    die "pip could not install requirements.txt and requirements-sparse-qr.txt (see $log_dir/pip.log)"
  fi
  stamp_set requirements "$req_hash"
fi

# --- vtm_msgs: rosidl build with the wheels' toolchain, installed into the venv prefix --------------------------
msgs_hash="$(hash_of "$root"/vtm_msgs/CMakeLists.txt "$root"/vtm_msgs/package.xml "$root"/vtm_msgs/msg/* \
  "$root"/vtm_msgs/srv/* "$root"/tools/cmake/relocate_wheel_include_dirs.cmake "$root/requirements.txt")"
if stamp_ok vtm_msgs "$msgs_hash" && "$py" -c "import vtm_msgs.msg, vtm_msgs.srv" >/dev/null 2>&1; then
  say "vtm_msgs up to date"
else
  say "building vtm_msgs; log: $log_dir/vtm_msgs.log"
  build="$log_dir/vtm_msgs-build"
  rm -rf "$build" && mkdir -p "$build"
  export AMENT_PREFIX_PATH="$venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
  if ! (cd "$build" && PATH="$venv/bin:$PATH" cmake "$root/vtm_msgs" \
          -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
          -DCMAKE_PREFIX_PATH="$venv" -DCMAKE_INSTALL_PREFIX="$venv" \
          -DCMAKE_INSTALL_RPATH="$venv/lib" -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON \
          -DPython3_EXECUTABLE="$py" \
          -DCMAKE_PROJECT_INCLUDE="$root/tools/cmake/relocate_wheel_include_dirs.cmake" \
          -DVTM_PYTHON_INCLUDE_DIR="$py_include" \
        && PATH="$venv/bin:$PATH" cmake --build . -j "$(nproc)" \
        && cmake --install .) > "$log_dir/vtm_msgs.log" 2>&1; then
    grep -E "CMake Error|error:" -A3 "$log_dir/vtm_msgs.log" | head -n 12 >&2 || true
    die "building vtm_msgs failed (full log: $log_dir/vtm_msgs.log)"
  fi
  stamp_set vtm_msgs "$msgs_hash"
fi

# --- vtm_dynamics itself (editable, so the checkout is what runs) ---------------------------------------------
pkg_hash="$(hash_of "$root/setup.py" "$root/setup.cfg")-$root"
if stamp_ok vtm_dynamics "$pkg_hash" && "$py" -c "import vtm_dynamics" >/dev/null 2>&1; then
  say "vtm_dynamics up to date"
else
  say "installing vtm_dynamics (editable)"
  "$py" -m pip install --disable-pip-version-check --no-deps -e "$root" > "$log_dir/vtm_dynamics.log" 2>&1 \
    || { tail -n 15 "$log_dir/vtm_dynamics.log" >&2; die "installing vtm_dynamics failed (see $log_dir/vtm_dynamics.log)"; }
  stamp_set vtm_dynamics "$pkg_hash"
fi

# --- the E-stop engine's compiled kernels: Numba compiles them once into its on-disk cache (tens of seconds), so
# that no test and no first prediction pays for it; later processes load them from the cache
kernels_hash="$(hash_of "$root"/vtm_dynamics/core/estop/compiled_*.py "$root/requirements.txt")"
if stamp_ok kernels "$kernels_hash"; then
  say "compiled E-stop kernels up to date"
else
  say "compiling the E-stop kernels (Numba, cached on disk)"
  "$py" -m vtm_dynamics.core.estop.warm_up > "$log_dir/kernels.log" 2>&1 \
    || { tail -n 15 "$log_dir/kernels.log" >&2; die "compiling the E-stop kernels failed (see $log_dir/kernels.log)"; }
  stamp_set kernels "$kernels_hash"
fi

"$py" -c "import vtm_msgs.msg, vtm_msgs.srv, vtm_dynamics, pinocchio, rclpy" \
  || die "the environment does not import (vtm_msgs, vtm_dynamics, pinocchio, rclpy)"
say "ready: $venv (activate with: source $venv/bin/activate)"
