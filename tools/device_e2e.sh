#!/usr/bin/env bash
# Runs on the lent GPU machine, once every part of tools/device_payload.sh was carried and copied
# into .cache/devstage/ (docs/DEVICE.md): unpacks them, then runs the CUDA kernel tests, the
# llamacpp-tiny suite on the CUDA backend, the CPU-vs-CUDA real-weights suite and the tiers' and
# recorded steps' invariants (test_cuda_tiers.py), each test
# runner's summary last. Any extra arguments are run afterwards as one more command, with the
# same environment (e.g. a benchmark).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD/.cache/device
if [ ! -d "$root/payload" ]; then
  mkdir -p "$root"
  cat .cache/devstage/payload.tgz.* | tar -xz -C "$root" || exit 1
fi
payload=$root/payload
export LD_LIBRARY_PATH="$payload/lib:${LD_LIBRARY_PATH:-}"
export SLUICE_BIN="$payload/bin/sluice" SLUICE_TESTDATA_DIR="$payload"
export SLUICE_TEST_MODELS_DIR="$payload/models" SLUICE_BUILD_DIR="${OUT:-/tmp}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
tools/device_suites.sh "$payload/bin/sluice_cuda_tests" | tail -40
SLUICE_TEST_BACKEND=cuda python3 -m pytest -q -rs -p no:cacheprovider tests/e2e/test_llamacpp_tiny.py \
  2>&1 | grep -E "max\|d\||passed|failed|xfail|XFAIL|FAILED|Error" | tail -120
python3 -m pytest -q -rs -s -p no:cacheprovider tests/e2e/test_cuda_parity.py 2>&1 | tail -40
python3 -m pytest -q -rs -p no:cacheprovider tests/e2e/test_cuda_tiers.py 2>&1 | tail -5
if [ $# -gt 0 ]; then "$@"; fi
