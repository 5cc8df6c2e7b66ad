#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz/ and runs every one of them
# for SECONDS each, side by side, seeded from tests/golden/bad_files/. Corpora grow in
# .cache/fuzz/corpus-<name>/, findings land in .cache/fuzz/<name>-crash-* (and -leak-, -timeout-,
# -oom-), logs in .cache/fuzz/<name>.log. Exits nonzero when any fuzzer finds something.
# Usage: scripts/run_fuzzers.sh [SECONDS]   (env: FUZZ_BUILD=build-fuzz FUZZ_JOBS=$(nproc))
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${FUZZ_BUILD:-build-fuzz}"
jobs="${FUZZ_JOBS:-$(nproc)}"
cd "$root"

if [[ ! -f "$build/build.ninja" ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DSLUICE_FUZZ=ON -DSLUICE_CUDA=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
targets=()
for source in tests/fuzz/*.cpp; do targets+=("$(basename "$source" .cpp)"); done
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

mkdir -p .cache/fuzz
declare -A pids
for name in "${targets[@]}"; do
  format="${name#fuzz_}"  # fuzz_gguf -> gguf: the seeds' extension and the dictionary's name
  corpus=".cache/fuzz/corpus-$name"
  mkdir -p "$corpus"
  # Seeds: the valid bases and every malformed fixture of this format (cp -n keeps the corpus).
  for seed in tests/golden/bad_files/*."$format"; do
    [[ -e "$seed" ]] && cp -n "$seed" "$corpus/"
  done
  dict=()
  [[ -f "tests/fuzz/$format.dict" ]] && dict=("-dict=tests/fuzz/$format.dict")
  echo "fuzz: $name for ${seconds}s (log .cache/fuzz/$name.log)"
  "$build/fuzz/$name" -max_len=65536 -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix=".cache/fuzz/$name-" "${dict[@]}" "$corpus" \
      >".cache/fuzz/$name.log" 2>&1 &
  pids[$name]=$!
done

status=0
for name in "${targets[@]}"; do
  if wait "${pids[$name]}"; then
    result="ok"
  else
    result="FINDING (see .cache/fuzz/$name.log and .cache/fuzz/$name-*)"
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' ".cache/fuzz/$name.log" | grep -o '[0-9]*$' || true)
  cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' ".cache/fuzz/$name.log" | tail -n 1 || true)
  echo "fuzz: $name: $result; ${runs:-?} executions; ${cov:-no coverage line}"
done
exit "$status"
