#!/usr/bin/env bash
# Check the launch files with a real `ros2 launch` on the pip-only machine (docs/ros.md, "How the launch file was
# checked"). launch, launch_ros, ros2cli, rosidl_runtime_py and composition_interfaces are not on PyPI: this
# script builds them from source into a throw-away directory, next to the project's .venv, and runs the launch.
#
# Usage: tools/check_launch.sh (--fetch | --sources DIR) [--work DIR] [--keep]
#   --fetch        clone the sources from github.com/ros2 at the tags below (network; only when you ask for it,
#                  never in CI)
#   --sources DIR  use checkouts already in DIR/{launch,launch_ros,ros2cli,rcl_interfaces,rosidl_runtime_py}
#   --work DIR     scratch directory (default: a new one under ${TMPDIR:-/tmp}); removed at the end unless --keep
#   --checks-only  with --work DIR of a kept earlier run: skip the builds, run the checks again
# Exit status 0 when every check passed; the first failing step is named on stderr.
#
# What it does, and why each step is there:
#  1. a fresh venv from the project's interpreter, with pip, setuptools and `wheel` (a fresh venv has no wheel,
#     and the source packages build as legacy setup.py projects);
#  2. the venv sees the project's .venv through a .pth file (rclpy wheels, vtm_msgs, Pinocchio, catkin_pkg, lark);
#     the rclpy wheels find their shared libraries from sys.prefix (their bootstrap .pth re-executes Python with
#     LD_LIBRARY_PATH set to <prefix>/lib and the ros_*.libs folders), which is now the new venv, so
#     LD_LIBRARY_PATH must name the project's .venv/lib and its ros_*.libs, or `import rclpy` fails;
#  3. pip installs (without dependencies) launch, launch_xml, launch_yaml, launch_ros, ros2launch, ros2cli,
#     ros2pkg, ros2run, ros2node, ros2topic, ros2param and rosidl_runtime_py (ros2param and ros2topic import
#     rosidl_runtime_py; `ros2 launch` needs ros2pkg to find the package);
#  4. composition_interfaces (launch_ros imports it) is built from rcl_interfaces with the wheels' rosidl
#     toolchain, as tools/setup_env.sh builds vtm_msgs: cmake with CMAKE_PREFIX_PATH and AMENT_PREFIX_PATH on the
#     .venv, installed into a scratch prefix;
#  5. vtm_msgs and vtm_dynamics are built with colcon (tools/colcon_build.sh) so that lib/vtm_dynamics/<node> and
#     share/vtm_dynamics/{launch,config} exist in the ament index;
#  6. AMENT_PREFIX_PATH lists the workspace, the scratch prefix and the .venv, PATH the new venv's bin (ros2)
#     beside the .venv's bin, PYTHONPATH the workspace's and the prefix's site-packages (the launch file imports
#     vtm_dynamics in the ros2 process): `ros2 launch` finds packages through AMENT_PREFIX_PATH and executables
#     through both;
#  7. the checks: `--show-args` lists the arguments docs/ros.md tables (names and count), a bad argument is one
#     line, and the vtm nodes (foreign nodes switched off) publish a stop prediction that robot_sim confirms,
#     in a private ROS_DOMAIN_ID on loopback; SIGINT ends the launch cleanly.
set -euo pipefail

# the source versions this was checked with (the development branches that became ROS 2 Kilted)
LAUNCH_TAG=3.7.1
LAUNCH_ROS_TAG=0.28.0
ROS2CLI_TAG=0.36.1
RCL_INTERFACES_TAG=2.2.0
ROSIDL_RUNTIME_PY_TAG=0.14.0

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VTM_VENV:-$root/.venv}"
say() { echo "check_launch: $*"; }
die() { echo "check_launch: error: $*" >&2; exit 1; }

sources="" fetch=0 work="" keep=0 checks_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --fetch) fetch=1 ;;
    --sources) sources="${2:?--sources needs a directory}"; shift ;;
    --work) work="${2:?--work needs a directory}"; shift ;;
    --keep) keep=1 ;;
    --checks-only) checks_only=1; keep=1 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[ "$fetch" = 1 ] || [ -n "$sources" ] || [ "$checks_only" = 1 ] \
  || die "give --fetch (clone from github.com/ros2) or --sources DIR"
