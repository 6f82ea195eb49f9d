#!/usr/bin/env bash
# Rerun the numerical tests most sensitive to the floating-point kernels under other OpenBLAS core types and numpy
# SIMD levels than the machine's own, so that a figure that holds only on one CPU fails here, before a user with
# another CPU sees it. Called by .ci/run after the whole suite; any machine can run it (`make test-kernels`).
# A core type the CPU cannot run is reported in one line and skipped (OpenBLAS falls back to another one), and so
# is the core type the suite itself ran with.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
py="${VENV:-.venv}/bin/python"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
# the tests that compare with recorded figures, decide ranks at a tolerance, or take factorization paths
tests=(test/core/estop/test_brake_terms.py test/core/estop/test_estop.py test/core/estop/test_envelope.py
       test/core/switching test/core/robot/test_model.py test/core/reactions/test_absolute_coordinates.py
       test/core/reactions/test_solvability_sparse_unclear.py test/core/reactions/test_square_row_basis.py
       test/core/reactions/test_left_null_bounds.py)
# core type | numpy SIMD groups switched off: AVX-512 kernels; AVX2 kernels with numpy at AVX2; AVX kernels with
# numpy at its baseline
configs=("SkylakeX|" "Haswell|AVX512_ICL X86_V4" "Sandybridge|AVX512_ICL X86_V4 X86_V3")
native="$("$py" test/numeric_kernels.py)"  # what the whole suite ran with
echo "kernels of the suite's run: $native"
status=0
for config in "${configs[@]}"; do
  core="${config%%|*}"; off="${config#*|}"
  got="$(OPENBLAS_CORETYPE="$core" NPY_DISABLE_CPU_FEATURES="$off" "$py" test/numeric_kernels.py)"
  if [[ "$got" != *"numpy $core, scipy $core"* ]]; then
    echo "kernels: $core is not available on this CPU ($got); skipped"
    continue
  fi
  if [[ "$native" == *"numpy $core, scipy $core"* ]]; then
    continue  # the suite itself ran on this core type
  fi
  echo "kernels: $got"
  OPENBLAS_CORETYPE="$core" NPY_DISABLE_CPU_FEATURES="$off" "$py" -m pytest -q -p no:cacheprovider "${tests[@]}" \
    || status=1
done
exit $status
