#!/usr/bin/env bash
# Runs every suite of a sluice_cuda_tests binary in its own process (a suite that crashes or
# hangs cannot hide the others), prints the failing suites' output and one summary line:
#   tools/device_suites.sh [BIN]   (default .cache/device/payload/bin/sluice_cuda_tests)
# Exit status 1 when any suite failed. Meant for the GPU machine (docs/DEVICE.md).
set -uo pipefail
bin=${1:-.cache/device/payload/bin/sluice_cuda_tests}
passed=0
failed=()
for suite in $("$bin" --gtest_list_tests | grep -v '^ ' | tr -d '.'); do
  out=$(timeout 300 "$bin" --gtest_filter="${suite}.*" --gtest_brief=1 2>&1)
  n=$(echo "$out" | grep -oP '\[  PASSED  \] \K[0-9]+' | tail -1)
  passed=$((passed + ${n:-0}))
  if [ -z "$n" ] || echo "$out" | grep -q "FAILED\|Segmentation\|Aborted"; then
    failed+=("$suite")
    echo "$out" | tail -30
  fi
done
echo "sluice_cuda_tests, suite by suite: $passed passed, ${#failed[@]} failing suites: ${failed[*]}"
[ ${#failed[@]} -eq 0 ]