if [ "$checks_only" = 1 ]; then [ -n "$work" ] && [ -x "$work/venv/bin/ros2" ] || die "--checks-only needs --work DIR of a kept run"; fi
[ -x "$venv/bin/python" ] || die "$venv/bin/python missing: run 'make setup' first"
if [ -z "$work" ]; then work="$(mktemp -d "${TMPDIR:-/tmp}/vtm-launch-check.XXXXXX")"; fi
mkdir -p "$work"
work="$(cd "$work" && pwd)"
cleanup() { if [ "$keep" = 0 ]; then rm -rf "$work"; else say "kept $work"; fi; }
trap cleanup EXIT
log="$work/log"; mkdir -p "$log"
run() { local name="$1"; shift; "$@" > "$log/$name.log" 2>&1 || { tail -n 20 "$log/$name.log" >&2; die "$name failed (log: $log/$name.log; --keep keeps it)"; }; }

site_old="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# what the wheels' bootstrap (ros_wheels_bootstrapper.pth, run in the .venv only) would put there: the prefix's lib
# and every ros_*.libs directory of the .venv's site-packages
wheel_libs="$(find "$site_old" -maxdepth 1 -type d -name 'ros_*.libs' | sort | tr '\n' ':')"
export LD_LIBRARY_PATH="$venv/lib:${wheel_libs%:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
py="$work/venv/bin/python"
prefix="$work/prefix"
ws="$work/ws/install"
if [ "$checks_only" = 0 ]; then
# --- sources ---------------------------------------------------------------------------------------------------
src="$work/src"; mkdir -p "$src"
for pair in "launch:$LAUNCH_TAG" "launch_ros:$LAUNCH_ROS_TAG" "ros2cli:$ROS2CLI_TAG" \
            "rcl_interfaces:$RCL_INTERFACES_TAG" "rosidl_runtime_py:$ROSIDL_RUNTIME_PY_TAG"; do
  name="${pair%%:*}" tag="${pair##*:}"
  if [ -n "$sources" ]; then
    [ -d "$sources/$name" ] || die "--sources: $sources/$name missing"
    ln -s "$(cd "$sources/$name" && pwd)" "$src/$name"
  else
    say "cloning ros2/$name $tag"
    run "clone-$name" git clone --quiet --depth 1 --branch "$tag" "https://github.com/ros2/$name.git" "$src/$name"
  fi
  say "$name at $(git -C "$src/$name" describe --tags 2>/dev/null || echo 'an untagged commit')"
done

# --- 1-3: a fresh venv that sees the project's environment ---------------------------------------------------
base_python="$("$venv/bin/python" -c 'import sys; print(sys._base_executable)')"
say "fresh venv from $base_python"
run venv "$base_python" -m venv "$work/venv"
run pip-tools "$py" -m pip install --disable-pip-version-check --quiet wheel setuptools
site_new="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# the .venv's site-packages, and the path set-up of its cmeel packages (Pinocchio), which the .venv does in a .pth
printf '%s\nimport cmeel_pth\n' "$site_old" > "$site_new/vtm_project_venv.pth"
run rclpy-in-new-venv "$py" -c "import rclpy, vtm_msgs.msg, pinocchio"
packages=("$src/launch/launch" "$src/launch/launch_xml" "$src/launch/launch_yaml" "$src/launch_ros/launch_ros"
          "$src/launch_ros/ros2launch" "$src/ros2cli/ros2cli" "$src/ros2cli/ros2pkg" "$src/ros2cli/ros2run"
          "$src/ros2cli/ros2node" "$src/ros2cli/ros2topic" "$src/ros2cli/ros2param"
          "$src/rosidl_runtime_py")
say "installing ${#packages[@]} source packages"
run pip-sources "$py" -m pip install --disable-pip-version-check --no-deps --no-build-isolation "${packages[@]}"
run pip-pypi "$py" -m pip install --disable-pip-version-check --quiet osrf_pycommon

# --- 4: composition_interfaces with the wheels' rosidl toolchain ----------------------------------------------
say "building composition_interfaces into $prefix"
py_include="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
mkdir -p "$work/build-ci"
run composition-cmake env AMENT_PREFIX_PATH="$venv" PATH="$venv/bin:$PATH" \
  cmake -S "$src/rcl_interfaces/composition_interfaces" -B "$work/build-ci" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_TESTING=OFF -DCMAKE_PREFIX_PATH="$venv" -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCMAKE_INSTALL_RPATH="$venv/lib;$prefix/lib" -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON \
  -DPython3_EXECUTABLE="$venv/bin/python" \
  -DCMAKE_PROJECT_INCLUDE="$root/tools/cmake/relocate_wheel_include_dirs.cmake" -DVTM_PYTHON_INCLUDE_DIR="$py_include"
run composition-build env PATH="$venv/bin:$PATH" cmake --build "$work/build-ci" -j "$(nproc)"
run composition-install cmake --install "$work/build-ci"

# --- 5: the two packages with colcon ---------------------------------------------------------------------------
say "building vtm_msgs and vtm_dynamics with colcon"
run colcon env VTM_VENV="$venv" "$root/tools/colcon_build.sh" "$work/ws"
fi
prefix_site="$(ls -d "$prefix"/lib/python3*/site-packages | head -n 1)"

# --- 6: the environment `ros2 launch` runs in ------------------------------------------------------------------
export AMENT_PREFIX_PATH="$ws/vtm_dynamics:$ws/vtm_msgs:$prefix:$venv"
export PATH="$work/venv/bin:$venv/bin:$PATH"
ws_sites="$(ls -d "$ws"/*/lib/python3*/site-packages | tr '\n' ':')"  # what install/setup.sh would add
export PYTHONPATH="${ws_sites}$prefix_site${PYTHONPATH:+:$PYTHONPATH}"
export LD_LIBRARY_PATH="$prefix/lib:$LD_LIBRARY_PATH"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID="${VTM_CHECK_DOMAIN_ID:-$(( (RANDOM % 100) + 1 ))}"
say "ROS_DOMAIN_ID=$ROS_DOMAIN_ID, discovery on this machine only"
run import-launch-ros "$py" -c "import launch_ros, composition_interfaces.srv, rosidl_runtime_py, ros2param"

# --- 7: the checks ---------------------------------------------------------------------------------------------
say "ros2 launch vtm_dynamics estop_predict.launch.py --show-args"
run show-args ros2 launch vtm_dynamics estop_predict.launch.py --show-args
"$venv/bin/python" - "$log/show-args.log" "$root/docs/ros.md" <<'EOF' || die "--show-args differs from docs/ros.md"
import re, sys
shown = re.findall(r"^\s+'([a-z_]+)':", open(sys.argv[1]).read(), flags=re.M)
doc = open(sys.argv[2]).read()
table = doc.split("| launch argument | default | meaning |")[1].split("\n\n")[0]
documented = re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.M)
count = re.search(r"`--show-args` lists the (\w+) arguments", doc)
words = {n: w for n, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve "
                                    "thirteen fourteen fifteen".split())}
print(f"check_launch: --show-args: {len(shown)} arguments: {', '.join(shown)}")
if sorted(shown) != sorted(documented):
    sys.exit(f"shown {sorted(set(shown) - set(documented))} not in the table; tabled "
             f"{sorted(set(documented) - set(shown))} not shown")
if not count or count.group(1) != words.get(len(shown)):
    sys.exit(f"docs/ros.md says '{count.group(1) if count else '?'}' arguments, --show-args lists {len(shown)}")
EOF

say "a bad argument is one line"
if ros2 launch vtm_dynamics estop_predict.launch.py robot:=foo > "$log/bad-arg.log" 2>&1; then
  die "robot:=foo was accepted"
fi
grep -q "Argument \"robot\" provided value \"foo\" is not valid" "$log/bad-arg.log" \
  || { cat "$log/bad-arg.log" >&2; die "robot:=foo: no one-line reason"; }

say "the vtm nodes: estop_predictor and robot_sim (foreign nodes off), waiting for the stop"
# job control on, so that the launch runs in its own process group with SIGINT not ignored (a script's background
# jobs ignore it otherwise, and `ros2 launch` would not see the Ctrl-C the check sends)
set -m
ros2 launch vtm_dynamics estop_predict.launch.py rviz:=false ghost:=false robot_state_publisher:=false \
  > "$log/launch.log" 2>&1 &
launch_pid=$!
set +m
ok=0
for _ in $(seq 1 60); do
  if grep -qE "prediction check estop-1: max \|rest angle error\|.*-> OK" "$log/launch.log"; then ok=1; break; fi
  kill -0 "$launch_pid" 2>/dev/null || break
  sleep 1
done
kill -INT "$launch_pid" 2>/dev/null || true
for _ in $(seq 1 20); do kill -0 "$launch_pid" 2>/dev/null || break; sleep 1; done
if kill -0 "$launch_pid" 2>/dev/null; then
  kill -TERM -- "-$launch_pid" 2>/dev/null || true
  die "ros2 launch did not end within 20 s of SIGINT (its process group was sent SIGTERM)"
fi
status=0; wait "$launch_pid" || status=$?
grep -E "prediction check estop-1" "$log/launch.log" | tail -n 1 || true
[ "$ok" = 1 ] || { tail -n 30 "$log/launch.log" >&2; die "no confirmed stop prediction within 60 s"; }
if grep -qiE "Traceback|process has died" "$log/launch.log"; then
  tail -n 30 "$log/launch.log" >&2; die "a process failed during the launch or its shutdown"
fi
say "SIGINT ended the launch (status $status)"
say "all checks passed"
